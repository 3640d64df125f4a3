"""Section ``model``: what the model is and what it needs, whatever its mode."""
from __future__ import annotations

import re

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .checks import Checker, describe, is_int

MODES = ("static", "dynamic")


#: A run-time value's dtype name: numpy's (``float32``, ``bfloat16``, ``object`` for
#: strings), ``sequence:<dtype>`` (a list of tensors), ``optional:<dtype>`` or
#: ``optional:sequence:<dtype>`` (None or the value).
VALUE_DTYPE = re.compile(r"(optional:)?(sequence:)?[a-z][a-z0-9_]*")


def known_dtype(name: str) -> bool:
    """Whether numpy knows the dtype ``name`` (``bfloat16`` and the like through ml_dtypes)."""
    try:
        np.dtype(name)
        return True
    except TypeError:
        pass
    try:
        import ml_dtypes  # noqa: F401  (registers bfloat16, float8_*, int4 by name)
        np.dtype(name)
        return True
    except (ImportError, TypeError):
        return False


def value_dtype(c: Checker, d: Mapping, key: str, where: str) -> str:
    """A run-time value's dtype name (see :data:`VALUE_DTYPE`), one numpy knows."""
    v = c.str(d, key, where)
    if not VALUE_DTYPE.fullmatch(v) or not known_dtype(
            v.removeprefix("optional:").removeprefix("sequence:")):
        c.fail(f"{where}.{key}", f"must be a dtype name, 'sequence:<dtype>', 'optional:<dtype>' "
                                 f"or 'optional:sequence:<dtype>', got {v!r}")
    return v


@dataclass(frozen=True)
class IOSpec:
    """One model input or output."""

    name: str
    dtype: str
    shape: tuple | None
    """Ints and symbols (strs); None when only the run knows the rank."""

    @staticmethod
    def parse(c: Checker, x: Any, where: str) -> "IOSpec":
        d = c.dict(x, where)
        return IOSpec(c.str(d, "name", where), value_dtype(c, d, "dtype", where),
                      c.symbolic_shape(d, "shape", where))

    def to_payload(self) -> dict:
        return {"name": self.name, "dtype": self.dtype,
                "shape": None if self.shape is None else list(self.shape)}


@dataclass(frozen=True)
class TargetRecord:
    """The compile target the model was built for (see :mod:`aircc.ops.targets`)."""

    name: str
    backend: str
    vector_class: str

    @staticmethod
    def parse(c: Checker, x: Any, where: str) -> "TargetRecord":
        d = c.dict(x, where)
        return TargetRecord(c.str(d, "name", where), c.str(d, "backend", where),
                            c.str(d, "vector_class", where))

    def to_payload(self) -> dict:
        return {"name": self.name, "backend": self.backend, "vector_class": self.vector_class}


@dataclass
class ModelSection:
    """Section ``model``."""

    name: str
    mode: str
    producer: str
    opsets: dict[str, int]
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    target: TargetRecord
    source_producer: str = ""
    compile_report: dict = field(default_factory=dict)
    """Free-form: what the compiler did (shown by ``aircc inspect``, read by nothing)."""

    @staticmethod
    def parse(payload: Any) -> "ModelSection":
        c = Checker("model")
        d = c.dict(payload, "")
        name = c.str(d, "name", "")
        mode = c.str(d, "mode", "")
        if mode not in MODES:
            c.fail("mode", f"must be 'static' or 'dynamic', got {mode!r}")
        producer = c.str(d, "producer", "")
        opsets = c.dict(c.get(d, "opsets", ""), "opsets")
        for dom, ver in opsets.items():
            if not isinstance(dom, str) or not is_int(ver):
                c.fail("opsets", f"must map str to int, got {describe(dom)} -> {describe(ver)}")
        ios = {key: [IOSpec.parse(c, t, f"{key}[{i}]")
                     for i, t in enumerate(c.list(c.get(d, key, ""), key))]
               for key in ("inputs", "outputs")}
        target = TargetRecord.parse(c, c.get(d, "target", ""), "target")
        source = d.get("source_producer", "")
        if not isinstance(source, str):
            c.fail("source_producer", f"must be a str, got {describe(source)}")
        report = d.get("compile_report") or {}
        c.dict(report, "compile_report")
        return ModelSection(name, mode, producer, dict(opsets), ios["inputs"], ios["outputs"],
                            target, source, dict(report))

    def to_payload(self) -> dict:
        return {"name": self.name, "mode": self.mode, "producer": self.producer,
                "source_producer": self.source_producer, "opsets": dict(self.opsets),
                "inputs": [i.to_payload() for i in self.inputs],
                "outputs": [o.to_payload() for o in self.outputs],
                "target": self.target.to_payload(), "compile_report": self.compile_report}

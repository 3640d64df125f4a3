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


#: Most levels of maps and lists a compile report nests (the compiler's: 3).
MAX_REPORT_DEPTH = 32


def check_plain_report(c: Checker, report: Mapping) -> None:
    """The compile report is what JSON holds (maps with str keys, lists, str, numbers, bools,
    nil), at most MAX_REPORT_DEPTH levels deep, so that ``aircc inspect --json`` can print it."""
    stack: list[tuple[Any, int]] = [(report, 1)]
    while stack:
        x, depth = stack.pop()
        if isinstance(x, (dict, list)):
            if depth > MAX_REPORT_DEPTH:
                c.fail("compile_report", f"nests more than {MAX_REPORT_DEPTH} levels")
            if isinstance(x, dict) and not all(isinstance(k, str) for k in x):
                c.fail("compile_report", "has a map whose keys are not all strs")
            stack += [(v, depth + 1) for v in (x.values() if isinstance(x, dict) else x)]
        elif not isinstance(x, (str, int, float, type(None))):
            c.fail("compile_report", f"holds {describe(x)}, which is not a JSON value")


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


#: Keys of the ``model`` section's optional ``onnx`` field, each required when it is present.
ONNX_STRINGS = ("producer_name", "producer_version", "domain", "doc_string", "graph_name",
                "graph_doc_string")
ONNX_KEYS = frozenset({*ONNX_STRINGS, "model_version", "metadata_props", "input_shapes",
                       "output_shapes"})


@dataclass(frozen=True)
class OnnxRecord:
    """What the ONNX model said of itself: its metadata (onnxruntime's ``get_modelmeta``)
    and the shapes its graph declares (dims: int, name, or None when unnamed)."""

    producer_name: str = ""
    producer_version: str = ""
    domain: str = ""
    model_version: int | None = None
    """None: the model sets no version."""
    doc_string: str = ""
    graph_name: str = ""
    graph_doc_string: str = ""
    metadata_props: dict[str, str] = field(default_factory=dict)
    input_shapes: dict[str, list | None] = field(default_factory=dict)
    """Input name -> declared shape (None: none declared)."""
    output_shapes: dict[str, list | None] = field(default_factory=dict)

    @staticmethod
    def parse(c: Checker, x: Any, io: Mapping[str, list[str]]) -> "OnnxRecord":
        """Strictly: every key present with its type, no other key, declared shapes only of
        the model's inputs and outputs (``io``: their names)."""
        d = c.dict(x, "onnx")
        unknown = sorted(str(k) for k in d if k not in ONNX_KEYS)
        if unknown:
            c.fail("onnx", f"has unknown keys {unknown} (known: {sorted(ONNX_KEYS)})")
        strings = {k: c.str(d, k, "onnx") for k in ONNX_STRINGS}
        version = c.get(d, "model_version", "onnx")
        if version is not None:
            c.int_value(version, "onnx.model_version")
        props = c.dict(c.get(d, "metadata_props", "onnx"), "onnx.metadata_props")
        for k, v in props.items():
            if not isinstance(k, str) or not isinstance(v, str):
                c.fail("onnx.metadata_props", f"must map str to str, got {describe(k)} -> "
                                              f"{describe(v)}")
        shapes = {}
        for key, kind in (("input_shapes", "inputs"), ("output_shapes", "outputs")):
            where = f"onnx.{key}"
            given = c.dict(c.get(d, key, "onnx"), where)
            for name, shape in given.items():
                if name not in io[kind]:
                    c.fail(where, f"names {describe(name)}, not one of the model's {kind} "
                                  f"{io[kind]}")
                if shape is not None:
                    for j, dim in enumerate(c.list(shape, f"{where}.{name}")):
                        if not (dim is None or isinstance(dim, str) or (is_int(dim) and dim >= 0)):
                            c.fail(f"{where}.{name}[{j}]", f"must be an int >= 0, a str or nil, "
                                                           f"got {describe(dim)}")
            shapes[key] = {n: None if v is None else list(v) for n, v in given.items()}
        return OnnxRecord(**strings, model_version=version, metadata_props=dict(props), **shapes)

    def to_payload(self) -> dict:
        return {**{k: getattr(self, k) for k in ONNX_STRINGS}, "model_version": self.model_version,
                "metadata_props": dict(self.metadata_props),
                "input_shapes": dict(self.input_shapes), "output_shapes": dict(self.output_shapes)}


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
    onnx: OnnxRecord | None = None
    """What the ONNX model said of itself; optional (None: the file does not say)."""

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
        check_plain_report(c, c.dict(report, "compile_report"))
        record = d.get("onnx")
        if record is not None:
            record = OnnxRecord.parse(c, record, {k: [s.name for s in v] for k, v in ios.items()})
        return ModelSection(name, mode, producer, dict(opsets), ios["inputs"], ios["outputs"],
                            target, source, dict(report), record)

    def to_payload(self) -> dict:
        return {"name": self.name, "mode": self.mode, "producer": self.producer,
                "source_producer": self.source_producer, "opsets": dict(self.opsets),
                "inputs": [i.to_payload() for i in self.inputs],
                "outputs": [o.to_payload() for o in self.outputs],
                "target": self.target.to_payload(), "compile_report": self.compile_report,
                **({} if self.onnx is None else {"onnx": self.onnx.to_payload()})}

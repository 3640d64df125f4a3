"""Section ``model``: what the model is and what it needs, whatever its mode."""
from __future__ import annotations

import re

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .checks import Checker, describe, is_int, join
from .kinds import PrecisionMode
from .schema import (Int, JsonMap, ListOf, MapOf, Nested, Optional, Record, Scalar, Str,
                     SymbolicShape, wire)

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


class ValueDtype(Str):
    """A run-time value's dtype name (see :data:`VALUE_DTYPE`), one numpy knows."""

    def read(self, c: Checker, v: Any, where: str) -> str:
        v = super().read(c, v, where)
        if not VALUE_DTYPE.fullmatch(v) or not known_dtype(
                v.removeprefix("optional:").removeprefix("sequence:")):
            c.fail(where, f"must be a dtype name, 'sequence:<dtype>', 'optional:<dtype>' "
                          f"or 'optional:sequence:<dtype>', got {v!r}")
        return v

    def text(self) -> str:
        return "value dtype"


def value_dtype(c: Checker, d: Mapping, key: str, where: str) -> str:
    """A run-time value's dtype name at ``d[key]`` (see :class:`ValueDtype`)."""
    return ValueDtype().read(c, c.get(d, key, where), join(where, key))


class DeclaredDim(Scalar):
    """A dim of a shape an ONNX model declares: an int >= 0, its name, or nil (unnamed)."""

    def read(self, c: Checker, v: Any, where: str) -> int | str | None:
        if not self.accepts(v):
            c.fail(where, f"must be an int >= 0, a str or nil, got {describe(v)}")
        return v

    def accepts(self, v: Any) -> bool:
        return v is None or isinstance(v, str) or (is_int(v) and v >= 0)

    def text(self) -> str:
        return "dim"


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
class IOSpec(Record):
    """One model input or output."""

    name: str = wire(Str())
    dtype: str = wire(ValueDtype())
    shape: tuple | None = wire(SymbolicShape())
    """Ints and symbols (strs); None when only the run knows the rank."""


@dataclass(frozen=True)
class TargetRecord(Record):
    """The compile target the model was built for (see :mod:`aircc.ops.targets`)."""

    name: str = wire(Str())
    backend: str = wire(Str())
    vector_class: str = wire(Str())


#: A shape an ONNX model declares for an input or output, or nil (none declared).
DECLARED_SHAPE = Optional(ListOf(DeclaredDim()))


@dataclass(frozen=True)
class OnnxRecord(Record, closed=True):
    """What the ONNX model said of itself: its metadata (onnxruntime's ``get_modelmeta``)
    and the shapes its graph declares.  Read strictly: every key present, no other."""

    producer_name: str = wire(Str(), "")
    producer_version: str = wire(Str(), "")
    domain: str = wire(Str(), "")
    model_version: int | None = wire(Optional(Int()), None)
    """None: the model sets no version."""
    doc_string: str = wire(Str(), "")
    graph_name: str = wire(Str(), "")
    graph_doc_string: str = wire(Str(), "")
    metadata_props: dict[str, str] = wire(MapOf(Str()), {})
    input_shapes: dict[str, list | None] = wire(MapOf(DECLARED_SHAPE), {})
    """Input name -> declared shape; only the model's inputs (:meth:`ModelSection.check`)."""
    output_shapes: dict[str, list | None] = wire(MapOf(DECLARED_SHAPE), {})


@dataclass
class ModelSection(Record):
    """Section ``model``."""

    name: str = wire(Str())
    mode: str = wire(Str(MODES))
    producer: str = wire(Str())
    opsets: dict[str, int] = wire(MapOf(Int()))
    inputs: list[IOSpec] = wire(ListOf(Nested(IOSpec)))
    outputs: list[IOSpec] = wire(ListOf(Nested(IOSpec)))
    target: TargetRecord = wire(Nested(TargetRecord))
    precision_mode: str = wire(Str(tuple(m.value for m in PrecisionMode)),
                               PrecisionMode.MUST_KEEP_ORIGIN_DTYPE.value)
    """The types the model computes in (``--precision_mode``); older files: the default."""
    source_producer: str = wire(Str(), "", shown=False)
    compile_report: dict = wire(JsonMap(), {})
    """Free-form: what the compiler did (shown by ``aircc inspect``, read by nothing)."""
    onnx: OnnxRecord | None = wire(Optional(Nested(OnnxRecord, "`onnx` (below)")), None)
    """What the ONNX model said of itself; optional (None: the file does not say)."""

    @classmethod
    def parse(cls, payload: Any) -> "ModelSection":
        return cls.read(Checker("model"), payload, "")

    def check(self, c: Checker, where: str) -> None:
        """The compile report is plain JSON; the ONNX record declares shapes only of the
        model's inputs and outputs."""
        check_plain_report(c, self.compile_report)
        if self.onnx is None:
            return
        for key, ios in (("input_shapes", self.inputs), ("output_shapes", self.outputs)):
            names = [io.name for io in ios]
            for name in getattr(self.onnx, key):
                if name not in names:
                    c.fail(f"onnx.{key}", f"names {describe(name)}, not one of the model's "
                                          f"{key.split('_')[0]}s {names}")

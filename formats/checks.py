"""Typed reading of section payloads: every check that fails raises ModelFormatError
naming the section and the path of the field (``section 'tasks': lists[0][3].kind ...``).

Also the dtypes the format can store and how they are named.
"""
from __future__ import annotations

import enum
import math
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import ml_dtypes
import numpy as np

from aircc.errors import ModelFormatError

#: ONNX's narrow element types as ml_dtypes' numpy dtypes, by name: bfloat16 (2 bytes), the
#: float8, float6 and float4 types, int4/uint4 and int2/uint2 (1 byte per element, unpacked).
ML_DTYPES = {name: np.dtype(getattr(ml_dtypes, name)) for name in (
    "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
    "int4", "uint4", "int2", "uint2")}

#: dtype names allowed for weights, operands and ndarrays inside payloads (stored little-endian).
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64",
                    "uint8", "uint16", "uint32", "uint64",
                    "float16", "float32", "float64", "complex64", "complex128", *ML_DTYPES})

#: Most dims a stored shape may have.
MAX_RANK = 64
#: Most dims a tensor a kernel reads or writes may have (an operand, a weight, a model's
#: input or output, a value of the execute graph): oneDNN's kernels take 12 (DNNL_MAX_NDIMS),
#: and a model runs on every kernel backend its target may fall back to.
MAX_KERNEL_RANK = 12

#: Most elements (counting only the non-zero dims) a stored shape may describe: what a
#: numpy array of the widest stored dtype (16 bytes) can hold.  An empty shape such as
#: ``[0, 2**62]`` would otherwise pass every size check and fail only when it is made.
MAX_ELEMENTS = (2**63 - 1) // 16

E = TypeVar("E", bound=enum.Enum)


def dtype_from_name(name: Any) -> np.dtype:
    """The little-endian numpy dtype for a stored dtype name; ValueError if not allowed."""
    if not isinstance(name, str) or name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r} (known: {', '.join(sorted(DTYPES))})")
    return ML_DTYPES[name] if name in ML_DTYPES else np.dtype(name).newbyteorder("<")


def dtype_name(dtype: np.dtype) -> str | None:
    """The stored name of a numpy dtype, or None if the format cannot store it."""
    if ML_DTYPES.get(dtype.name) == dtype:
        return dtype.name
    name = dtype.name if dtype.kind in "biufc" else None
    return name if name in DTYPES else None


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def array_spec(dtype: Any, shape: Any, nbytes: Any,
               max_rank: int = MAX_RANK) -> tuple[np.dtype, tuple[int, ...]]:
    """Check a stored array's dtype name, shape (at most ``max_rank`` dims) and byte size;
    ValueError if inconsistent."""
    dt = dtype_from_name(dtype)
    if (not isinstance(shape, (list, tuple)) or len(shape) > max_rank
            or not all(is_int(d) and d >= 0 for d in shape)):
        raise ValueError(f"shape must be a list of at most {max_rank} ints >= 0, got "
                         f"{describe(shape)}")
    if math.prod(d for d in shape if d) > MAX_ELEMENTS:
        raise ValueError(f"shape {list(shape)} has more elements than an array can hold")
    expect = math.prod(shape) * dt.itemsize
    if nbytes != expect:
        raise ValueError(f"nbytes is {nbytes} but shape {list(shape)} of {dt.name} "
                         f"needs {expect}")
    return dt, tuple(shape)


#: Short reprs of values read from a file: bounded in depth and length however large or
#: deeply nested the value is.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxtuple = 3, 6, 6, 6
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 40


def describe(x: Any) -> str:
    r = _SHORT.repr(x)
    return f"{type(x).__name__} {r[:40] + '...' if len(r) > 40 else r}"


def join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


class Checker:
    """Typed accessors into one section's payload (see the module doc)."""

    def __init__(self, section: str, prefix: str = ""):
        self.section = section
        self.prefix = prefix
        """Path of the payload inside the section (a gear's plan: ``plans[2].tasks``)."""

    def fail(self, where: str, msg: str) -> NoReturn:
        if self.prefix:
            where = f"{self.prefix}.{where}" if where and not where.startswith("[") else self.prefix + where
        loc = f"{where} " if where else ""
        raise ModelFormatError(f"section '{self.section}': {loc}{msg}")

    def dict(self, x: Any, where: str) -> Mapping:
        if not isinstance(x, Mapping):
            self.fail(where, f"must be a dict, got {describe(x)}")
        return x

    def list(self, x: Any, where: str) -> Sequence:
        if not isinstance(x, (list, tuple)):
            self.fail(where, f"must be a list, got {describe(x)}")
        return x

    def get(self, d: Mapping, key: str, where: str) -> Any:
        if key not in d:
            self.fail(where, f"is missing key '{key}'" if where else f"missing key '{key}'")
        return d[key]

    def str(self, d: Mapping, key: str, where: str) -> str:
        v = self.get(d, key, where)
        if not isinstance(v, str):
            self.fail(join(where, key), f"must be a str, got {describe(v)}")
        return v

    def bool(self, d: Mapping, key: str, where: str) -> bool:
        v = self.get(d, key, where)
        if not isinstance(v, bool):
            self.fail(join(where, key), f"must be a bool, got {describe(v)}")
        return v

    def int(self, d: Mapping, key: str, where: str, lo: int | None = None,
            hi: int | None = None) -> int:
        return self.int_value(self.get(d, key, where), join(where, key), lo, hi)

    def int_value(self, v: Any, where: str, lo: int | None = None, hi: int | None = None) -> int:
        bad = not is_int(v) or (lo is not None and v < lo) or (hi is not None and v >= hi)
        if bad:
            rng = "" if lo is None else f" >= {lo}" if hi is None else f" in [{lo}, {hi})"
            self.fail(where, f"must be an int{rng}, got {describe(v)}")
        return v

    def optional_int(self, d: Mapping, key: str, where: str, lo: int | None = None,
                     hi: int | None = None) -> int | None:
        """An int in range, or None (also when the key is absent)."""
        v = d.get(key)
        return None if v is None else self.int_value(v, join(where, key), lo, hi)

    def kind(self, d: Mapping, key: str, where: str, kinds: type[E]) -> E:
        """A value of the closed set ``kinds`` (an enum of strings)."""
        v = self.get(d, key, where)
        try:
            return kinds(v)
        except (ValueError, TypeError):
            self.fail(join(where, key),
                      f"must be one of {sorted(m.value for m in kinds)}, got {describe(v)}")

    def strs(self, d: Mapping, key: str, where: str) -> list[str]:
        """A list of strings."""
        out = self.list(self.get(d, key, where), join(where, key))
        for i, v in enumerate(out):
            if not isinstance(v, str):
                self.fail(f"{join(where, key)}[{i}]", f"must be a str, got {describe(v)}")
        return list(out)

    def dtype(self, d: Mapping, key: str, where: str) -> str:
        v = self.get(d, key, where)
        if not isinstance(v, str) or v not in DTYPES:
            self.fail(join(where, key), f"must be a stored dtype name, got {describe(v)}")
        return v

    def static_shape(self, d: Mapping, key: str, where: str) -> tuple[int, ...]:
        """A list of at most MAX_KERNEL_RANK ints >= 0, at most MAX_ELEMENTS elements."""
        shape = self.list(self.get(d, key, where), join(where, key))
        self._rank(shape, join(where, key))
        for j, dim in enumerate(shape):
            self.int_value(dim, f"{join(where, key)}[{j}]", lo=0)
        if math.prod(d for d in shape if d) > MAX_ELEMENTS:
            self.fail(join(where, key), f"{list(shape)} has more elements than an array can hold")
        return tuple(shape)

    def _rank(self, shape: Sequence, where: str) -> None:
        if len(shape) > MAX_KERNEL_RANK:
            self.fail(where, f"has {len(shape)} dims; a tensor has at most {MAX_KERNEL_RANK} (the "
                             f"most oneDNN's kernels take)")

    def symbolic_shape(self, d: Mapping, key: str, where: str) -> tuple | None:
        """None (rank unknown), or a list of at most MAX_KERNEL_RANK ints >= 0 and symbols (strs)."""
        return self.symbolic_shape_of(self.get(d, key, where), join(where, key))

    def symbolic_shape_of(self, shape: Any, where: str) -> tuple | None:
        """:meth:`symbolic_shape` of a value at path ``where``."""
        if shape is None:
            return None
        shape = self.list(shape, where)
        self._rank(shape, where)
        for j, dim in enumerate(shape):
            if not ((is_int(dim) and dim >= 0) or isinstance(dim, str)):
                self.fail(f"{where}[{j}]", f"must be an int or a str, got {describe(dim)}")
        return tuple(shape)


#: Stream priorities a model may give its streams (higher is served first).
PRIORITY_RANGE = (-7, 7)


def stream_priorities(c: Checker, d: Mapping, streams: int) -> list[int]:
    """The optional ``priorities`` of a section with ``streams`` streams: one int in
    PRIORITY_RANGE per stream (absent: all 0)."""
    if "priorities" not in d:
        return [0] * streams
    raw = c.list(d["priorities"], "priorities")
    if len(raw) != streams:
        c.fail("priorities", f"has {len(raw)} entries but streams is {streams}")
    lo, hi = PRIORITY_RANGE
    return [c.int_value(v, f"priorities[{i}]", lo, hi) for i, v in enumerate(raw)]

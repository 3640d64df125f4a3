"""Kernels of the broadcasting binary ops (arithmetic, comparison, logical), PRelu, Where,
the variadic Sum/Max/Min/Mean, and the binary ops' legacy versions (opset < 7).
Registration is table-driven: one line per op.  The ops are defined (shape rules,
traits) in :mod:`aircc.ops.defs.binary`.
"""
from __future__ import annotations

import numpy as np

from .epilogue import expanded
from .numpy_backend import NUMPY


def _div(a, b, y) -> None:
    """Division; integers truncate toward zero like C."""
    if y.dtype.kind not in "iu":
        np.divide(a, b, out=y)
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        np.floor_divide(a, b, out=y)
        if y.dtype.kind == "i":
            fix = (np.fmod(a, b) != 0) & ((a < 0) != (b < 0))
            np.add(y, 1, out=y, where=fix)


def _pow(a, b, y) -> None:
    if b.size == 1 and y.dtype.kind == "f":
        e = float(b.reshape(-1)[0])
        if e == 2.0:
            np.square(a, out=y)
            return
        if e == 1.0:
            np.copyto(y, a)
            return
        if e == 0.5:
            np.sqrt(a, out=y)
            return
    np.power(a, b, out=y, casting="unsafe")


def _mod(a, b, y, attrs) -> None:
    with np.errstate(divide="ignore", invalid="ignore"):
        if int(attrs.get("fmod", 0)):
            np.fmod(a, b, out=y)   # sign of the dividend, like C
        else:
            np.mod(a, b, out=y)    # sign of the divisor, like Python (floats too)


def _prelu(x, slope, y) -> None:
    np.multiply(x, slope, out=y)
    np.copyto(y, x, where=x >= 0)


#: (name, since, fn(a, b, y, attrs))
BINARY = [
    ("Add", 7, lambda a, b, y, at: np.add(a, b, out=y)),
    ("Sub", 7, lambda a, b, y, at: np.subtract(a, b, out=y)),
    ("Mul", 7, lambda a, b, y, at: np.multiply(a, b, out=y)),
    ("Div", 7, lambda a, b, y, at: _div(a, b, y)),
    ("Pow", 7, lambda a, b, y, at: _pow(a, b, y)),
    ("Mod", 10, _mod),
    ("PRelu", 7, lambda a, b, y, at: _prelu(a, b, y)),
    ("Equal", 7, lambda a, b, y, at: np.equal(a, b, out=y)),
    ("Less", 7, lambda a, b, y, at: np.less(a, b, out=y)),
    ("Greater", 7, lambda a, b, y, at: np.greater(a, b, out=y)),
    ("LessOrEqual", 12, lambda a, b, y, at: np.less_equal(a, b, out=y)),
    ("GreaterOrEqual", 12, lambda a, b, y, at: np.greater_equal(a, b, out=y)),
    ("And", 7, lambda a, b, y, at: np.logical_and(a, b, out=y)),
    ("Or", 7, lambda a, b, y, at: np.logical_or(a, b, out=y)),
    ("Xor", 7, lambda a, b, y, at: np.logical_xor(a, b, out=y)),
    ("BitwiseAnd", 18, lambda a, b, y, at: np.bitwise_and(a, b, out=y)),
    ("BitwiseOr", 18, lambda a, b, y, at: np.bitwise_or(a, b, out=y)),
    ("BitwiseXor", 18, lambda a, b, y, at: np.bitwise_xor(a, b, out=y)),
]


#: Binary ops bound once (``prepare``) as one ufunc call on operands fixed in advance.
UFUNCS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal,
          "Less": np.less, "Greater": np.greater}


def _register_binary(name, since, fn) -> None:
    def kernel(ins, outs, attrs, tiling, ws, fn=fn):
        fn(ins[0], ins[1], outs[0], attrs)

    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None,
                ufunc=UFUNCS.get(name)):
        """One ufunc call; a small constant operand made full-shape once (numpy's
        broadcasting iterator costs more than such an add)."""
        a, b, y = ins[0], ins[1], outs[0]
        if ufunc is None or a is None or b is None or a.dtype != b.dtype:
            return None
        a, b = expanded(a, y.shape, constant[0]), expanded(b, y.shape, constant[1])
        return lambda: ufunc(a, b, out=y)

    cls = type(name, (), {"kernel": staticmethod(kernel), "prepare": staticmethod(prepare),
                          "__doc__": f"Broadcasting {name}."})
    NUMPY.kernel(name, since)(cls)


for _entry in BINARY:
    _register_binary(*_entry)


#: Variadic ops: (name, ufunc combining two operands, divide by count at the end)
VARIADIC = [("Sum", np.add, False), ("Max", np.maximum, False), ("Min", np.minimum, False),
            ("Mean", np.add, True)]
#: Their versions: opset 8 made their broadcasting multidirectional; one kernel serves both.
VARIADIC_SINCE = (1, 8)


def _register_variadic(name, ufunc, mean) -> None:
    def kernel(ins, outs, attrs, tiling, ws):
        y = outs[0]
        np.copyto(y, ins[0])
        for x in ins[1:]:
            ufunc(y, x, out=y)
        if mean:
            np.divide(y, len(ins), out=y, casting="unsafe")

    for since in VARIADIC_SINCE:
        cls = type(f"{name}{since}", (), {"kernel": staticmethod(kernel),
                                          "__doc__": f"Variadic broadcasting {name}."})
        NUMPY.kernel(name, since)(cls)


for _entry in VARIADIC:
    _register_variadic(*_entry)


@NUMPY.kernel("Where", 9)
class Where:
    """Elementwise select with three-way broadcasting."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        cond, x, y = ins[0], ins[1], ins[2]
        out = outs[0]
        np.copyto(out, y)
        np.copyto(out, x, where=cond)


# ----------------------------------------------------- legacy broadcasting (opset < 7)
def _legacy_b(a: np.ndarray, b: np.ndarray, attrs: dict) -> np.ndarray:
    """B as opset-1/6 broadcasting sees it: unchanged, or aligned to A from ``axis``."""
    if not int(attrs.get("broadcast", 0)) or "axis" not in attrs or b.ndim == a.ndim:
        return b
    axis = int(attrs["axis"]) % max(a.ndim, 1)
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


def _register_legacy(name: str, since: int, fn) -> None:
    def kernel(ins, outs, attrs, tiling, ws):
        a, b = ins[0], ins[1]
        if name == "PRelu" and b.ndim == 1 and a.ndim >= 2 and b.shape[0] == a.shape[1] > 1:
            b = b.reshape((-1,) + (1,) * (a.ndim - 2))      # old PRelu: one slope per channel
        fn(a, _legacy_b(a, b, attrs), outs[0], attrs)

    cls = type(f"{name}{since}", (), {"kernel": staticmethod(kernel),
                                      "__doc__": f"{name} with opset-{since} broadcasting."})
    NUMPY.kernel(name, since)(cls)


_LEGACY_FNS = {entry[0]: entry[2] for entry in BINARY}
for _name, _since in (("Add", 1), ("Sub", 1), ("Mul", 1), ("Div", 1), ("Pow", 1), ("PRelu", 1),
                      ("Add", 6), ("Sub", 6), ("Mul", 6), ("Div", 6), ("PRelu", 6)):
    _register_legacy(_name, _since, _LEGACY_FNS[_name])


def bit_shift(a: np.ndarray, b: np.ndarray, y: np.ndarray, left: bool) -> None:
    """y = a << b or a >> b; a shift of the type's width or more (or negative) gives 0, and
    -1 for a negative a shifted right (numpy leaves those to the C compiler)."""
    width = a.dtype.itemsize * 8
    valid = (b >= 0) & (b < width)
    count = np.where(valid, b, 0)
    if left:
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        shifted = np.left_shift(a.view(unsigned), count.astype(unsigned)).view(a.dtype)
        np.copyto(y, np.where(valid, shifted, 0), casting="unsafe")
    else:
        rest = np.where(a < 0, -1, 0) if a.dtype.kind == "i" else 0
        np.copyto(y, np.where(valid, np.right_shift(a, count), rest), casting="unsafe")


def _bit_shift_kernel(ins, outs, attrs, tiling, ws) -> None:
    bit_shift(ins[0], ins[1], outs[0], attrs["direction"] == "LEFT")


for _since in (11, 28):
    NUMPY.kernel("BitShift", _since)(type(f"BitShift{_since}", (), {
        "kernel": staticmethod(_bit_shift_kernel),
        "__doc__": "a << b or a >> b, elementwise with numpy broadcasting."}))

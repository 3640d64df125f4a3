"""Kernels of TopK, CumSum, OneHot, Trilu, Hardmax (their shape rules:
:mod:`aircc.ops.defs.misc`)."""
from __future__ import annotations

import numpy as np

from aircc.ops.shapes import axis_plain

from .numpy_backend import NUMPY


# -------------------------------------------------------------------- TopK
def _topk_kernel(x: np.ndarray, k: int, outs, attrs) -> None:
    axis = axis_plain(attrs.get("axis", -1), x.ndim)
    largest = int(attrs.get("largest", 1))
    if largest:
        # order by decreasing value, ties by increasing index (stable sort of a
        # decreasing key; ~x is decreasing and overflow-free for integers)
        key = np.negative(x) if x.dtype.kind == "f" else (~x if x.dtype.kind in "iu"
                                                          else ~x.astype(np.int64))
    else:
        key = x
    idx = np.argsort(key, axis=axis, kind="stable")
    if largest and x.dtype.kind == "f":
        # NaN is the largest value (onnx's reference sorts as numpy does, NaN last), but
        # -NaN sorts last too: move the NaNs to the front, in index order
        nan = np.take_along_axis(np.isnan(x), idx, axis=axis)
        if nan.any():
            idx = np.take_along_axis(idx, np.argsort(~nan, axis=axis, kind="stable"), axis=axis)
    idx = np.take(idx, np.arange(k), axis=axis)
    np.copyto(outs[0], np.take_along_axis(x, idx, axis=axis))
    if len(outs) > 1 and outs[1] is not None:
        np.copyto(outs[1], idx)


@NUMPY.kernel("TopK", 1)
class TopK1:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _topk_kernel(ins[0], int(attrs["k"]), outs, attrs)


@NUMPY.kernel("TopK", 10)
class TopK10:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _topk_kernel(ins[0], int(np.asarray(ins[1]).reshape(-1)[0]), outs, attrs)


# ------------------------------------------------------------------ CumSum
@NUMPY.kernel("CumSum", 11)
class CumSum:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        axis = axis_plain(int(np.asarray(ins[1]).reshape(-1)[0]), x.ndim)
        rev = int(attrs.get("reverse", 0))
        src = np.flip(x, axis) if rev else x
        dst = np.flip(y, axis) if rev else y
        if int(attrs.get("exclusive", 0)):
            n = x.shape[axis]
            lead = [slice(None)] * x.ndim
            lead[axis] = slice(0, 1)
            dst[tuple(lead)] = 0
            if n > 1:
                a, b = list(lead), list(lead)
                a[axis], b[axis] = slice(1, n), slice(0, n - 1)
                np.cumsum(src[tuple(b)], axis=axis, out=dst[tuple(a)])
        else:
            np.cumsum(src, axis=axis, out=dst)


# ------------------------------------------------------------------ OneHot
@NUMPY.kernel("OneHot", 9)
class OneHot:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        idx, depth, values = ins[0], int(np.asarray(ins[1]).reshape(-1)[0]), ins[2]
        y = outs[0]
        axis = axis_plain(attrs.get("axis", -1), y.ndim)
        off, on = values.reshape(-1)[0], values.reshape(-1)[1]
        idx = idx.astype(np.int64)
        idx = np.where(idx < 0, idx + depth, idx)
        shape = [1] * y.ndim
        shape[axis] = depth
        pos = np.arange(depth).reshape(shape)
        y[...] = off
        np.copyto(y, on, where=np.expand_dims(idx, axis) == pos)


# ------------------------------------------------------------------- Trilu
@NUMPY.kernel("Trilu", 14)
class Trilu:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        k = int(np.asarray(ins[1]).reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else 0
        n, m = x.shape[-2:]
        if int(attrs.get("upper", 1)):
            drop = np.tri(n, m, k - 1, dtype=bool)  # keep j - i >= k
        else:
            drop = ~np.tri(n, m, k, dtype=bool)  # keep j - i <= k
        np.copyto(y, x)
        np.copyto(y, y.dtype.type(0), where=drop)  # a Python 0 does not cast to bool


# ------------------------------------------------------------------ Hardmax
@NUMPY.kernel("Hardmax", 13)
class Hardmax:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        axis = axis_plain(attrs.get("axis", -1), x.ndim)
        y[...] = 0
        np.put_along_axis(y, np.argmax(x, axis=axis, keepdims=True), 1, axis=axis)

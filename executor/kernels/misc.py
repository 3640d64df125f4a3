"""TopK, CumSum, OneHot, Trilu, Hardmax."""
from __future__ import annotations

import numpy as np

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import axis_plain, is_int, norm_axis
from aircc.executor.kernels.registry import InferContext, op


# -------------------------------------------------------------------- TopK
def _topk_infer(ctx: InferContext, k) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    axis = norm_axis(ctx, ctx.attrs.get("axis", -1), len(xs))
    if k is None:
        d = ctx.sym(axis)
    else:
        if k < 0 or (is_int(xs[axis]) and k > xs[axis]):
            ctx.fail(f"k={k} is out of range for axis {axis} of size {xs[axis]}")
        d = k
    shape = tuple(d if i == axis else s for i, s in enumerate(xs))
    return [TensorType(xt.dtype, shape), TensorType("int64", shape)][:max(ctx.num_outputs, 1)]


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
    idx = np.take(idx, np.arange(k), axis=axis)
    np.copyto(outs[0], np.take_along_axis(x, idx, axis=axis))
    if len(outs) > 1 and outs[1] is not None:
        np.copyto(outs[1], idx)


@op("TopK", since=1)
class TopK1:
    """Largest ``k`` (attribute) values along ``axis`` and their indices."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        return _topk_infer(ctx, int(ctx.attrs["k"]))

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _topk_kernel(ins[0], int(attrs["k"]), outs, attrs)


@op("TopK", since=10, value_inputs=(1,))
class TopK10:
    """TopK with ``k`` as input 1 (``largest``/``sorted`` since 11; results are always
    sorted)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        v = ctx.value(1)
        return _topk_infer(ctx, None if v is None else int(np.asarray(v).reshape(-1)[0]))

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _topk_kernel(ins[0], int(np.asarray(ins[1]).reshape(-1)[0]), outs, attrs)


# ------------------------------------------------------------------ CumSum
@op("CumSum", since=11)
class CumSum:
    """Cumulative sum along the axis given by input 1 (``exclusive``, ``reverse``)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        ctx.input_type(1)
        return [ctx.input_type(0)]

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
@op("OneHot", since=9, value_inputs=(1,))
class OneHot:
    """values[1] where index == position along the new ``axis`` (default -1), else
    values[0]; negative indices count from ``depth`` (since 11)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        ishape = ctx.input_shape(0)
        vt = ctx.input_type(2)
        r = len(ishape) + 1
        axis = norm_axis(ctx, ctx.attrs.get("axis", -1), r)
        d = ctx.value(1)
        depth = int(np.asarray(d).reshape(-1)[0]) if d is not None else ctx.sym(axis)
        shape = list(ishape)
        shape.insert(axis, depth)
        return [TensorType(vt.dtype, tuple(shape))]

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
@op("Trilu", since=14)
class Trilu:
    """Keep the upper (default) or lower triangle of the last two dims, offset by k."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        if len(ctx.input_shape(0)) < 2:
            ctx.fail("input must have rank >= 2")
        return [ctx.input_type(0)]

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
        np.copyto(y, 0, where=drop)


# ------------------------------------------------------------------ Hardmax
@op("Hardmax", since=13)
class Hardmax:
    """1 at the first maximum along ``axis`` (default -1), 0 elsewhere."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        norm_axis(ctx, ctx.attrs.get("axis", -1), len(ctx.input_shape(0)))
        return [ctx.input_type(0)]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        axis = axis_plain(attrs.get("axis", -1), x.ndim)
        y[...] = 0
        np.put_along_axis(y, np.argmax(x, axis=axis, keepdims=True), 1, axis=axis)

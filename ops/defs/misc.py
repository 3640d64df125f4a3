"""TopK, CumSum, OneHot, Trilu, Hardmax."""
from __future__ import annotations

from typing import Optional

import numpy as np

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import is_int, norm_axis
from aircc.ops.types import TensorType


# -------------------------------------------------------------------- TopK
def _topk_infer(ctx: InferContext, k: Optional[int]) -> list[TensorType]:
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


@define("TopK", 1)
def topk1(ctx: InferContext) -> list[TensorType]:
    """Largest ``k`` (attribute) values along ``axis`` and their indices."""
    return _topk_infer(ctx, int(ctx.attrs["k"]))


@define("TopK", 10, value_inputs=(1,))
def topk10(ctx: InferContext) -> list[TensorType]:
    """TopK with ``k`` as input 1 (``largest``/``sorted`` since 11; results are always sorted)."""
    v = ctx.value(1)
    return _topk_infer(ctx, None if v is None else int(np.asarray(v).reshape(-1)[0]))


# ------------------------------------------------------------------ CumSum
@define("CumSum", 11)
def cumsum(ctx: InferContext) -> list[TensorType]:
    """Cumulative sum along the axis given by input 1 (``exclusive``, ``reverse``)."""
    ctx.input_type(1)
    return [ctx.input_type(0)]


# ------------------------------------------------------------------ OneHot
@define("OneHot", 9, value_inputs=(1,))
def one_hot(ctx: InferContext) -> list[TensorType]:
    """values[1] at each index along a new ``axis`` (negatives count from depth), else values[0]."""
    ishape = ctx.input_shape(0)
    vt = ctx.input_type(2)
    r = len(ishape) + 1
    axis = norm_axis(ctx, ctx.attrs.get("axis", -1), r)
    d = ctx.value(1)
    depth = int(np.asarray(d).reshape(-1)[0]) if d is not None else ctx.sym(axis)
    shape = list(ishape)
    shape.insert(axis, depth)
    return [TensorType(vt.dtype, tuple(shape))]


# ------------------------------------------------------------------- Trilu
@define("Trilu", 14)
def trilu(ctx: InferContext) -> list[TensorType]:
    """Keep the upper (default) or lower triangle of the last two dims, offset by k."""
    if len(ctx.input_shape(0)) < 2:
        ctx.fail("input must have rank >= 2")
    return [ctx.input_type(0)]


# ------------------------------------------------------------------ Hardmax
@define("Hardmax", 13)
def hardmax(ctx: InferContext) -> list[TensorType]:
    """1 at the first maximum along ``axis`` (default -1), 0 elsewhere."""
    norm_axis(ctx, ctx.attrs.get("axis", -1), len(ctx.input_shape(0)))
    return [ctx.input_type(0)]

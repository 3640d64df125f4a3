"""Reductions: Reduce* (axes as an attribute, or from ReduceSum-13 / the others' version 18
as an optional input) and ArgMax / ArgMin."""
from __future__ import annotations

from typing import Optional

import numpy as np

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import ints, norm_axes, norm_axis, vector_len
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType

#: What each Reduce* op reduces with.
REDUCE_OPS: dict[str, str] = {
    "ReduceSum": "the sum",
    "ReduceMean": "the mean",
    "ReduceMax": "the maximum",
    "ReduceMin": "the minimum",
    "ReduceProd": "the product",
    "ReduceL1": "the sum of absolute values",
    "ReduceL2": "the square root of the sum of squares",
    "ReduceSumSquare": "the sum of squares",
    "ReduceLogSum": "the log of the sum",
    "ReduceLogSumExp": "the log of the sum of exponentials",
}

#: Version from which the axes are an input instead of an attribute.
AXES_INPUT_SINCE: dict[str, int] = {name: (13 if name == "ReduceSum" else 18) for name in REDUCE_OPS}

#: Reductions that may run on the host (shape arithmetic in dynamic mode).
_HOST_CAPABLE = frozenset({"ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"})


def _reduced_shape(ctx: InferContext, shape, axes: Optional[list[int]], keep: bool) -> tuple:
    """Shape after reducing ``axes`` (None = all)."""
    rank = len(shape)
    red = set(range(rank)) if axes is None else set(norm_axes(ctx, axes, rank))
    if keep:
        return tuple(1 if i in red else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in red)


def _infer_attr_axes(ctx: InferContext) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    axes = ctx.attrs.get("axes")
    keep = bool(ctx.attrs.get("keepdims", 1))
    return [TensorType(xt.dtype, _reduced_shape(ctx, xs, list(axes) if axes else None, keep))]


def _infer_input_axes(ctx: InferContext) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    keep = bool(ctx.attrs.get("keepdims", 1))
    noop = bool(ctx.attrs.get("noop_with_empty_axes", 0))
    if ctx.has_input(1):
        v = ctx.value(1)
        if v is None:
            n = vector_len(ctx, 1)
            if n == 0:
                v = np.zeros(0, np.int64)
            else:
                # which axes are reduced is only known at run time
                if keep:
                    return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs))))]
                if n is None:
                    return [TensorType(xt.dtype, None)]
                return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs) - n)))]
        axes = ints(v)
    else:
        axes = []
    if not axes:
        return [TensorType(xt.dtype, tuple(xs) if noop else _reduced_shape(ctx, xs, None, keep))]
    return [TensorType(xt.dtype, _reduced_shape(ctx, xs, axes, keep))]


def _rule(infer, doc: str):
    """``infer`` under a function of its own carrying ``doc`` (the definition's docstring)."""

    def rule(ctx: InferContext) -> list[TensorType]:
        return infer(ctx)

    rule.__doc__ = doc
    return rule


for _name, _what in REDUCE_OPS.items():
    _doc = f"{_what[0].upper()}{_what[1:]} of the input over ``axes`` (all when empty)."
    _traits = {Trait.HOST_CAPABLE} if _name in _HOST_CAPABLE else set()
    define(_name, 1, traits=_traits)(_rule(_infer_attr_axes, _doc))
    define(_name, AXES_INPUT_SINCE[_name], value_inputs=(1,), traits=_traits)(
        _rule(_infer_input_axes, _doc))


def _infer_arg(ctx: InferContext) -> list[TensorType]:
    xs = ctx.input_shape(0)
    axis = norm_axis(ctx, ctx.attrs.get("axis", 0), max(len(xs), 1))
    keep = bool(ctx.attrs.get("keepdims", 1))
    return [TensorType("int64", _reduced_shape(ctx, xs, [axis], keep))]


@define("ArgMax", 1)
def argmax(ctx: InferContext) -> list[TensorType]:
    """Index of the (first, or last with select_last_index) maximum along ``axis``."""
    return _infer_arg(ctx)


@define("ArgMin", 1)
def argmin(ctx: InferContext) -> list[TensorType]:
    """Index of the (first, or last with select_last_index) minimum along ``axis``."""
    return _infer_arg(ctx)

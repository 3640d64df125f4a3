"""Softmax and LogSoftmax: since 1 (input coerced to 2-D at ``axis``, default 1) and
since 13 (along ``axis``, default -1)."""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import broadcast_shapes, norm_axis
from aircc.ops.types import TensorType


def _same_type(ctx: InferContext, default_axis: int) -> list[TensorType]:
    xs = ctx.input_shape(0)
    rank = max(len(xs), 1)
    norm_axis(ctx, ctx.attrs.get("axis", default_axis), rank)
    return [ctx.input_type(0)]


@define("Softmax", 1)
def softmax1(ctx: InferContext) -> list[TensorType]:
    """Softmax of the input seen as 2-D (dims before ``axis`` by the rest), per row."""
    return _same_type(ctx, 1)


@define("Softmax", 13)
def softmax13(ctx: InferContext) -> list[TensorType]:
    """Softmax along ``axis``; with ``fused_add`` (fuse-add-softmax), of the sum of its two inputs."""
    if not ctx.attrs.get("fused_add"):
        return _same_type(ctx, -1)
    # the Add before it (fuse-add-softmax): the result has the sum's shape
    at, bt = ctx.input_type(0), ctx.input_type(1)
    if at.dtype != bt.dtype:
        ctx.fail(f"fused_add operands differ in type: {at.dtype} vs {bt.dtype}")
    shape = broadcast_shapes(ctx, at.shape, bt.shape)
    if shape is not None:
        norm_axis(ctx, ctx.attrs.get("axis", -1), max(len(shape), 1))
    return [TensorType(at.dtype, shape)]


@define("LogSoftmax", 1)
def log_softmax1(ctx: InferContext) -> list[TensorType]:
    """Log of the softmax of the input seen as 2-D (dims before ``axis`` by the rest), per row."""
    return _same_type(ctx, 1)


@define("LogSoftmax", 13)
def log_softmax13(ctx: InferContext) -> list[TensorType]:
    """Log of the softmax along ``axis``."""
    return _same_type(ctx, -1)

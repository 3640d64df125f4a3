"""Normalisations: BatchNormalization (inference), LRN, LayerNormalization,
InstanceNormalization."""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import broadcast_shapes, norm_axis
from aircc.ops.types import TensorType


@define("BatchNormalization", since=1)
def batch_normalization(ctx: InferContext) -> list[TensorType]:
    """Inference mode: y = (x - mean) / sqrt(var + eps) * scale + B, per channel (axis 1)."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    if len(xs) < 2:
        ctx.fail(f"X must have rank >= 2, got {xs}")
    if int(ctx.attrs.get("training_mode", 0)) or ctx.num_outputs > 1:
        ctx.unsupported("training mode (running mean/var outputs) is not supported")
    for i in range(1, 5):
        ctx.input_shape(i)
    return [TensorType(xt.dtype, xs)]


@define("LRN", since=1)
def lrn(ctx: InferContext) -> list[TensorType]:
    """Local response normalisation across channels."""
    xs = ctx.input_shape(0)
    if len(xs) < 3:
        ctx.fail(f"X must have rank >= 3, got {xs}")
    if "size" not in ctx.attrs:
        ctx.fail("attribute size is required")
    return [ctx.input_type(0)]


@define("LayerNormalization", since=17)
def layer_normalization(ctx: InferContext) -> list[TensorType]:
    """Normalise over axes [axis, rank); outputs Y and optionally Mean, InvStdDev."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    axis = norm_axis(ctx, ctx.attrs.get("axis", -1), len(xs))
    ctx.input_type(1)
    stash_type = int(ctx.attrs.get("stash_type", 1))
    if stash_type != 1:
        ctx.unsupported(f"stash_type {stash_type} is not supported (only 1, float32)")
    stash = "float32"  # type of Mean / InvStdDev
    if ctx.attrs.get("fused_add") and ctx.num_inputs >= 4:
        # the residual Add before it (fuse-add-layernorm): normalise the sum's shape
        xs = broadcast_shapes(ctx, xs, ctx.input_shape(3))
        if len(xs) != len(ctx.input_shape(0)):
            ctx.fail(f"fused_add residual {ctx.input_shape(3)} has a higher rank than X")
    red = tuple(xs[:axis]) + (1,) * (len(xs) - axis)
    outs = [TensorType(xt.dtype, xs)]
    outs += [TensorType(stash, red)] * (ctx.num_outputs - 1)
    if ctx.attrs.get("fused_add") and (ctx.num_inputs < 4 or ctx.input_type(3).dtype != xt.dtype):
        ctx.fail("fused_add needs the residual as input 3, of X's dtype")
    if ctx.num_outputs > 3:
        ctx.fail("LayerNormalization has at most 3 outputs")
    return outs


@define("InstanceNormalization", since=1)
def instance_normalization(ctx: InferContext) -> list[TensorType]:
    """Per (sample, channel) normalisation over the spatial dims, then scale and B."""
    xs = ctx.input_shape(0)
    if len(xs) < 3:
        ctx.fail(f"X must have rank >= 3, got {xs}")
    return [ctx.input_type(0)]

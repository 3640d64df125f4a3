"""Ops made by fusion passes (domain ``aircc``): ElementwiseChain, SoftmaxMatMul and
ChannelShuffle.

``ElementwiseChain`` (the fuse-elementwise pass) applies ``steps`` in order to its
first input: each step is [op, operand name ("" for a unary op), 1 if the running
value is the right operand], the op one of :data:`CHAIN_UNARY_OPS` or
:data:`CHAIN_BINARY_OPS`; its inputs are the chain's first input, then the other
operands, named by ``operands``.

``SoftmaxMatMul`` (the fuse-softmax-matmul pass) takes the scores S, V, and optionally
a mask M added to S (broadcast); ``perm_b`` / ``perm_y`` as for MatMul.

``ChannelShuffle`` (the fuse-channel-shuffle pass) splits ``axis`` of its input into
``groups`` groups and interleaves them: output index ``i * groups + g`` along the axis
holds input index ``g * (C / groups) + i``, the ``Reshape (.., groups, C / groups, ..)
-> Transpose -> Reshape`` of ShuffleNet's exports as one op.  The axis is an attribute
so that a channels-last plan moves it (``plan-layouts``) instead of reordering around it.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import broadcast_shapes, is_int, norm_axis
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType

from .gemm import permuted_shape

CHAIN_UNARY_OPS = frozenset({"Erf", "Tanh", "Sigmoid", "Relu", "Exp", "Neg", "Abs", "Sqrt"})
"""The unary ops an ElementwiseChain step may apply to the running value."""
CHAIN_BINARY_OPS = frozenset({"Add", "Sub", "Mul", "Div"})
"""The binary ops an ElementwiseChain step may apply to the running value and an operand."""


@define("ElementwiseChain", 1, "aircc", traits={Trait.INTERNAL}, foldable=False)
def elementwise_chain(ctx: InferContext) -> list[TensorType]:
    """Its ``steps`` (elementwise ops) applied in turn to its first input, whose type it keeps."""
    return [ctx.input_type(0)]


@define("SoftmaxMatMul", 1, "aircc", traits={Trait.INTERNAL}, engine="cube", foldable=False,
        broadcast_inputs=(2,))
def softmax_matmul(ctx: InferContext) -> list[TensorType]:
    """softmax(S (+ M), last axis) @ V."""
    st, vt = ctx.input_type(0), ctx.input_type(1)
    s = ctx.input_shape(0)
    if ctx.num_inputs > 2:
        if ctx.input_type(2).dtype != st.dtype:
            ctx.fail(f"mask is {ctx.input_type(2).dtype} but the scores are {st.dtype}")
        s = broadcast_shapes(ctx, s, ctx.input_shape(2))
    v = permuted_shape(ctx, ctx.input_shape(1), ctx.attrs.get("perm_b"), "perm_b")
    if vt.dtype != st.dtype or st.dtype not in ("float32", "float64"):
        ctx.fail(f"scores {st.dtype} and V {vt.dtype} must be one float type")
    if len(s) < 2 or len(v) < 2:
        ctx.fail(f"scores {s} and V {v} must have rank >= 2")
    if is_int(s[-1]) and is_int(v[-2]) and s[-1] != v[-2]:
        ctx.fail(f"{s[-1]} keys in the scores {s} but {v[-2]} rows in V {v}")
    out = (*broadcast_shapes(ctx, s[:-2], v[:-2]), s[-2], v[-1])
    return [TensorType(st.dtype, permuted_shape(ctx, out, ctx.attrs.get("perm_y"), "perm_y"))]


@define("ChannelShuffle", 1, "aircc", traits={Trait.INTERNAL}, foldable=False)
def channel_shuffle(ctx: InferContext) -> list[TensorType]:
    """Interleave the ``groups`` groups of ``axis``: the input's type, the axis permuted."""
    t = ctx.input_type(0)
    shape = ctx.input_shape(0)
    axis = norm_axis(ctx, ctx.attrs.get("axis", 1), len(shape))
    groups = int(ctx.attrs.get("groups", 1))
    if groups < 1:
        ctx.fail(f"groups {groups} must be at least 1")
    if is_int(shape[axis]) and shape[axis] % groups:
        ctx.fail(f"{groups} groups do not divide axis {axis} of size {shape[axis]}")
    return [t]

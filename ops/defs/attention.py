"""aircc.Attention: multi-head self-attention from its input to its heads' context (made
by the fuse-attention pass).

Inputs: X [B, S, E] (``seq_first_in=1``: [S, B, E]), W [E, 3 H D] (Wq, Wk, Wv side by
side), b [3 H D], and optionally the additive mask M (broadcast to the scores [B, H, S,
S]: one row per key, per query and key, per head); attribute ``heads`` (H).  Output:
the context [B, S, H, D] (``seq_first_out=1``: [S, B, H, D]; heads next to each other
per position, as the exporters' final Reshape to [B, S, H D] wants).  ``base2=1``: Wq
and bq carry a factor log2 e, so the scores are in units of log2; the mask stays in
natural units.  ``nan_guard=1``: probabilities that come out NaN (a row of -inf scores)
count as 0, as PyTorch's ``Where(IsNaN(p), 0, p)`` after its softmax has them.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import broadcast_shapes, is_int
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType


@define("Attention", 1, "aircc", traits={Trait.INTERNAL}, engine="cube", foldable=False,
        broadcast_inputs=(3,))
def attention(ctx: InferContext) -> list[TensorType]:
    """softmax(Q K^T + M) V for ``heads`` heads, with [Q | K | V] = X @ W + b."""
    xt = ctx.input_type(0)
    x, w, b = ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)
    heads = int(ctx.attrs.get("heads", 0))
    if len(x) != 3 or len(w) != 2 or len(b) != 1:
        ctx.fail(f"X {x} must be [B, S, E], W {w} [E, 3 H D] and b {b} [3 H D]")
    if xt.dtype != "float32" or any(ctx.input_type(i).dtype != xt.dtype for i in (1, 2)):
        ctx.fail("X, W and b must be float32")
    if not is_int(w[1]) or heads <= 0 or w[1] % (3 * heads):
        ctx.fail(f"W's {w[1]} columns are not 3 x {heads} heads x a head size")
    if is_int(x[2]) and is_int(w[0]) and x[2] != w[0]:
        ctx.fail(f"X has {x[2]} features but W {w[0]} rows")
    if b[0] != w[1]:
        ctx.fail(f"b {b} does not match W's {w[1]} columns")
    d = w[1] // (3 * heads)
    bs, s = (x[1], x[0]) if ctx.attrs.get("seq_first_in") else (x[0], x[1])
    if ctx.num_inputs > 3 and ctx.has_input(3):
        if ctx.input_type(3).dtype != xt.dtype:
            ctx.fail(f"the mask is {ctx.input_type(3).dtype}, X {xt.dtype}")
        broadcast_shapes(ctx, (bs, heads, s, s), ctx.input_shape(3))
    return [TensorType(xt.dtype, (s, bs, heads, d) if ctx.attrs.get("seq_first_out") else (bs, s, heads, d))]

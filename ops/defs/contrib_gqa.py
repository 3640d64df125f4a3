"""onnxruntime's GroupQueryAttention (domain ``com.microsoft``): attention of ``num_heads``
query heads over ``kv_num_heads`` key and value heads, with a key-value cache.

Per batch row b the cache holds T = seqlens_k[b] + 1 tokens after the step: P = T - Q
of the past (past_key, past_value [B, KVH, P_buffer, D]) and the step's first Q = min(S,
T) (the rest of the step is right padding).  The present key and value [B, KVH,
max(P_buffer, total_sequence_length), D] hold them at [0, T) (a first prompt's padding
rows after them too, as onnxruntime writes them), zeros after.  Query i is
at position P + i: causal (``causal=1``, the default) and ``local_window_size`` (the
last that many keys) count from there, and so does the rotary embedding
(``do_rotary``, cos_cache and sin_cache [max positions, rotary dim / 2]; position_ids
given: its entries, or, for a first prompt (S = total_sequence_length), its first one
plus i).  Scores: ``scale`` (1 / sqrt(D)) Q K^T, ``softcap`` tanh-capped, plus the
attention_bias; a head sink (head_sink[h], or 0 with ``smooth_softmax``) adds its
exponential to each softmax's denominator.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import is_int
from aircc.ops.types import Dim, TensorType

from .contrib_attention import check_bias
from .contrib_common import MS_DOMAIN, attr_int, float_input, int_input, same_dim

#: GroupQueryAttention's inputs that the native kernel does not take: k_scale, v_scale
#: (quantised caches), q_norm_weight, k_norm_weight, query_seqlens.
UNSUPPORTED_INPUTS = {12: "k_scale", 13: "v_scale", 14: "q_norm_weight", 15: "k_norm_weight",
                      16: "query_seqlens"}


def gqa_geometry(ctx: InferContext) -> tuple[int, int, Dim, bool]:
    """(H, KVH, head size, packed) of a GroupQueryAttention's query [B, S, H D] (or
    packed [B, S, (H + 2 KVH) D] without key and value)."""
    h, kvh = attr_int(ctx, "num_heads"), attr_int(ctx, "kv_num_heads")
    if h <= 0 or kvh <= 0 or h % kvh:
        ctx.fail(f"num_heads {h} must be a positive multiple of kv_num_heads {kvh}")
    width = ctx.input_shape(0)[2]
    packed = not ctx.has_input(1)
    n = h + 2 * kvh if packed else h
    if is_int(width) and width % n:
        ctx.fail(f"the query's width {width} is not {n} heads of one size")
    return h, kvh, width // n if is_int(width) else ctx.sym("head"), packed


def _unsupported(ctx: InferContext) -> None:
    for i, what in UNSUPPORTED_INPUTS.items():
        if ctx.has_input(i):
            ctx.unsupported(f"input {what}")
    for attr, default in (("k_quant_type", "NONE"), ("v_quant_type", "NONE")):
        if str(ctx.attrs.get(attr, default)) != default:
            ctx.unsupported(f"{attr} {ctx.attrs[attr]} (quantised caches)")
    if int(ctx.attrs.get("sliding_window_cache", 0)) or int(ctx.attrs.get("qk_output", 0)) \
            or ctx.num_outputs > 3:
        ctx.unsupported("sliding_window_cache and the output_qk output")


@define("GroupQueryAttention", 1, MS_DOMAIN, value_inputs=(6,), engine="cube", foldable=False,
        broadcast_inputs=(10,))
def group_query_attention(ctx: InferContext) -> list[TensorType]:
    """Grouped-query attention with a key-value cache (see the module doc): the output
    [B, S, H D] and the present key and value [B, KVH, max(P, total_sequence_length), D]."""
    xt = float_input(ctx, 0)
    q = ctx.input_shape(0)
    if len(q) != 3:
        ctx.fail(f"query {q} must be [B, S, H D]")
    _unsupported(ctx)
    h, kvh, d, packed = gqa_geometry(ctx)
    b, s = q[0], q[1]
    if not packed:
        for i, what in ((1, "key"), (2, "value")):
            float_input(ctx, i, xt)
            kv = ctx.input_shape(i)
            if len(kv) != 3:
                ctx.fail(f"{what} {kv} must be [B, S, KVH D]")
            width = kvh * d if is_int(d) else kv[2]
            for got, want, part in zip(kv, (b, s, width), ("batch", "length", "width")):
                same_dim(ctx, got, want, f"{what} {kv}'s {part}")
    p: Dim = 0
    if ctx.has_input(3) != ctx.has_input(4):
        ctx.fail("past_key and past_value come together")
    if ctx.has_input(3):
        for i in (3, 4):
            float_input(ctx, i, xt)
            pk = ctx.input_shape(i)
            if len(pk) != 4:
                ctx.fail(f"past {pk} must be [B, KVH, P, D]")
            for got, want, part in zip(pk, (b, kvh, pk[2], d), ("batch", "heads", "", "head size")):
                same_dim(ctx, got, want, f"past {pk}'s {part}")
        p = ctx.input_shape(3)[2]
    int_input(ctx, 5)
    int_input(ctx, 6)
    if len(ctx.input_shape(5)) != 1:
        ctx.fail(f"seqlens_k {ctx.input_shape(5)} must be [B]")
    if len(ctx.input_shape(6)) > 1:
        ctx.fail("total_sequence_length must be a scalar")
    if int(ctx.attrs.get("do_rotary", 0)):
        for i, what in ((7, "cos_cache"), (8, "sin_cache")):
            if not ctx.has_input(i):
                ctx.fail(f"do_rotary needs {what} (input {i})")
            float_input(ctx, i, xt)
            if len(ctx.input_shape(i)) != 2:
                ctx.fail(f"{what} {ctx.input_shape(i)} must be [positions, rotary dim / 2]")
    if ctx.has_input(9):
        int_input(ctx, 9, ("int64",))
    if ctx.has_input(11):
        float_input(ctx, 11, xt)
    if int(ctx.attrs.get("local_window_size", -1)) >= 0 and not int(ctx.attrs.get("causal", 1)):
        ctx.fail("local_window_size needs causal=1")
    total = ctx.value(6)
    length: Dim = ctx.sym("present")
    if total is not None and is_int(p):
        length = max(int(p), int(total.reshape(-1)[0]))
    check_bias(ctx, 10, b, h, s, ctx.sym("keys"), xt)
    cache = TensorType(xt.dtype, (b, kvh, length, d))
    return [TensorType(xt.dtype, (b, s, h * d if is_int(d) else ctx.sym("width"))), cache, cache][:ctx.num_outputs]

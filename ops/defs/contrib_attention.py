"""onnxruntime's attention contrib ops (domain ``com.microsoft``): Attention (packed QKV
weights), MultiHeadAttention (projected Q, K, V) and DecoderMaskedMultiHeadAttention (one
decoding step), and ``aircc.AttentionMask``, the additive mask their ``mask_index`` forms
stand for.

Their masks (int32, ``mask_index`` / ``key_padding_mask``): [B] (keys from each row's
value on are padding), [2 B] (also keys before the second half's value), [B, T] and
[B, S, T] (0: padding); a padded key gets ``mask_filter_value`` (-10000) added to its
score.  T = P + L keys, P of the past.  ``unidirectional``: query i (at position P + i)
leaves the later keys out, every query but the last, as onnxruntime has it.  The
``lower-contrib`` pass rewrites an Attention whose weights are constant into
AttentionMask and ``aircc.Attention``; GroupQueryAttention is in ``contrib_gqa``.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import is_int
from aircc.ops.traits import Trait
from aircc.ops.types import Dim, TensorType

from .contrib_common import MS_DOMAIN, attr_int, float_input, int_input, same_dim, vector_of

#: The default ``mask_filter_value``: what a padded key adds to its score.
MASK_FILTER_VALUE = -10000.0


def sum_dim(ctx: InferContext, a: Dim, b: Dim, k) -> Dim:
    """a + b for dims that may be symbols (a fresh symbol when either is one and not 0)."""
    if is_int(a) and is_int(b):
        return int(a) + int(b)
    if is_int(a) and a == 0:
        return b
    if is_int(b) and b == 0:
        return a
    return ctx.sym(k)


def check_mask(ctx: InferContext, i: int, b: Dim, s: Dim, t: Dim) -> None:
    """Input ``i``, if present, is a mask of one of the forms the module doc lists."""
    if not ctx.has_input(i):
        return
    int_input(ctx, i)
    m = ctx.input_shape(i)
    if len(m) == 4:
        ctx.unsupported(f"a 4-D mask {m} (Megatron's; onnxruntime's CPU kernel has none either)")
    if len(m) == 1:
        if is_int(m[0]) and is_int(b) and m[0] not in (b, 2 * b):
            ctx.fail(f"a 1-D mask {m} must have B or 2 B entries (B = {b})")
    elif len(m) == 2:
        same_dim(ctx, m[0], b, f"mask {m}'s batch")
        if not (is_int(m[1]) and m[1] == 1):
            same_dim(ctx, m[1], t, f"mask {m}'s keys (P + L)")
    elif len(m) == 3:
        for got, want, what in zip(m, (b, s, t), ("batch", "queries", "keys")):
            same_dim(ctx, got, want, f"mask {m}'s {what}")
    else:
        ctx.fail(f"mask {m} must be 1-, 2- or 3-D")


def check_bias(ctx: InferContext, i: int, b: Dim, h: int, s: Dim, t: Dim, like: TensorType) -> None:
    """Input ``i``, if present, is an additive bias [B or 1, H or 1, S, T]."""
    if not ctx.has_input(i):
        return
    float_input(ctx, i, like)
    a = ctx.input_shape(i)
    if len(a) != 4:
        ctx.fail(f"attention_bias {a} must be [B or 1, H or 1, S, T]")
    for got, want, what in zip(a, (b, h, s, t), ("batch", "heads", "queries", "keys")):
        if not (what in ("batch", "heads") and is_int(got) and got == 1):
            same_dim(ctx, got, want, f"attention_bias {a}'s {what}")


def _heads(ctx: InferContext) -> int:
    h = attr_int(ctx, "num_heads")
    if h <= 0:
        ctx.fail(f"num_heads {h} must be positive")
    return h


def _split(ctx: InferContext, d: Dim, h: int, what: str) -> Dim:
    if is_int(d) and d % h:
        ctx.fail(f"{what} {d} is not a multiple of num_heads {h}")
    return d // h if is_int(d) else ctx.sym("head")


@define("Attention", 1, MS_DOMAIN, engine="cube", foldable=False, broadcast_inputs=(5,))
def attention(ctx: InferContext) -> list[TensorType]:
    """softmax(scale Q K^T + mask + attention_bias) V for ``num_heads`` heads, with [Q | K |
    V] = input @ weights + bias (widths ``qkv_hidden_sizes``, else thirds), the past's keys
    and values [2, B, H, P, D] before the new ones; ``scale`` 1 / sqrt(head size) by
    default.  Outputs [B, S, V width] and optionally the present [2, B, H, P + S, D]."""
    xt = float_input(ctx, 0)
    x, w = ctx.input_shape(0), ctx.input_shape(1)
    float_input(ctx, 1, xt)
    if len(x) != 3 or len(w) != 2:
        ctx.fail(f"input {x} must be [B, S, E] and weights {w} [E, Q + K + V widths]")
    same_dim(ctx, x[2], w[0], "the input's features and the weights' rows")
    h = _heads(ctx)
    sizes = ctx.attrs.get("qkv_hidden_sizes")
    if sizes:
        if len(sizes) != 3 or sizes[0] != sizes[1]:
            ctx.fail(f"qkv_hidden_sizes {sizes} must be 3 widths, Q's equal to K's")
        same_dim(ctx, sum(sizes), w[1], "qkv_hidden_sizes' sum and the weights' columns")
        dq, dv = int(sizes[0]), int(sizes[2])
    elif not is_int(w[1]) or w[1] % 3:
        ctx.fail(f"the weights' {w[1]} columns do not split into Q, K and V (qkv_hidden_sizes)")
    else:
        dq = dv = w[1] // 3
    hq, hv = _split(ctx, dq, h, "Q's width"), _split(ctx, dv, h, "V's width")
    vector_of(ctx, 2, w[1], "the bias", xt)
    if int(ctx.attrs.get("do_rotary", 0)):
        ctx.unsupported("do_rotary (onnxruntime's CPU kernel has no rotary in Attention either)")
    if int(ctx.attrs.get("past_present_share_buffer", 0)) or ctx.has_input(6):
        ctx.unsupported("past_present_share_buffer and past_sequence_length")
    b, s = x[0], x[1]
    p: Dim = 0
    if ctx.has_input(4):
        float_input(ctx, 4, xt)
        past = ctx.input_shape(4)
        if len(past) != 5 or dq != dv:
            ctx.fail(f"past {past} must be [2, B, H, P, D], with Q, K and V as wide")
        for got, want, what in zip(past, (2, b, h, past[3], hq), ("2", "batch", "heads", "", "head size")):
            same_dim(ctx, got, want, f"past {past}'s {what}")
        p = past[3]
    t = sum_dim(ctx, p, s, "keys")
    check_mask(ctx, 3, b, s, t)
    check_bias(ctx, 5, b, h, s, t, xt)
    out = [TensorType(xt.dtype, (b, s, dv)), TensorType(xt.dtype, (2, b, h, t, hq))]
    return out[:ctx.num_outputs]


def _mha_inputs(ctx: InferContext, xt: TensorType, h: int) -> tuple:
    """(B, S, L, Q head size, V head size, keys laid [B, H, L, D]) of a
    MultiHeadAttention's query, key and value forms."""
    q = ctx.input_shape(0)
    if len(q) == 5:
        if ctx.has_input(1) or ctx.has_input(2):
            ctx.fail("packed QKV [B, S, H, 3, D] comes without key and value")
        same_dim(ctx, q[2], h, "packed QKV's heads")
        same_dim(ctx, q[3], 3, f"packed QKV {q}'s fourth dim")
        return q[0], q[1], q[1], q[4], q[4], False
    if len(q) != 3 or not ctx.has_input(1):
        ctx.fail(f"query {q} must be [B, S, D] with a key, or packed QKV [B, S, H, 3, D]")
    hq = _split(ctx, q[2], h, "the query's width")
    float_input(ctx, 1, xt)
    k = ctx.input_shape(1)
    if len(k) == 5:
        if ctx.has_input(2):
            ctx.fail("packed KV [B, L, H, 2, D] comes without value")
        same_dim(ctx, k[3], 2, f"packed KV {k}'s fourth dim")
        same_dim(ctx, k[4], hq, "packed KV's head size")
        return q[0], q[1], k[1], hq, k[4], False
    if not ctx.has_input(2):
        ctx.fail("value is required with a key of rank 3 or 4")
    float_input(ctx, 2, xt)
    v = ctx.input_shape(2)
    if len(k) == 4 and len(v) == 4:
        same_dim(ctx, k[1], h, f"key {k}'s heads")
        same_dim(ctx, k[3], hq, f"key {k}'s head size")
        same_dim(ctx, v[2], k[2], "key's and value's lengths")
        return q[0], q[1], k[2], hq, v[3], True
    if len(k) != 3 or len(v) != 3:
        ctx.fail(f"key {k} and value {v} must be [B, L, D] (or [B, H, L, D])")
    same_dim(ctx, k[2], q[2], "the key's and query's widths")
    same_dim(ctx, v[1], k[1], "key's and value's lengths")
    return q[0], q[1], k[1], hq, _split(ctx, v[2], h, "the value's width"), False


@define("MultiHeadAttention", 1, MS_DOMAIN, engine="cube", foldable=False, broadcast_inputs=(5,))
def multi_head_attention(ctx: InferContext) -> list[TensorType]:
    """softmax(scale Q K^T + key_padding_mask + attention_bias) V for ``num_heads`` heads of
    projected query [B, S, D], key and value [B, L, D] (plus the bias [3 D]; key and value
    may also be [B, H, L, D], or packed: QKV [B, S, H, 3, D], KV [B, L, H, 2, D]), past_key
    and past_value [B, H, P, D] before the new ones.  Outputs [B, S, V width], the present
    key and value [B, H, P + L, D], the scores before the softmax [B, H, S, P + L]."""
    xt = float_input(ctx, 0)
    h = _heads(ctx)
    b, s, kv_len, hq, hv, bnsh = _mha_inputs(ctx, xt, h)
    if ctx.has_input(3):
        float_input(ctx, 3, xt)
        if len(ctx.input_shape(3)) != 1:
            ctx.fail(f"the bias {ctx.input_shape(3)} must be 1-D")
        if is_int(hq) and is_int(hv):
            same_dim(ctx, ctx.input_shape(3)[0], (2 * hq + hv) * h, "the bias' length (Q, K and V widths)")
    if ctx.has_input(8) or ctx.has_input(9):
        ctx.unsupported("past_sequence_length and cache_indirection (shared buffers, beams)")
    p: Dim = 0
    if ctx.has_input(6) or ctx.has_input(7):
        if bnsh or not (ctx.has_input(6) and ctx.has_input(7)):
            ctx.fail("past_key and past_value come together, and not with a key [B, H, L, D]")
        for i, hd in ((6, hq), (7, hv)):
            float_input(ctx, i, xt)
            pk = ctx.input_shape(i)
            if len(pk) != 4:
                ctx.fail(f"past {pk} must be [B, H, P, D]")
            for got, want, what in zip(pk, (b, h, pk[2], hd), ("batch", "heads", "", "head size")):
                same_dim(ctx, got, want, f"past {pk}'s {what}")
        p = ctx.input_shape(6)[2]
    t = sum_dim(ctx, p, kv_len, "keys")
    check_mask(ctx, 4, b, s, t)
    check_bias(ctx, 5, b, h, s, t, xt)
    out = [TensorType(xt.dtype, (b, s, hv * h if is_int(hv) else ctx.sym("width"))),
           TensorType(xt.dtype, (b, h, t, hq)), TensorType(xt.dtype, (b, h, t, hv)),
           TensorType(xt.dtype, (b, h, s, t))]
    return out[:ctx.num_outputs]


@define("AttentionMask", 1, "aircc", traits={Trait.INTERNAL}, foldable=False)
def attention_mask(ctx: InferContext) -> list[TensorType]:
    """The additive float32 mask of an attention over X [B, S, E] (its own keys): the
    ``mask_index`` (input 0, optional) as ``mask_filter_value`` where a key is padding,
    -inf where it is in the future (``unidirectional``); [B or 1, 1, S or 1, S]."""
    x = ctx.input_shape(1)
    if len(x) != 3:
        ctx.fail(f"X {x} must be [B, S, E]")
    b, s = x[0], x[1]
    check_mask(ctx, 0, b, s, s)
    causal = bool(int(ctx.attrs.get("unidirectional", 0)))
    m = ctx.input_shape(0) if ctx.has_input(0) else ()
    rows = s if causal or len(m) == 3 else 1
    return [TensorType("float32", (b if m else 1, 1, rows, s))]


@define("DecoderMaskedMultiHeadAttention", 1, MS_DOMAIN, value_inputs=(7,), engine="cube", foldable=False,
        broadcast_inputs=(4,))
def decoder_masked_multi_head_attention(ctx: InferContext) -> list[TensorType]:
    """One decoding step (S = 1) of ``num_heads`` heads: self-attention over a key-value
    buffer shared with the present (``past_present_share_buffer=1``: past_key and
    past_value [B, H, M, D], the new key and value written at past_sequence_length P, the
    scores over [0, P]; beam search's cache_indirection [B / beams, beams, M] picks each
    past position's beam), or cross-attention over key and value [B, H, L, D].  The query
    [B, 1, D] (or packed QKV [B, 1, 3 D]) plus the bias; mask_index [B, P + 1] (0:
    padding), attention_bias [B or 1, H or 1, 1, P + 1] (with beams, as onnxruntime reads
    it: row b takes the bias of row b / beams).  Outputs [B, 1, V width], the present key
    and value, the scores before the softmax [B, H, 1, T] (``output_qk``)."""
    xt = float_input(ctx, 0)
    h = _heads(ctx)
    q = ctx.input_shape(0)
    if len(q) != 3:
        ctx.fail(f"query {q} must be [B, 1, D]")
    same_dim(ctx, q[1], 1, "the query's length (one token)")
    b = q[0]
    cross = ctx.has_input(1) and len(ctx.input_shape(1)) == 4
    if cross:
        k, v = ctx.input_shape(1), ctx.input_shape(2)
        float_input(ctx, 2, xt)
        hq, hv, t = k[3], v[3], k[2]
        present = [TensorType(xt.dtype, tuple(k)), TensorType(xt.dtype, tuple(v))]
    else:
        shared = int(ctx.attrs.get("past_present_share_buffer", 0))
        if not shared or not ctx.has_input(5) or not ctx.has_input(7):
            ctx.unsupported("self-attention without past_present_share_buffer, past_key and "
                            "past_sequence_length (onnxruntime's CPU kernel needs them too)")
        width = q[2] if ctx.has_input(1) else (q[2] // 3 if is_int(q[2]) else ctx.sym("width"))
        hq = hv = _split(ctx, width, h, "the query's width")
        for i in (5, 6):
            float_input(ctx, i, xt)
            pk = ctx.input_shape(i)
            if len(pk) != 4:
                ctx.fail(f"past {pk} must be [B, H, M, D]")
            same_dim(ctx, pk[1], h, f"past {pk}'s heads")
            same_dim(ctx, pk[3], hq, f"past {pk}'s head size")
        p = ctx.value(7)
        t = int(p.reshape(-1)[0]) + 1 if p is not None else ctx.sym("keys")
        present = [TensorType(xt.dtype, tuple(ctx.input_shape(i))) for i in (5, 6)]
    if ctx.has_input(9):
        int_input(ctx, 9)
    check_bias(ctx, 4, b, h, 1, t, xt)
    out_width = hv * h if is_int(hv) else ctx.sym("width")
    return [TensorType(xt.dtype, (b, 1, out_width)), *present,
            TensorType(xt.dtype, (b, h, 1, t))][:ctx.num_outputs]

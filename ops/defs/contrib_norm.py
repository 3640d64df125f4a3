"""onnxruntime's normalisation contrib ops: SkipLayerNormalization,
SkipSimplifiedLayerNormalization, EmbedLayerNormalization, GroupNorm and SkipGroupNorm
(domain ``com.microsoft``), and the two it registers in the default domain,
LayerNormalization before opset 17 and SimplifiedLayerNormalization (RMS normalisation),
which its transformer optimizer writes there.

The ``lower-contrib`` pass rewrites the Skip...Normalizations into Adds and a
LayerNormalization (or SimplifiedLayerNormalization), and an old LayerNormalization into
opset 17's, so that ``fuse-add-layernorm`` and the oneDNN kernel see them.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import broadcast_shapes, is_int, norm_axis
from aircc.ops.types import TensorType

from .contrib_common import FLOAT_TYPES, MS_DOMAIN, attr_int, float_input, int_input, same_dim, vector_of
from .norm import layer_normalization

#: The first opset whose LayerNormalization onnx defines; before it, onnxruntime's.
ONNX_LAYERNORM_SINCE = 17

define("LayerNormalization", 1, doc="onnxruntime's LayerNormalization of opsets 1 to 16 (its contrib "
       "op in the default domain): as opset 17's, normalise over axes [axis, rank)")(layer_normalization)


@define("SimplifiedLayerNormalization", 1)
def simplified_layer_normalization(ctx: InferContext) -> list[TensorType]:
    """RMS normalisation (onnxruntime's, in the default domain): x / sqrt(mean(x^2) + eps)
    * scale over axes [axis, rank); optionally the inverse RMS (float32)."""
    xt = float_input(ctx, 0)
    xs = ctx.input_shape(0)
    axis = norm_axis(ctx, ctx.attrs.get("axis", -1), len(xs))
    float_input(ctx, 1, xt)
    if int(ctx.attrs.get("stash_type", 1)) != 1:
        ctx.unsupported(f"stash_type {ctx.attrs['stash_type']} (only 1, float32)")
    if ctx.num_outputs > 2:
        ctx.fail("SimplifiedLayerNormalization has at most 2 outputs")
    stats = TensorType("float32", tuple(xs[:axis]) + (1,) * (len(xs) - axis))
    return [TensorType(xt.dtype, xs), stats][:ctx.num_outputs]


def _skip_norm(ctx: InferContext, bias: int, beta: int | None) -> list[TensorType]:
    """Output, mean, inverse deviation and input + skip + bias of a Skip...Normalization
    whose bias is input ``bias`` (and beta input ``beta``)."""
    xt = float_input(ctx, 0)
    xs = ctx.input_shape(0)
    if len(xs) not in (2, 3):
        ctx.fail(f"input {xs} must be [B, S, H] or [T, H]")
    float_input(ctx, 1, xt)
    skip = ctx.input_shape(1)
    if len(skip) > len(xs):
        ctx.fail(f"skip {skip} does not broadcast to the input {xs}")
    for a, b in zip(xs[::-1], skip[::-1]):
        if is_int(b) and b != 1:
            same_dim(ctx, a, b, f"skip {skip} does not match the input {xs}")
    h = xs[-1]
    if not ctx.has_input(2):
        ctx.fail("gamma (input 2) is required")
    vector_of(ctx, 2, h, "gamma", xt)
    if beta is not None:
        vector_of(ctx, beta, h, "beta", xt)
    vector_of(ctx, bias, h, "the bias", xt)
    if ctx.num_outputs > 4:
        ctx.fail("the op has at most 4 outputs")
    stats = TensorType("float32", (*xs[:-1], 1))
    return [TensorType(xt.dtype, xs), stats, stats, TensorType(xt.dtype, xs)][:ctx.num_outputs]


@define("SkipLayerNormalization", 1, MS_DOMAIN)
def skip_layer_normalization(ctx: InferContext) -> list[TensorType]:
    """LayerNormalization over the last axis of s = input + skip + bias (``epsilon``), with
    gamma and beta; optionally its mean and inverse deviation ([..., 1], float32) and s."""
    return _skip_norm(ctx, bias=4, beta=3)


@define("SkipSimplifiedLayerNormalization", 1, MS_DOMAIN)
def skip_simplified_layer_normalization(ctx: InferContext) -> list[TensorType]:
    """RMS normalisation over the last axis of s = input + skip + bias, times gamma;
    optionally a mean output (zeros, as onnxruntime writes it), the inverse RMS and s."""
    return _skip_norm(ctx, bias=3, beta=None)


@define("EmbedLayerNormalization", 1, MS_DOMAIN)
def embed_layer_normalization(ctx: InferContext) -> list[TensorType]:
    """BERT's embeddings: word_embedding[input_ids] + position_embedding[position_ids, or 0
    to S-1] (+ segment_embedding[segment_ids]) layer-normalised with gamma, beta
    (``epsilon``); optionally the mask index (per row, how many mask entries are 1, int32)
    and the sum before the normalisation."""
    ids = int_input(ctx, 0)
    shape = ctx.input_shape(0)
    if len(shape) != 2:
        ctx.fail(f"input_ids {shape} must be [B, S]")
    wt = float_input(ctx, 2)
    for i, what in ((2, "word_embedding"), (3, "position_embedding"), (4, "segment_embedding")):
        if ctx.has_input(i):
            float_input(ctx, i, wt)
            if len(ctx.input_shape(i)) != 2:
                ctx.fail(f"{what} {ctx.input_shape(i)} must be 2-D")
            same_dim(ctx, ctx.input_shape(i)[1], ctx.input_shape(2)[1], f"{what}'s width")
    if ctx.has_input(1) != ctx.has_input(4):
        ctx.fail("segment_ids and segment_embedding come together")
    h = ctx.input_shape(2)[1]
    for i, what in ((5, "gamma"), (6, "beta")):
        if not ctx.has_input(i):
            ctx.fail(f"{what} (input {i}) is required")
        vector_of(ctx, i, h, what, wt)
    for i, what in ((1, "segment_ids"), (7, "mask")):
        if ctx.has_input(i):
            int_input(ctx, i)
            if len(ctx.input_shape(i)) != 2 or broadcast_shapes(ctx, shape, ctx.input_shape(i)) is None:
                ctx.fail(f"{what} {ctx.input_shape(i)} must be input_ids' shape {shape}")
    if ctx.has_input(8):
        int_input(ctx, 8, ("int32", "int64"))
        pos = ctx.input_shape(8)
        if len(pos) != 2:
            ctx.fail(f"position_ids {pos} must be [B, S] or [1, S]")
        same_dim(ctx, pos[1], shape[1], "position_ids' length")
    b, s = shape
    return [TensorType(wt.dtype, (b, s, h)), TensorType(ids.dtype, (b,)),
            TensorType(wt.dtype, (b, s, h))][:ctx.num_outputs]


def _group_norm(ctx: InferContext, with_skip: bool) -> list[TensorType]:
    xt = float_input(ctx, 0)
    xs = ctx.input_shape(0)
    if len(xs) != 4:
        ctx.fail(f"X {xs} must be 4-D")
    last = int(ctx.attrs.get("channels_last", 1))
    if with_skip and not last:
        ctx.unsupported("channels_last=0 (SkipGroupNorm runs NHWC)")
    c = xs[3] if last else xs[1]
    groups = attr_int(ctx, "groups")
    if attr_int(ctx, "activation") not in (0, 1):
        ctx.fail(f"activation {ctx.attrs['activation']} is not 0 (none) or 1 (SiLU)")
    if groups <= 0 or (is_int(c) and c % groups):
        ctx.fail(f"{c} channels do not split into {groups} groups")
    for i, what in ((1, "gamma"), (2, "beta")):
        t = ctx.input_type(i)
        if t.dtype not in FLOAT_TYPES or len(ctx.input_shape(i)) != 1:
            ctx.fail(f"{what} must be a float vector")
        same_dim(ctx, ctx.input_shape(i)[0], c, f"{what}'s length")
    if not with_skip:
        return [xt]
    float_input(ctx, 3, xt)
    skip = ctx.input_shape(3)
    n, h, w, _ = xs
    allowed = ((n, h, w, c), (n, 1, 1, c), (n, c))
    if len(skip) not in (2, 4) or not any(len(skip) == len(a) and all(
            not (is_int(p) and is_int(q)) or p == q for p, q in zip(skip, a)) for a in allowed):
        ctx.fail(f"skip {skip} must be [N, H, W, C], [N, 1, 1, C] or [N, C] for X {xs}")
    vector_of(ctx, 4, c, "the bias", xt)
    return [xt, xt][:ctx.num_outputs]


@define("GroupNorm", 1, MS_DOMAIN)
def group_norm(ctx: InferContext) -> list[TensorType]:
    """Group normalisation of X (NHWC with ``channels_last=1``, the default, else NCHW) in
    ``groups`` groups of channels, times gamma plus beta, then SiLU if ``activation=1``."""
    return _group_norm(ctx, with_skip=False)


@define("SkipGroupNorm", 1, MS_DOMAIN)
def skip_group_norm(ctx: InferContext) -> list[TensorType]:
    """GroupNorm (NHWC) of s = X + skip + bias, the skip [N, H, W, C], [N, 1, 1, C] or [N,
    C]; optionally s."""
    return _group_norm(ctx, with_skip=True)

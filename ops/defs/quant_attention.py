"""onnxruntime's quantized BERT ops (``com.microsoft``): QAttention and
QEmbedLayerNormalization, what ``quantize_dynamic`` writes for the Attention and
EmbedLayerNormalization of a model onnxruntime's transformer optimizer fused.

QAttention: ``QKV = (input - zp) @ (weight - zp) * input_scale * weight_scale + bias``
(exact integer product), then multi-head self-attention over it, with ``mask_index``
as end positions ``[B]``, end and start positions ``[2B]``, or a 0/1 mask ``[B, T]`` /
``[B, S, T]`` (masked scores get ``mask_filter_value``), ``unidirectional`` causal
masking (a future key's score is float32's lowest) and ``scale`` (default
``1 / sqrt(head_size)``).  ``past`` / ``present`` and rotary embeddings are not supported.

QEmbedLayerNormalization: the sum of the dequantized word, position (and segment)
embeddings of each token, layer-normalized with the dequantized gamma and beta; its
second output is each sequence's count of mask ones (0 without a mask).
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import is_int
from aircc.ops.types import TensorType

from .quant_gemm import int8_operand
from .quant_linear import MS_DOMAIN, scalar_param, zero_point_type


@define("QAttention", 1, MS_DOMAIN, engine="cube", foldable=False)
def qattention(ctx: InferContext) -> list[TensorType]:
    """Multi-head self-attention over QKV = dequantized (input @ weight) + bias."""
    xs, ws = ctx.input_shape(0), ctx.input_shape(1)
    int8_operand(ctx, 0, "input")
    int8_operand(ctx, 1, "weight")
    if len(xs) != 3 or len(ws) != 2:
        ctx.fail(f"input {list(xs)} must be [B, S, D] and weight {list(ws)} [D, 3H]")
    if ctx.input_type(2).dtype != "float32":
        ctx.fail(f"bias must be float32, got {ctx.input_type(2).dtype}")
    heads = ctx.attrs.get("num_heads")
    hidden3 = ws[1]
    if not is_int(heads) or heads <= 0 or (is_int(hidden3) and hidden3 % (3 * heads)):
        ctx.fail(f"num_heads {heads!r} must divide a third of weight's {hidden3} columns")
    for i, what in ((3, "input_scale"), (4, "weight_scale"), (6, "input_zero_point"),
                    (7, "weight_zero_point")):
        scalar_param(ctx, i, what)
    zero_point_type(ctx, 6, ctx.input_type(0).dtype, "input_zero_point")
    zero_point_type(ctx, 7, ctx.input_type(1).dtype, "weight_zero_point")
    if ctx.has_input(5):
        mask = ctx.input_type(5)
        if mask.dtype != "int32" or (mask.shape is not None and len(mask.shape) not in (1, 2, 3)):
            ctx.unsupported(f"mask_index {mask.dtype} {mask.shape}: int32 [B], [2B], [B, T] "
                            "or [B, S, T] only")
    if ctx.has_input(8) or ctx.num_outputs > 1:
        ctx.unsupported("past / present")
    if int(ctx.attrs.get("do_rotary", 0)):
        ctx.unsupported("rotary embeddings")
    return [TensorType("float32", (xs[0], xs[1], hidden3 // 3 if is_int(hidden3)
                                   else ctx.sym(2)))]


@define("QEmbedLayerNormalization", 1, MS_DOMAIN)
def qembed_layer_normalization(ctx: InferContext) -> list[TensorType]:
    """LayerNorm(dequantized word + position (+ segment) embeddings of input_ids) and each
    sequence's count of mask ones."""
    ids = ctx.input_shape(0)
    if ctx.input_type(0).dtype != "int32" or len(ids) != 2:
        ctx.fail(f"input_ids must be int32 [B, S], got {ctx.input_type(0).dtype} {list(ids)}")
    words = ctx.input_shape(2)
    dtype = int8_operand(ctx, 2, "word_embedding_quant")
    for i in (3, 5, 6) + ((4,) if ctx.has_input(4) else ()):
        if int8_operand(ctx, i, f"input {i}") != dtype:
            ctx.fail(f"input {i} is {ctx.input_type(i).dtype}, the word embedding {dtype}")
    if ctx.has_input(1) != ctx.has_input(4):
        ctx.fail("segment_ids and segment_embedding come together")
    for i in range(8, 18):
        if ctx.has_input(i):
            scalar_param(ctx, i, f"input {i}", ("float32",) if i < 13 else (dtype,))
    if len(words) != 2:
        ctx.fail(f"word_embedding_quant must be [vocabulary, H], got {list(words)}")
    return [TensorType("float32", (ids[0], ids[1], words[1])),
            TensorType("int32", (ids[0],))][:max(ctx.num_outputs, 1)]

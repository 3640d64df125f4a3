"""onnxruntime's position contrib ops (domain ``com.microsoft``): RotaryEmbedding (RoPE) and
RelativePositionBias (T5's bucketed bias)."""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import is_int
from aircc.ops.types import Dim, TensorType

from .contrib_common import MS_DOMAIN, attr_int, float_input, int_input, same_dim


def rotary_geometry(ctx: InferContext) -> tuple[Dim, int]:
    """(head size, rotary dim) of a RotaryEmbedding: the rotary dim is twice cos_cache's
    width; the head size the input's last dim (4-D) or its width over ``num_heads``
    (3-D; without ``num_heads``, the rotary dim)."""
    x = ctx.input_shape(0)
    cos = ctx.input_shape(2)
    if len(cos) != 2 or not is_int(cos[1]):
        ctx.fail(f"cos_cache {cos} must be [positions, rotary dim / 2]")
    rotary = 2 * int(cos[1])
    heads = int(ctx.attrs.get("num_heads", 0))
    if len(x) == 4:
        head = x[3]
    elif heads:
        if is_int(x[2]) and x[2] % heads:
            ctx.fail(f"the input's width {x[2]} is not num_heads {heads} heads")
        head = x[2] // heads if is_int(x[2]) else ctx.sym("head")
    else:
        if int(ctx.attrs.get("rotary_embedding_dim", 0)):
            ctx.fail("rotary_embedding_dim needs num_heads for a 3-D input")
        head = rotary
        if is_int(x[2]) and x[2] % head:
            ctx.fail(f"the input's width {x[2]} is not a multiple of the rotary dim {head}")
    dim = int(ctx.attrs.get("rotary_embedding_dim", 0)) or rotary
    if dim != rotary or (is_int(head) and dim > head):
        ctx.fail(f"rotary_embedding_dim {dim} must be twice cos_cache's width and at most the head size {head}")
    return head, dim


@define("RotaryEmbedding", 1, MS_DOMAIN)
def rotary_embedding(ctx: InferContext) -> list[TensorType]:
    """Rotary position embedding of each head of the input ([B, S, H D] or [B, H, S, D]):
    its first rotary-dim entries rotated by the angles cos_cache / sin_cache
    [positions, rotary dim / 2] give at each token's position (position_ids [B, S], or
    [1]: the first position, then one per token); halves (x1, x2) or, ``interleaved``,
    pairs: (x1 cos - x2 sin, x2 cos + x1 sin)."""
    xt = float_input(ctx, 0)
    x = ctx.input_shape(0)
    if len(x) not in (3, 4):
        ctx.fail(f"input {x} must be [B, S, H D] or [B, H, S, D]")
    if int(ctx.attrs.get("is_packed_batching", 0)):
        ctx.unsupported("is_packed_batching (ragged batches)")
    int_input(ctx, 1, ("int64",))
    pos = ctx.input_shape(1)
    if len(pos) == 2:
        same_dim(ctx, pos[1], x[1] if len(x) == 3 else x[2], "position_ids' length")
    elif len(pos) != 1 or (is_int(pos[0]) and pos[0] != 1):
        ctx.fail(f"position_ids {pos} must be [B, S] or [1]")
    for i, what in ((2, "cos_cache"), (3, "sin_cache")):
        float_input(ctx, i, xt)
    same_dim(ctx, ctx.input_shape(3)[-1], ctx.input_shape(2)[-1], "sin_cache's and cos_cache's widths")
    rotary_geometry(ctx)
    return [xt]


@define("RelativePositionBias", 1, MS_DOMAIN, value_inputs=(1, 2))
def relative_position_bias(ctx: InferContext) -> list[TensorType]:
    """T5's relative position bias [1, H, query_length, key_length]: bias_table[bucket(k -
    q), h], the buckets exact up to half of them (``is_bidirectional``: half for each
    direction), logarithmic up to ``max_distance`` after."""
    t = float_input(ctx, 0)
    table = ctx.input_shape(0)
    if len(table) != 2:
        ctx.fail(f"bias_table {table} must be [buckets, heads]")
    if attr_int(ctx, "max_distance") <= 0:
        ctx.fail("max_distance must be positive")
    dims: list[Dim] = []
    for i, what in ((1, "query_length"), (2, "key_length")):
        int_input(ctx, i, ("int64",))
        if len(ctx.input_shape(i)) > 1:
            ctx.fail(f"{what} must be a scalar")
        value = ctx.value(i)
        dims.append(int(value.reshape(-1)[0]) if value is not None else ctx.sym(what))
    return [TensorType(t.dtype, (1, table[1], dims[0], dims[1]))]

"""Indexed reads and writes: GatherND, ScatterElements, ScatterND, as PyTorch exports
``x[idx]``, ``scatter`` / ``scatter_add`` / ``index_fill`` and ``index_put``."""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import is_int, norm_axis
from aircc.ops.types import TensorType

INDEX_TYPES = ("int32", "int64")
#: Scatter reductions by the opset that added them.
REDUCTIONS = {"none": 11, "add": 16, "mul": 16, "max": 18, "min": 18}


def _indices(ctx: InferContext, i: int) -> tuple:
    t = ctx.input_type(i)
    if t.dtype not in INDEX_TYPES:
        ctx.fail(f"indices must be int32/int64, got {t.dtype}")
    return ctx.input_shape(i)


@define("GatherND", 11)
def gather_nd(ctx: InferContext) -> list[TensorType]:
    """``data[indices[..., 0], ..., indices[..., k-1]]`` for each index tuple of the last axis
    of ``indices``, after ``batch_dims`` leading dims both share."""
    xs, ids = ctx.input_shape(0), _indices(ctx, 1)
    b = int(ctx.attrs.get("batch_dims", 0))
    if not ids or not is_int(ids[-1]):
        ctx.fail(f"indices {ids} need a known last dim (the index tuple's length)")
    k = ids[-1]
    if b < 0 or b >= min(len(xs), len(ids)) or b + k > len(xs):
        ctx.fail(f"batch_dims {b} and index tuples of {k} do not fit data {xs}")
    return [TensorType(ctx.input_type(0).dtype, tuple(ids[:-1]) + tuple(xs[b + k:]))]


def _reduction(ctx: InferContext) -> None:
    r = ctx.attrs.get("reduction", "none")
    r = r.decode() if isinstance(r, bytes) else r
    if r not in REDUCTIONS:
        ctx.fail(f"reduction {r!r}: one of {', '.join(REDUCTIONS)}")


@define("ScatterElements", 11)
def scatter_elements(ctx: InferContext) -> list[TensorType]:
    """A copy of data with ``updates`` written (or reduced) at ``indices`` along ``axis``."""
    xs, ids, us = ctx.input_shape(0), _indices(ctx, 1), ctx.input_shape(2)
    if not (len(xs) == len(ids) == len(us)):
        ctx.fail(f"data {xs}, indices {ids} and updates {us} must have one rank")
    norm_axis(ctx, ctx.attrs.get("axis", 0), len(xs))
    _reduction(ctx)
    return [ctx.input_type(0)]


@define("ScatterND", 11)
def scatter_nd(ctx: InferContext) -> list[TensorType]:
    """A copy of data with each slice ``updates[i]`` written (or reduced) at the index tuple
    ``indices[i]``."""
    xs, ids = ctx.input_shape(0), _indices(ctx, 1)
    if not ids or (is_int(ids[-1]) and ids[-1] > len(xs)):
        ctx.fail(f"index tuples {ids} longer than data's rank {len(xs)}")
    _reduction(ctx)
    return [ctx.input_type(0)]

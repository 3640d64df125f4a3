"""Data movement: Concat, Split, Slice, Gather, GatherElements, Expand, Tile, Pad."""
from __future__ import annotations

from typing import Optional, Sequence

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import Dim, broadcast_shapes, ints, is_int, norm_axes, norm_axis, vector_len
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType

BIG = 2 ** 31 - 1
"""A Slice end at or past this keeps a symbolic dim whole (exporters write INT_MAX or more)."""

_HOST = {Trait.HOST_CAPABLE}


# ------------------------------------------------------------------ Concat
@define("Concat", 1, traits=_HOST)
def concat(ctx: InferContext) -> list[TensorType]:
    """Join inputs along ``axis`` (default 1 in opset 1-3, required since 4)."""
    types = [ctx.input_type(i) for i in range(ctx.num_inputs)]
    if not types:
        ctx.fail("needs at least one input")
    if any(t.dtype != types[0].dtype for t in types):
        ctx.fail(f"input types differ: {[t.dtype for t in types]}")
    shapes = [ctx.input_shape(i) for i in range(ctx.num_inputs)]
    r = len(shapes[0])
    if any(len(s) != r for s in shapes):
        ctx.fail(f"input ranks differ: {shapes}")
    axis = norm_axis(ctx, ctx.attrs.get("axis", 1), r)
    out = []
    for i in range(r):
        dims = [s[i] for s in shapes]
        if i == axis:
            known = [d for d in dims if is_int(d)]
            syms = [d for d in dims if not is_int(d)]
            out.append(sum(known) if not syms else
                       syms[0] if len(syms) == 1 and sum(known) == 0 else ctx.sym(i))
        else:
            known = {d for d in dims if is_int(d)}
            if len(known) > 1:
                ctx.fail(f"dim {i} differs between inputs: {shapes}")
            out.append(known.pop() if known else dims[0])
    return [TensorType(types[0].dtype, tuple(out))]


# ------------------------------------------------------------------- Split
def split_sizes(ctx: InferContext, d: Dim, split: Optional[Sequence[int]], n: int,
                uneven: bool) -> list:
    """Sizes of the ``n`` parts Split cuts a dim ``d`` (int or symbol) into: ``split`` when
    given, else equal parts (with ``uneven``, the last part may be smaller)."""
    if split is not None:
        if len(split) != n:
            ctx.fail(f"split {split} has {len(split)} entries for {n} outputs")
        if is_int(d) and sum(split) != d:
            ctx.fail(f"split {split} does not add up to {d}")
        return list(split)
    if not is_int(d):
        return [ctx.sym(100 * j) for j in range(n)]
    if uneven:
        chunk = -(-d // n)
        return [chunk] * (n - 1) + [d - chunk * (n - 1)]
    if d % n:
        ctx.fail(f"dim {d} cannot be split evenly into {n} outputs")
    return [d // n] * n


def _split_infer(ctx: InferContext, split, uneven: bool) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    axis = norm_axis(ctx, ctx.attrs.get("axis", 0), len(xs))
    n = ctx.num_outputs
    if uneven and split is None and "num_outputs" in ctx.attrs:
        n = int(ctx.attrs["num_outputs"])
        if n != ctx.num_outputs:
            ctx.fail(f"num_outputs={n} but the node has {ctx.num_outputs} outputs")
    sizes = split_sizes(ctx, xs[axis], split, n, uneven)
    return [TensorType(xt.dtype, tuple(s if i == axis else d for i, d in enumerate(xs)))
            for s in sizes]


@define("Split", 2)
def split2(ctx: InferContext) -> list[TensorType]:
    """Split along ``axis`` by the ``split`` attribute (equal parts if absent)."""
    split = ctx.attrs.get("split")
    return _split_infer(ctx, ints(split) if split else None, False)


@define("Split", 13, value_inputs=(1,))
def split13(ctx: InferContext) -> list[TensorType]:
    """Split with the part sizes as optional input 1."""
    if ctx.has_input(1):
        v = ctx.value(1)
        if v is None:
            xt = ctx.input_type(0)
            xs = ctx.input_shape(0)
            axis = norm_axis(ctx, ctx.attrs.get("axis", 0), len(xs))
            return [TensorType(xt.dtype, tuple(ctx.sym(100 * j + i) if i == axis else d
                                               for i, d in enumerate(xs)))
                    for j in range(ctx.num_outputs)]
        return _split_infer(ctx, ints(v), False)
    return _split_infer(ctx, None, False)


@define("Split", 18, value_inputs=(1,))
def split18(ctx: InferContext) -> list[TensorType]:
    """Split-13 plus ``num_outputs`` (the last part may be smaller)."""
    if ctx.has_input(1):
        return split13(ctx)
    return _split_infer(ctx, None, True)


# ------------------------------------------------------------------- Slice
def _slice_infer(ctx: InferContext, starts, ends, axes, steps) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    r = len(xs)
    if len(starts) != len(ends):
        ctx.fail(f"starts {starts} and ends {ends} differ in length")
    ax = list(range(len(starts))) if axes is None else norm_axes(ctx, axes, r)
    st = [1] * len(starts) if steps is None else steps
    if len(ax) != len(starts) or len(st) != len(starts):
        ctx.fail("starts, ends, axes and steps must have the same length")
    if any(s == 0 for s in st):
        ctx.fail("steps must not be 0")
    out = list(xs)
    for s, e, a, step in zip(starts, ends, ax, st):
        d = xs[a]
        if is_int(d):
            out[a] = len(range(*slice(s, e, step).indices(d)))
        elif step == 1 and s == 0 and e >= BIG:
            out[a] = d
        else:
            out[a] = ctx.sym(a)
    return [TensorType(xt.dtype, tuple(out))]


@define("Slice", 1, traits=_HOST)
def slice1(ctx: InferContext) -> list[TensorType]:
    """Slice with ``starts``/``ends``/``axes`` attributes."""
    a = ctx.attrs
    return _slice_infer(ctx, ints(a["starts"]), ints(a["ends"]),
                        ints(a["axes"]) if a.get("axes") else None, None)


@define("Slice", 10, value_inputs=(1, 2, 3, 4), traits=_HOST)
def slice10(ctx: InferContext) -> list[TensorType]:
    """Slice with starts, ends and optional axes, steps as inputs."""
    vals = [ctx.value(i) for i in range(1, 5)]
    xs = ctx.input_shape(0)
    known = [v is not None or not ctx.has_input(i + 1) for i, v in enumerate(vals)]
    if not all(known):
        if known[2] and vals[2] is not None:  # axes known: only those dims change
            axes = norm_axes(ctx, ints(vals[2]), len(xs))
            return [TensorType(ctx.input_type(0).dtype,
                               tuple(ctx.sym(i) if i in axes else d
                                     for i, d in enumerate(xs)))]
        return [TensorType(ctx.input_type(0).dtype, tuple(ctx.sym(i) for i in range(len(xs))))]
    starts, ends, axes, steps = (None if v is None else ints(v) for v in vals)
    return _slice_infer(ctx, starts, ends, axes, steps)


# ------------------------------------------------------------------ Gather
@define("Gather", 1, traits=_HOST)
def gather(ctx: InferContext) -> list[TensorType]:
    """np.take along ``axis`` (negative indices count from the end)."""
    xt = ctx.input_type(0)
    xs, ids = ctx.input_shape(0), ctx.input_shape(1)
    if ctx.input_type(1).dtype not in ("int32", "int64"):
        ctx.fail(f"indices must be int32/int64, got {ctx.input_type(1).dtype}")
    if not xs:
        ctx.fail("data must have rank >= 1")
    axis = norm_axis(ctx, ctx.attrs.get("axis", 0), len(xs))
    return [TensorType(xt.dtype, tuple(xs[:axis]) + tuple(ids) + tuple(xs[axis + 1:]))]


@define("GatherElements", 11)
def gather_elements(ctx: InferContext) -> list[TensorType]:
    """np.take_along_axis along ``axis``: the output has the indices' shape."""
    xs, ids = ctx.input_shape(0), ctx.input_shape(1)
    if len(xs) != len(ids):
        ctx.fail(f"data {xs} and indices {ids} must have the same rank")
    norm_axis(ctx, ctx.attrs.get("axis", 0), len(xs))
    return [TensorType(ctx.input_type(0).dtype, tuple(ids))]


# ------------------------------------------------------------ Expand / Tile
@define("Expand", 8, value_inputs=(1,), traits=_HOST)
def expand(ctx: InferContext) -> list[TensorType]:
    """Broadcast the input to (input shape) x (shape input), numpy style."""
    xt = ctx.input_type(0)
    v = ctx.value(1)
    if v is None:
        n = vector_len(ctx, 1)
        return [TensorType(xt.dtype, None if n is None or xt.shape is None else
                           tuple(ctx.sym(i) for i in range(max(n, len(xt.shape)))))]
    return [TensorType(xt.dtype, broadcast_shapes(ctx, ctx.input_shape(0), tuple(ints(v))))]


@define("Tile", 6, value_inputs=(1,), traits=_HOST)
def tile(ctx: InferContext) -> list[TensorType]:
    """Repeat the input ``repeats[i]`` times along each dim."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    v = ctx.value(1)
    if v is None:
        return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs))))]
    reps = ints(v)
    if len(reps) != len(xs) or any(r < 0 for r in reps):
        ctx.fail(f"repeats {reps} do not fit rank {len(xs)}")
    return [TensorType(xt.dtype, tuple(d * r if is_int(d) else (d if r == 1 else ctx.sym(i))
                                       for i, (d, r) in enumerate(zip(xs, reps))))]


# -------------------------------------------------------------------- Pad
def pad_shape(ctx: InferContext, xs: Sequence[Dim], pads: Sequence[int],
              axes: Optional[Sequence[int]]) -> tuple:
    """``xs`` padded by ``pads`` (begins, then ends) on ``axes`` (every axis when None);
    negative pads crop."""
    r = len(xs)
    axes = list(range(r)) if axes is None else norm_axes(ctx, axes, r)
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads {pads} must have 2 entries per padded axis ({len(axes)})")
    out = list(xs)
    for j, a in enumerate(axes):
        pb, pe = pads[j], pads[j + len(axes)]
        d = xs[a]
        if is_int(d):
            if d + pb + pe < 0:
                ctx.fail(f"pads {pads} crop axis {a} of size {d} below 0")
            out[a] = d + pb + pe
        else:
            out[a] = d if pb == 0 and pe == 0 else ctx.sym(a)
    return tuple(out)


@define("Pad", 2)
def pad2(ctx: InferContext) -> list[TensorType]:
    """Pad with the ``pads`` attribute; modes constant (``value``), reflect, edge."""
    xt = ctx.input_type(0)
    return [TensorType(xt.dtype, pad_shape(ctx, ctx.input_shape(0), ints(ctx.attrs["pads"]),
                                           None))]


@define("Pad", 11, value_inputs=(1, 3))
def pad11(ctx: InferContext) -> list[TensorType]:
    """Pad with pads (since 18 axes) as inputs, optional constant_value; mode wrap since 19."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    v = ctx.value(1)
    axes = ctx.value(3) if ctx.has_input(3) else None
    if v is None or (ctx.has_input(3) and axes is None):
        return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs))))]
    return [TensorType(xt.dtype, pad_shape(ctx, xs, ints(v),
                                           None if axes is None else ints(axes)))]

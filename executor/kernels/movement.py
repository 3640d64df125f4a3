"""Data movement: Concat, Split, Slice, Gather, GatherElements, Expand, Tile, Pad."""
from __future__ import annotations

import numpy as np

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import (
    axis_plain, broadcast_shapes, ints, is_int, norm_axes, norm_axis, vector_len, view)
from aircc.executor.kernels.registry import InferContext, op

BIG = 2 ** 31 - 1


# ------------------------------------------------------------------ Concat
@op("Concat", since=1)
class Concat:
    """Join inputs along ``axis`` (default 1 in opset 1-3, required since 4)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
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

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        axis = axis_plain(attrs.get("axis", 1), y.ndim)
        in_place = attrs.get("in_place")
        if in_place is None:
            np.concatenate(ins, axis=axis, out=y)
            return
        # the memory plan put the parts marked in place in their slice of y already
        start, idx = 0, [slice(None)] * y.ndim
        for x, done in zip(ins, in_place):
            end = start + x.shape[axis]
            if not done:
                idx[axis] = slice(start, end)
                np.copyto(y[tuple(idx)], x)
            start = end


# ------------------------------------------------------------------- Split
def _split_sizes(ctx: InferContext, d, split, n: int, uneven: bool):
    """Sizes of the ``n`` parts of a dim ``d`` (ints or symbols)."""
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
    sizes = _split_sizes(ctx, xs[axis], split, n, uneven)
    return [TensorType(xt.dtype, tuple(s if i == axis else d for i, d in enumerate(xs)))
            for s in sizes]


def _split_kernel(x, outs, axis: int) -> None:
    start = 0
    for y in outs:
        n = y.shape[axis]
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(start, start + n)
        np.copyto(y, x[tuple(idx)])
        start += n


@op("Split", since=2)
class Split2:
    """Split along ``axis`` by the ``split`` attribute (equal parts if absent)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        split = ctx.attrs.get("split")
        return _split_infer(ctx, ints(split) if split else None, False)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _split_kernel(ins[0], outs, axis_plain(attrs.get("axis", 0), ins[0].ndim))


@op("Split", since=13, value_inputs=(1,))
class Split13:
    """Split with the part sizes as optional input 1."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
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

    kernel = Split2.kernel


@op("Split", since=18, value_inputs=(1,))
class Split18:
    """Split-13 plus ``num_outputs`` (the last part may be smaller)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        if ctx.has_input(1):
            return Split13.infer(ctx)
        return _split_infer(ctx, None, True)

    kernel = Split2.kernel


# ------------------------------------------------------------------- Slice
def _slices(rank: int, starts, ends, axes, steps) -> list[slice]:
    """Per-dim Python slices for ONNX Slice parameters (Python clamping = ONNX clamping)."""
    idx = [slice(None)] * rank
    axes = list(range(len(starts))) if axes is None else [axis_plain(a, rank) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    for s, e, a, st in zip(starts, ends, axes, steps):
        idx[a] = slice(int(s), int(e), int(st))
    return idx


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


@op("Slice", since=1)
class Slice1:
    """Slice with ``starts``/``ends``/``axes`` attributes."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        a = ctx.attrs
        return _slice_infer(ctx, ints(a["starts"]), ints(a["ends"]),
                            ints(a["axes"]) if a.get("axes") else None, None)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        idx = _slices(x.ndim, attrs["starts"], attrs["ends"], attrs.get("axes"), None)
        np.copyto(outs[0], x[tuple(idx)])


@op("Slice", since=10, value_inputs=(1, 2, 3, 4))
class Slice10:
    """Slice with starts, ends and optional axes, steps as inputs."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        vals = [ctx.value(i) for i in range(1, 5)]
        xs = ctx.input_shape(0)
        known = [v is not None or not ctx.has_input(i + 1) for i, v in enumerate(vals)]
        if not all(known):
            if known[2] and vals[2] is not None:  # axes known: only those dims change
                axes = norm_axes(ctx, ints(vals[2]), len(xs))
                return [TensorType(ctx.input_type(0).dtype,
                                   tuple(ctx.sym(i) if i in axes else d
                                         for i, d in enumerate(xs)))]
            return [TensorType(ctx.input_type(0).dtype, tuple(ctx.sym(i)
                                                              for i in range(len(xs))))]
        starts, ends, axes, steps = (None if v is None else ints(v) for v in vals)
        return _slice_infer(ctx, starts, ends, axes, steps)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        opt = [ints(ins[i]) if len(ins) > i and ins[i] is not None else None for i in (3, 4)]
        idx = _slices(x.ndim, ints(ins[1]), ints(ins[2]), opt[0], opt[1])
        np.copyto(outs[0], x[tuple(idx)])


# ------------------------------------------------------------------ Gather
@op("Gather", since=1)
class Gather:
    """np.take along ``axis`` (negative indices count from the end)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        xs, ids = ctx.input_shape(0), ctx.input_shape(1)
        if ctx.input_type(1).dtype not in ("int32", "int64"):
            ctx.fail(f"indices must be int32/int64, got {ctx.input_type(1).dtype}")
        if not xs:
            ctx.fail("data must have rank >= 1")
        axis = norm_axis(ctx, ctx.attrs.get("axis", 0), len(xs))
        return [TensorType(xt.dtype, tuple(xs[:axis]) + tuple(ids) + tuple(xs[axis + 1:]))]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        np.take(x, ins[1], axis=axis_plain(attrs.get("axis", 0), x.ndim), out=outs[0])


@op("GatherElements", since=11)
class GatherElements:
    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xs, ids = ctx.input_shape(0), ctx.input_shape(1)
        if len(xs) != len(ids):
            ctx.fail(f"data {xs} and indices {ids} must have the same rank")
        norm_axis(ctx, ctx.attrs.get("axis", 0), len(xs))
        return [TensorType(ctx.input_type(0).dtype, tuple(ids))]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, idx = ins[0], ins[1]
        axis = axis_plain(attrs.get("axis", 0), x.ndim)
        idx = np.where(idx < 0, idx + x.shape[axis], idx)
        np.copyto(outs[0], np.take_along_axis(x, idx, axis=axis))


# ------------------------------------------------------------ Expand / Tile
@op("Expand", since=8, value_inputs=(1,))
class Expand:
    """Broadcast the input to (input shape) x (shape input), numpy style."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        v = ctx.value(1)
        if v is None:
            n = vector_len(ctx, 1)
            return [TensorType(xt.dtype, None if n is None or xt.shape is None else
                               tuple(ctx.sym(i) for i in range(max(n, len(xt.shape)))))]
        return [TensorType(xt.dtype, broadcast_shapes(ctx, ctx.input_shape(0), tuple(ints(v))))]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        np.copyto(outs[0], ins[0])


@op("Tile", since=6, value_inputs=(1,))
class Tile:
    """Repeat the input ``repeats[i]`` times along each dim."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
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

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        reps = ints(ins[1])
        inter = [v for r, d in zip(reps, x.shape) for v in (r, d)]
        src = x.reshape([v for d in x.shape for v in (1, d)])
        np.copyto(view(y, inter), src)


# -------------------------------------------------------------------- Pad
def _pad_shape(ctx: InferContext, xs, pads, axes) -> tuple:
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


def _pad_kernel(x: np.ndarray, y: np.ndarray, pads, axes, mode: str, value) -> None:
    r = x.ndim
    axes = list(range(r)) if axes is None else [axis_plain(a, r) for a in axes]
    pb, pe = [0] * r, [0] * r
    for j, a in enumerate(axes):
        pb[a], pe[a] = int(pads[j]), int(pads[j + len(axes)])
    # negative pads crop the input first
    src = x[tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0))
                  for i, (b, e) in enumerate(zip(pb, pe)))]
    pb, pe = [max(b, 0) for b in pb], [max(e, 0) for e in pe]
    if mode == "constant":
        for i in range(r):
            for sl in (slice(0, pb[i]), slice(y.shape[i] - pe[i], y.shape[i])):
                if sl.stop > sl.start:
                    idx = [slice(None)] * r
                    idx[i] = sl
                    y[tuple(idx)] = value
        y[tuple(slice(pb[i], pb[i] + src.shape[i]) for i in range(r))] = src
    else:
        np.copyto(y, np.pad(src, list(zip(pb, pe)), mode={"edge": "edge", "reflect": "reflect",
                                                          "wrap": "wrap"}[mode]))


@op("Pad", since=2)
class Pad2:
    """Pad with the ``pads`` attribute; modes constant (``value``), reflect, edge."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        return [TensorType(xt.dtype, _pad_shape(ctx, ctx.input_shape(0),
                                                ints(ctx.attrs["pads"]), None))]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _pad_kernel(ins[0], outs[0], attrs["pads"], None, attrs.get("mode", "constant"),
                    attrs.get("value", 0.0))


@op("Pad", since=11, value_inputs=(1, 3))
class Pad11:
    """Pad with pads (and since 18 axes) as inputs, optional constant_value input; mode
    wrap since 19."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        xs = ctx.input_shape(0)
        v = ctx.value(1)
        axes = ctx.value(3) if ctx.has_input(3) else None
        if v is None or (ctx.has_input(3) and axes is None):
            return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs))))]
        return [TensorType(xt.dtype, _pad_shape(ctx, xs, ints(v),
                                                None if axes is None else ints(axes)))]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        value = ins[2].reshape(-1)[0] if len(ins) > 2 and ins[2] is not None and ins[2].size \
            else 0
        axes = ints(ins[3]) if len(ins) > 3 and ins[3] is not None else None
        _pad_kernel(ins[0], outs[0], ints(ins[1]), axes, attrs.get("mode", "constant"), value)

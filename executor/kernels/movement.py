"""Kernels of data movement: Concat, Split, Slice, Gather, GatherElements, Expand, Tile, Pad
(their shape rules: :mod:`aircc.ops.defs.movement`)."""
from __future__ import annotations

import numpy as np

from aircc.ops.shapes import axis_plain, ints

from .numpy_backend import NUMPY
from .scratch import view


# ------------------------------------------------------------------ Concat
@NUMPY.kernel("Concat", 1)
class Concat:
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
def _split_kernel(x, outs, axis: int) -> None:
    start = 0
    for y in outs:
        n = y.shape[axis]
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(start, start + n)
        np.copyto(y, x[tuple(idx)])
        start += n


def _split(ins, outs, attrs, tiling, ws) -> None:
    _split_kernel(ins[0], outs, axis_plain(attrs.get("axis", 0), ins[0].ndim))


@NUMPY.kernel("Split", 2)
class Split2:
    kernel = staticmethod(_split)


@NUMPY.kernel("Split", 13)
class Split13:
    kernel = staticmethod(_split)


@NUMPY.kernel("Split", 18)
class Split18:
    kernel = staticmethod(_split)


# ------------------------------------------------------------------- Slice
def _slices(rank: int, starts, ends, axes, steps) -> list[slice]:
    """Per-dim Python slices for ONNX Slice parameters (Python clamping = ONNX clamping)."""
    idx = [slice(None)] * rank
    axes = list(range(len(starts))) if axes is None else [axis_plain(a, rank) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    for s, e, a, st in zip(starts, ends, axes, steps):
        idx[a] = slice(int(s), int(e), int(st))
    return idx


@NUMPY.kernel("Slice", 1)
class Slice1:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        idx = _slices(x.ndim, attrs["starts"], attrs["ends"], attrs.get("axes"), None)
        np.copyto(outs[0], x[tuple(idx)])


@NUMPY.kernel("Slice", 10)
class Slice10:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        opt = [ints(ins[i]) if len(ins) > i and ins[i] is not None else None for i in (3, 4)]
        idx = _slices(x.ndim, ints(ins[1]), ints(ins[2]), opt[0], opt[1])
        np.copyto(outs[0], x[tuple(idx)])


# ------------------------------------------------------------------ Gather
#: Up to this many output bytes, numpy's ``raise`` mode checks the indices in the same
#: pass as the copy, faster than a check first (16 embedding rows: 1.7 against 3.4 us).
GATHER_RAISE_BYTES = 64 << 10


@NUMPY.kernel("Gather", 1)
class Gather:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        gather(x, ins[1], outs[0], axis_plain(attrs.get("axis", 0), x.ndim))

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        """Bound once: constant indices checked here (one index: a copy of a view, 0.35
        against 1.4 us); indices that change per run checked by numpy's ``raise`` mode
        into a small output, else by :func:`gather`.  An out-of-range constant index
        leaves the check to each run (the kernel raises there)."""
        x, idx, out = ins[0], ins[1], outs[0]
        axis = axis_plain(attrs.get("axis", 0), x.ndim)
        n = x.shape[axis]
        if constant[1] and (idx.size == 0 or (int(idx.min()) >= -n and int(idx.max()) < n)):
            if idx.ndim == 0:     # a view of x (a 1-element slice: an int index of a 1-D x
                i = int(idx) % n  # would give a numpy scalar, a copy of x[i] at bind time)
                src = x[(slice(None),) * axis + (slice(i, i + 1),)].reshape(out.shape)
                assert np.shares_memory(src, x), "a bound Gather must read x where it lies"
                return lambda copyto=np.copyto: copyto(out, src)
            fixed = np.where(idx < 0, idx + n, idx)
            return lambda take=np.take: take(x, fixed, axis=axis, out=out, mode="wrap")
        if constant[1]:
            return None
        if out.nbytes <= GATHER_RAISE_BYTES:
            return lambda take=np.take: take(x, idx, axis=axis, out=out, mode="raise")
        return lambda: gather(x, idx, out, axis)


def gather(x: np.ndarray, idx: np.ndarray, out: np.ndarray, axis: int) -> None:
    """``np.take`` into ``out``, negative indices counting from the end: bounds checked
    first, then numpy's ``wrap`` mode (its ``raise`` mode with ``out`` goes through a
    temporary copy: BERT's 1024 embedding rows 25 -> 7 us)."""
    n = x.shape[axis]
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")
    np.take(x, idx, axis=axis, out=out, mode="wrap")


@NUMPY.kernel("GatherElements", 11)
class GatherElements:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, idx = ins[0], ins[1]
        axis = axis_plain(attrs.get("axis", 0), x.ndim)
        idx = np.where(idx < 0, idx + x.shape[axis], idx)
        np.copyto(outs[0], np.take_along_axis(x, idx, axis=axis))


# ------------------------------------------------------------ Expand / Tile
@NUMPY.kernel("Expand", 8)
class Expand:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        np.copyto(outs[0], ins[0])


@NUMPY.kernel("Tile", 6)
class Tile:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        reps = ints(ins[1])
        inter = [v for r, d in zip(reps, x.shape) for v in (r, d)]
        src = x.reshape([v for d in x.shape for v in (1, d)])
        np.copyto(view(y, inter), src)


# -------------------------------------------------------------------- Pad
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


@NUMPY.kernel("Pad", 2)
class Pad2:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _pad_kernel(ins[0], outs[0], attrs["pads"], None, attrs.get("mode", "constant"),
                    attrs.get("value", 0.0))


@NUMPY.kernel("Pad", 11)
class Pad11:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        value = ins[2].reshape(-1)[0] if len(ins) > 2 and ins[2] is not None and ins[2].size \
            else 0
        axes = ints(ins[3]) if len(ins) > 3 and ins[3] is not None else None
        _pad_kernel(ins[0], outs[0], ints(ins[1]), axes, attrs.get("mode", "constant"), value)

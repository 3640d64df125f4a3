"""Pooling kernels: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

2-D pools without dilation are separable: one pass per window row (over whole
contiguous rows of the input), then one per window column; taps that fall in the
padding are skipped, so no padded copy is made.  Dilated 2-D pools use the
stride-phase layout of :func:`.phases.phase_plan` (each tap a contiguous run), other
ranks strided views of a padded copy.  Padding is -inf (max) or 0 (average,
divided by the per-position count afterwards).  The tilings here choose among
these; the passes are in :mod:`.pool_passes`.
"""
from __future__ import annotations

import numpy as np

from aircc.ops.shapes import prod, window_attrs, window_geometry
from aircc.ops.targets import Target

from .numpy_backend import NUMPY
from .phases import phase_bytes, phase_plan
from .pool_passes import flat_pool, padded_input, phase_pool, separable_pool, window_views
from .scratch import align, ensure_tiling, lowest, workspace


def _pool_tiling(types, attrs) -> dict:
    xt = types[0]
    xs = [int(d) for d in xt.shape]
    nsp = len(xs) - 2
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides, dilations, pads, auto_pad = window_attrs(attrs, nsp, kernel)
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    out_sp, pb, pe = window_geometry(xs[2:], kernel, strides, dilations, pads, auto_pad,
                                     ceil_mode)
    # padded extent covering every window (ceil_mode may need more than the pads)
    psp = [max(xs[2 + i] + pb[i] + pe[i],
               (out_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1)
           for i in range(nsp)]
    pe_full = [psp[i] - xs[2 + i] - pb[i] for i in range(nsp)]
    padded = any(pb) or any(pe_full)
    item = np.dtype(xt.dtype).itemsize
    t = dict(kernel=kernel, strides=strides, dilations=dilations, out=out_sp, pb=pb,
             pe=pe, pe_full=pe_full, psp=psp, padded=bool(padded), mode="generic")
    if nsp == 2 and dilations != [1, 1]:   # undilated 2-D pools are separable (below)
        # stride-phase layout: every window tap is one contiguous run (see .phases)
        plan = phase_plan(xs[2:], out_sp, kernel, strides, dilations, pb)
        base = phase_bytes(plan, xs[0] * xs[1], item)
        t.update(mode="phase", plan=plan, acc_off=base,
                 workspace=base + align(xs[0] * xs[1] * out_sp[0] * plan["wq"] * item))
    else:
        t["workspace"] = prod(xs[:2]) * prod(psp) * item if padded else 0
    return t


def _tap_ranges(n_out: int, size: int, k: int, stride: int, pad: int) -> list[list[int]]:
    """Per window tap along one axis: [o0, o1, i0], the output positions o0..o1-1 whose
    tap reads the input (from position i0, every ``stride``); taps that fall in the
    padding are left out, which is the pad value for max (-inf) and for sums (0)."""
    ranges = []
    for i in range(k):
        o0 = max(0, -(-(pad - i) // stride))
        o1 = min(n_out, (size - 1 + pad - i) // stride + 1)
        if o1 > o0:
            ranges.append([o0, o1, o0 * stride - pad + i])
    return ranges


#: Input bytes per block of channels of the separable pool.  Its passes are contiguous
#: (a strided column pass goes through every column first), so fewer, longer calls win:
#: a 64 x 112 x 112 stride-2 max pool takes 306 us in blocks of 4 MiB, 462 in 512 KiB
#: (A/B in one process); 28 x 28 and smaller are flat from 512 KiB up.
POOL_BLOCK_BYTES = 4 << 20

#: Planes at least this large (elements), unpadded, take the flat mode.
FLAT_MIN_PLANE = 2048
#: Input bytes per block of channels of the flat mode.
FLAT_BLOCK_BYTES = 4 << 20


def _separable_tiling(types, t: dict) -> dict:
    """Switch a 2-D, undilated pool's tiling to the flat mode (unpadded, big planes) or
    the separable mode."""
    xs = [int(d) for d in types[0].shape]
    if len(xs) != 4 or t["dilations"] != [1, 1]:
        return t
    item = np.dtype(types[0].dtype).itemsize
    (kh, kw), (sh, sw), (ho, wo) = t["kernel"], t["strides"], t["out"]
    if not t["padded"] and xs[2] * xs[3] >= FLAT_MIN_PLANE:
        n1 = (sh * (ho - 1) + 1) * xs[3]
        block = max(1, min(xs[0] * xs[1], FLAT_BLOCK_BYTES // (xs[2] * xs[3] * item)))
        cols = align(block * n1 * item)
        t.update(mode="flat", block=block, flat_rows=n1, flat_cols_off=cols,
                 workspace=cols + align(block * (n1 - kw + 1) * item))
        return t
    block = max(1, min(xs[0] * xs[1], POOL_BLOCK_BYTES // max(1, xs[2] * xs[3] * item)))
    rows = align(block * ho * xs[3] * item)
    # a strided column pass combines its taps at every column first
    # (see pool_passes._reduce_rows_flat)
    scratch = rows if sw > 1 else 0
    t.update(mode="separable", rows_off=0, scratch_off=scratch, block=block,
             workspace=rows + (rows if scratch else 0),
             row_taps=_tap_ranges(ho, xs[2], kh, sh, t["pb"][0]),
             col_taps=_tap_ranges(wo, xs[3], kw, sw, t["pb"][1]))
    return t


@NUMPY.kernel("MaxPool", since=1)
class MaxPool:
    """Max over sliding windows: separable, flat, phase or generic, as tiled."""

    @staticmethod
    def tiling(types, attrs: dict, target: Target) -> dict:
        # separable: max over the window's rows, then over its columns (kh + kw - 2
        # passes instead of kh * kw - 1, no padded copy)
        return _separable_tiling(types, _pool_tiling(types, attrs))

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        t = ensure_tiling(MaxPool, tiling, ins, attrs)
        if t["mode"] == "separable":
            separable_pool(x, y, t, workspace(ws, t["workspace"]), np.maximum, lowest(x.dtype))
            return
        if t["mode"] == "flat":
            flat_pool(x, y, t, workspace(ws, t["workspace"]), np.maximum)
            return
        if t["mode"] == "phase":
            np.copyto(y, phase_pool(x, t, ws, lowest(x.dtype), np.maximum))
            return
        xp = padded_input(x, t, ws, lowest(x.dtype))
        for k, v in enumerate(window_views(xp, t)):
            if k == 0:
                np.copyto(y, v)
            else:
                np.maximum(y, v, out=y)


def _avg_counts(t: dict, in_sp, include_pad: bool) -> list[np.ndarray]:
    """Per spatial axis, how many window positions each output position averages."""
    counts = []
    for i, size in enumerate(in_sp):
        o = np.arange(t["out"][i])[:, None] * t["strides"][i] - t["pb"][i]
        p = o + np.arange(t["kernel"][i])[None, :] * t["dilations"][i]
        lo, hi = (-t["pb"][i], size + t["pe"][i]) if include_pad else (0, size)
        counts.append(((p >= lo) & (p < hi)).sum(axis=1))
    return counts


@NUMPY.kernel("AveragePool", since=1)
class AveragePool:
    """Sums over sliding windows (MaxPool's passes with ``np.add``), divided by the
    window's size or, at the borders, by the count the tiling worked out."""

    @staticmethod
    def tiling(types, attrs: dict, target: Target) -> dict:
        t = _pool_tiling(types, attrs)
        in_sp = [int(d) for d in types[0].shape[2:]]
        counts = _avg_counts(t, in_sp, bool(attrs.get("count_include_pad", 0)))
        full = prod(t["kernel"])
        t["uniform"] = all(bool((c == t["kernel"][i]).all()) for i, c in enumerate(counts))
        t["counts"] = [[int(v) for v in c] for c in counts]
        t["full"] = full
        return _separable_tiling(types, t)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        t = ensure_tiling(AveragePool, tiling, ins, attrs)
        if t["mode"] == "separable":
            separable_pool(x, y, t, workspace(ws, t["workspace"]), np.add, 0)
            src = y
        elif t["mode"] == "flat":
            flat_pool(x, y, t, workspace(ws, t["workspace"]), np.add)
            src = y
        elif t["mode"] == "phase":
            src = phase_pool(x, t, ws, 0, np.add)
        else:
            xp = padded_input(x, t, ws, 0)
            for k, v in enumerate(window_views(xp, t)):
                if k == 0:
                    np.copyto(y, v)
                else:
                    np.add(y, v, out=y)
            src = y
        if t["uniform"]:
            np.divide(src, y.dtype.type(t["full"]), out=y)
        else:
            cnt = np.ones((), dtype=np.float64)
            for c in t["counts"]:
                cnt = np.multiply.outer(cnt, np.asarray(c, dtype=np.float64))
            np.divide(src, cnt.astype(y.dtype), out=y)


@NUMPY.kernel("GlobalAveragePool", since=1)
class GlobalAveragePool:
    """np.mean over the spatial dims."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        np.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True, out=outs[0])


@NUMPY.kernel("GlobalMaxPool", since=1)
class GlobalMaxPool:
    """np.max over the spatial dims."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True, out=outs[0])

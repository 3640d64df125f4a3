"""The 2-D stride-phase layout: every kernel tap of a sliding window as one contiguous run.

Used by the convolution and pooling kernels; :func:`phase_plan` is part of their
tiling (ints only, so it is stored in the .om), the rest runs in the kernels.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.ops.shapes import ceil_div, prod

from .scratch import align, carve, view


# ------------------------------------------------- 2-D stride-phase layout
# A 2-D sliding window with strides (sh, sw) reads, for kernel tap (a, b), the padded
# input at rows oh*sh + a*dh and columns ow*sw + b*dw.  Splitting the padded input into
# its sh*sw stride phases (plane (pa, pb) holds rows pa::sh and columns pb::sw, Hq x Wq)
# turns every tap into one contiguous run of a plane: computing output rows Wq wide,
# output (oh, ow) of tap (a, b) is plane element (oh + qa) * Wq + ow + qb.  The Wq - Wo
# extra columns are dropped when storing.  Runs may read up to ``slack`` elements past
# the end of a plane (into the next plane, or the zeroed slack after the last one);
# that only ever lands in dropped columns.
def phase_plan(in_sp, out_sp, kernel, strides, dilations, pb) -> dict:
    """Geometry of the phase layout of a 2-D window op (ints only, msgpack-able)."""
    (sh, sw), (dh, dw), (kh, kw) = strides, dilations, kernel
    hp = max((out_sp[0] - 1) * sh + (kh - 1) * dh + 1, in_sp[0] + pb[0])
    wp = max((out_sp[1] - 1) * sw + (kw - 1) * dw + 1, in_sp[1] + pb[1])
    hq, wq = ceil_div(hp, sh), ceil_div(wp, sw)
    index: dict[tuple[int, int], int] = {}       # phase -> its position, in first-use order
    taps = []
    for a in range(kh):
        for b in range(kw):
            k = index.setdefault(((a * dh) % sh, (b * dw) % sw), len(index))
            taps.append([k, (a * dh // sh) * wq + b * dw // sw])
    phases = [list(ph) for ph in index]
    return dict(hq=hq, wq=wq, phases=phases, taps=taps, pb2=list(pb[:2]),
                slack=max(b * dw // sw for b in range(kw)), plane=hq * wq,
                ho=out_sp[0], wo=out_sp[1], sh=sh, sw=sw)


def phase_bytes(plan: dict, planes_per_phase: int, itemsize: int) -> int:
    return align((len(plan["phases"]) * planes_per_phase * plan["plane"] + plan["slack"])
                 * itemsize)


def pad_into(dst: np.ndarray, src: np.ndarray, pb, pe, fill=0) -> None:
    """Copy ``src`` (C, *sp) into ``dst`` (C, *padded) with ``fill`` in the borders."""
    nsp = len(pb)
    for i in range(nsp):
        size = dst.shape[1 + i]
        for sl in (slice(0, pb[i]), slice(size - pe[i], size)):
            if sl.stop > sl.start:
                idx = [slice(None)] * (1 + nsp)
                idx[1 + i] = sl
                dst[tuple(idx)] = fill
    interior = (slice(None),) + tuple(slice(pb[i], pb[i] + src.shape[1 + i]) for i in range(nsp))
    dst[interior] = src


def pad_into_phases(x: np.ndarray, ws: np.ndarray, offset: int, plan: dict, fill) -> np.ndarray:
    """Write the padded ``x`` (lead..., H, W) into its stride phases in the workspace.

    Returns a read-only view (phase, planes, plane + slack), planes = prod(lead).
    """
    lead = x.shape[:-2]
    npl = prod(lead)
    hq, wq, sh, sw = plan["hq"], plan["wq"], plan["sh"], plan["sw"]
    nph, plane, slack = len(plan["phases"]), plan["plane"], plan["slack"]
    flat = carve(ws, offset, (nph * npl * plane + slack,), x.dtype)
    if slack:
        flat[-slack:] = 0
    dst = view(flat[:nph * npl * plane], (nph, npl, hq, wq))
    x3 = x.reshape(npl, *x.shape[-2:])
    h, w = x.shape[-2:]
    t0, l0 = plan["pb2"]
    for j, (pa, pb) in enumerate(plan["phases"]):
        # plane rows r hold padded row r*sh + pa = input row r*sh + pa - t0
        r_lo, c_lo = ceil_div(max(t0 - pa, 0), sh), ceil_div(max(l0 - pb, 0), sw)
        r_hi = min(hq, ceil_div(h + t0 - pa, sh)) if h + t0 - pa > 0 else 0
        c_hi = min(wq, ceil_div(w + l0 - pb, sw)) if w + l0 - pb > 0 else 0
        d = dst[j]
        if r_hi <= r_lo or c_hi <= c_lo:
            d[...] = fill
            continue
        d[:, :r_lo] = fill
        d[:, r_hi:] = fill
        d[:, r_lo:r_hi, :c_lo] = fill
        d[:, r_lo:r_hi, c_hi:] = fill
        xr, xc = r_lo * sh + pa - t0, c_lo * sw + pb - l0
        d[:, r_lo:r_hi, c_lo:c_hi] = x3[:, xr:xr + (r_hi - r_lo - 1) * sh + 1:sh,
                                        xc:xc + (c_hi - c_lo - 1) * sw + 1:sw]
    it = flat.itemsize
    return as_strided(flat, shape=(nph, npl, plane + slack),
                      strides=(npl * plane * it, plane * it, it), writeable=False)

"""The passes of the pooling kernels: each reduces the taps of a sliding window
with a ufunc (``np.maximum`` for max, ``np.add`` for sums), in the way a pool's
tiling (:mod:`.pool`) chose for its shape.

- :func:`separable_pool`: 2-D, no dilation; over the window rows, then its columns,
  taps in the padding skipped (no padded copy);
- :func:`flat_pool`: 2-D, no dilation, unpadded big planes; the window at every input
  position in whole-plane passes, then a strided pick;
- :func:`phase_pool`: 2-D, dilated; the stride-phase layout of :mod:`.phases`;
- :func:`padded_input` and :func:`window_views`: any rank; one strided view of a
  padded copy per window tap.
"""
from __future__ import annotations

import itertools
from typing import Callable, Iterator, Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.ops.shapes import prod

from .phases import pad_into, pad_into_phases
from .scratch import carve, view, workspace

Ufunc = Callable[..., np.ndarray]
"""A binary ufunc combining two taps (``np.maximum``, ``np.add``), called with ``out=``."""


def phase_pool(x: np.ndarray, t: dict, ws: Optional[np.ndarray], fill, ufunc: Ufunc) -> np.ndarray:
    """Combine the window taps with ``ufunc``; returns the (N, C, Ho, Wo) result view."""
    plan = t["plan"]
    ws = workspace(ws, t["workspace"])
    planes = pad_into_phases(x, ws, 0, plan, fill)
    npl, ho, wq = planes.shape[1], plan["ho"], plan["wq"]
    run = ho * wq
    acc_all = carve(ws, t["acc_off"], (npl, run), x.dtype)
    chunk = max(1, (256 << 10) // max(run * x.itemsize, 1))
    for p0 in range(0, npl, chunk):
        p1 = min(npl, p0 + chunk)
        acc = acc_all[p0:p1]
        for k, (j, off) in enumerate(plan["taps"]):
            v = planes[j, p0:p1, off:off + run]
            if k == 0:
                np.copyto(acc, v)
            else:
                ufunc(acc, v, out=acc)
    return view(acc_all, (*x.shape[:2], ho, wq))[..., :plan["wo"]]


def _reduce_rows_flat(dst: np.ndarray, src: np.ndarray, ranges, stride: int, ufunc: Ufunc, fill,
                     scratch: Optional[np.ndarray] = None) -> None:
    """The last-axis pass when input rows are exactly ``stride`` output rows long: output
    position p of the flattened array reads input position stride * p + d, so each tap
    is one pass over the whole array (d is the tap's offset) instead of one short run
    per row; the few border columns, where a tap fell into the padding or the
    neighbouring row, are then redone from their valid taps.  With a stride and a
    ``scratch`` buffer as large as ``src``, the taps are combined at every input position
    in contiguous passes (numpy's vector loops) and one strided copy picks the outputs:
    strided ufunc passes run element by element."""
    width = dst.shape[-1]
    yf, xf = dst.reshape(-1), src.reshape(-1)
    n, nx = yf.size, xf.size
    shifts = [i0 - stride * o0 for o0, _, i0 in ranges]
    if stride > 1 and scratch is not None and len(shifts) > 1:
        lo_d, hi_d = min(shifts), max(shifts)
        nz = nx - (hi_d - lo_d)
        z = scratch.reshape(-1)[:nz]
        e = [d - lo_d for d in shifts]
        ufunc(xf[e[0]:e[0] + nz], xf[e[1]:e[1] + nz], out=z)
        for d in e[2:]:
            ufunc(z, xf[d:d + nz], out=z)
        # yf[p] = z[stride * p + lo_d] where that lies in z; the rest are border columns
        lo = -(lo_d // stride) if lo_d < 0 else 0
        hi = min(n, (nz - 1 - lo_d) // stride + 1)
        yf[:lo] = fill
        yf[hi:] = fill
        if hi > lo:
            start = stride * lo + lo_d
            np.copyto(yf[lo:hi], z[start:start + stride * (hi - lo - 1) + 1:stride])
    else:
        first = shifts.index(0) if 0 in shifts else None
        if first is None:
            yf[...] = fill
        else:
            np.copyto(yf, xf[:stride * (n - 1) + 1:stride])
        for k, d in enumerate(shifts):
            if k != first:
                lo = -(d // stride) if d < 0 else 0
                hi = min(n, (nx - 1 - d) // stride + 1)
                ufunc(yf[lo:hi], xf[stride * lo + d:stride * (hi - 1) + d + 1:stride], out=yf[lo:hi])
    y2, x2 = dst.reshape(-1, width), src.reshape(-1, src.shape[-1])
    for c in range(width):
        valid = [stride * c + d for (o0, o1, _), d in zip(ranges, shifts) if o0 <= c < o1]
        if len(valid) == len(ranges):
            continue
        if not valid:
            y2[:, c] = fill
            continue
        np.copyto(y2[:, c], x2[:, valid[0]])
        for i in valid[1:]:
            ufunc(y2[:, c], x2[:, i], out=y2[:, c])


def _reduce_axis(dst: np.ndarray, src: np.ndarray, ranges, stride: int, axis: int,
                 ufunc: Ufunc, fill, scratch: Optional[np.ndarray] = None) -> None:
    """dst[..., o, ...] = ufunc over the taps of src along ``axis`` (no padded copy)."""
    n_out = dst.shape[axis]
    if axis == dst.ndim - 1 and src.shape[-1] == stride * n_out and dst.flags.c_contiguous \
            and src.flags.c_contiguous and len(ranges) > 1:
        _reduce_rows_flat(dst, src, ranges, stride, ufunc, fill, scratch)
        return

    def at(a, sl):
        idx = [slice(None)] * a.ndim
        idx[axis] = sl
        return a[tuple(idx)]

    def tap(o0, o1, i0):
        return at(src, slice(i0, i0 + (o1 - o0 - 1) * stride + 1, stride))

    full = next((r for r in ranges if r[0] == 0 and r[1] == n_out), None)
    if full is None:
        dst[...] = fill
    else:
        np.copyto(dst, tap(*full))
    for r in ranges:
        if r is not full:
            part = at(dst, slice(r[0], r[1]))
            ufunc(part, tap(*r), out=part)


def separable_pool(x: np.ndarray, y: np.ndarray, t: dict, ws: np.ndarray, ufunc: Ufunc,
                   fill) -> None:
    """2-D window reduction, dilation 1: over the window rows of each column first
    (contiguous reads; the rows shrink by the stride), then over the window columns,
    a cache-sized block of channels at a time.  Taps in the padding are skipped
    rather than read from a padded copy."""
    nc = prod(x.shape[:2])
    (ho, wo), (h, w) = t["out"], x.shape[2:]
    x3, y3 = view(x, (nc, h, w)), view(y, (nc, ho, wo))
    block = t.get("block") or nc
    for c0 in range(0, nc, block):
        c1 = min(nc, c0 + block)
        rows = carve(ws, t["rows_off"], (c1 - c0, ho, w), x.dtype)
        scratch = carve(ws, t["scratch_off"], (c1 - c0, ho, w), x.dtype) if t.get("scratch_off") else None
        _reduce_axis(rows, x3[c0:c1], t["row_taps"], t["strides"][0], 1, ufunc, fill)
        _reduce_axis(y3[c0:c1], rows, t["col_taps"], t["strides"][1], 2, ufunc, fill, scratch)


def flat_pool(x: np.ndarray, y: np.ndarray, t: dict, ws: np.ndarray, ufunc: Ufunc) -> None:
    """Unpadded 2-D window reduction with every pass over whole planes: the window at
    each input position, not only at the strided ones, first over rows (plane shifted by
    a row), then over columns (shifted by one), so each pass is one long contiguous run
    per channel; then one strided copy picks the outputs.  A shift by a column wraps
    into the next row only at positions no output reads."""
    nc = prod(x.shape[:2])
    (ho, wo), (h, w) = t["out"], x.shape[2:]
    (kh, kw), (sh, sw) = t["kernel"], t["strides"]
    xf, y3 = view(x, (nc, h * w)), view(y, (nc, ho, wo))
    n1, block = t["flat_rows"], t["block"]
    n2 = n1 - (kw - 1)
    it = x.itemsize
    for c0 in range(0, nc, block):
        c1 = min(nc, c0 + block)
        src = xf[c0:c1]
        r = src[:, :n1]                  # a window one row tall is the input itself
        if kh > 1:
            r = carve(ws, 0, (c1 - c0, n1), x.dtype)
            ufunc(src[:, :n1], src[:, w:w + n1], out=r)
            for i in range(2, kh):
                ufunc(r, src[:, i * w:i * w + n1], out=r)
        c = r[:, :n2]
        if kw > 1:
            c = carve(ws, t["flat_cols_off"], (c1 - c0, n2), x.dtype)
            ufunc(r[:, :n2], r[:, 1:n2 + 1], out=c)
            for j in range(2, kw):
                ufunc(c, r[:, j:j + n2], out=c)
        np.copyto(y3[c0:c1], as_strided(c, shape=(c1 - c0, ho, wo),
                                        strides=(c.strides[0], sh * w * it, sw * it)))


def padded_input(x: np.ndarray, t: dict, ws: Optional[np.ndarray], fill) -> np.ndarray:
    """``x`` with its pads (filled with ``fill``), in the workspace; ``x`` itself if unpadded."""
    if not t["padded"]:
        return x
    xp = carve(workspace(ws, t["workspace"]), 0, (*x.shape[:2], *t["psp"]), x.dtype)
    nc = x.shape[0] * x.shape[1]
    pad_into(xp.reshape(nc, *t["psp"]), x.reshape(nc, *x.shape[2:]), t["pb"], t["pe_full"], fill)
    return xp


def window_views(xp: np.ndarray, t: dict) -> Iterator[np.ndarray]:
    """Yield one strided view (N, C, *out) per kernel-window offset."""
    kernel, strides, dil, out_sp = t["kernel"], t["strides"], t["dilations"], t["out"]
    nsp = len(kernel)
    st = xp.strides
    vstrides = (st[0], st[1], *(st[2 + j] * strides[j] for j in range(nsp)))
    shape = (*xp.shape[:2], *out_sp)
    for kpos in itertools.product(*(range(k) for k in kernel)):
        base = xp[(slice(None), slice(None)) + tuple(slice(kpos[j] * dil[j], None)
                                                     for j in range(nsp))]
        yield as_strided(base, shape=shape, strides=vstrides, writeable=False)

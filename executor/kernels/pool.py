"""Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

2-D pools without dilation are separable: one pass per window row (over whole
contiguous rows of the input), then one per window column; taps that fall in the
padding are skipped, so no padded copy is made.  Dilated 2-D pools use the
stride-phase layout of ``_common.phase_plan`` (each tap a contiguous run), other
ranks strided views of a padded copy.  Padding is -inf (max) or 0 (average,
divided by the per-position count afterwards).
"""
from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import (
    align, carve, check_window_attrs, ensure_tiling, lowest, pad_into, pad_into_phases, phase_bytes,
    phase_plan, prod, view, window_attrs, window_geometry, window_out_dims, workspace)
from aircc.executor.kernels.registry import InferContext, op


def _infer_pool(ctx: InferContext) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    if len(xs) < 3:
        ctx.fail(f"input must have rank >= 3, got {xs}")
    nsp = len(xs) - 2
    kernel = ctx.attrs.get("kernel_shape")
    if not kernel:
        ctx.fail("attribute kernel_shape is required")
    strides, dilations, pads, auto_pad = window_attrs(ctx.attrs, nsp, kernel)
    check_window_attrs(ctx, nsp, kernel, strides, dilations, pads)
    ceil_mode = bool(ctx.attrs.get("ceil_mode", 0))
    out_sp = window_out_dims(ctx, xs[2:], kernel, strides, dilations, pads, auto_pad, ceil_mode)
    return [TensorType(xt.dtype, (xs[0], xs[1], *out_sp))]


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
    if nsp == 2:
        # stride-phase layout: every window tap is one contiguous run (see _common)
        plan = phase_plan(xs[2:], out_sp, kernel, strides, dilations, pb)
        base = phase_bytes(plan, xs[0] * xs[1], item)
        t.update(mode="phase", plan=plan, acc_off=base,
                 workspace=base + align(xs[0] * xs[1] * out_sp[0] * plan["wq"] * item))
    else:
        t["workspace"] = prod(xs[:2]) * prod(psp) * item if padded else 0
    return t


def _phase_pool(x: np.ndarray, t: dict, ws, fill, ufunc) -> np.ndarray:
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


def _reduce_rows_flat(dst: np.ndarray, src: np.ndarray, ranges, stride: int, ufunc, fill,
                      scratch=None) -> None:
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
                 ufunc, fill, scratch=None) -> None:
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


#: Input bytes per block of channels of the separable pool.  Its passes are contiguous
#: (a strided column pass goes through every column first), so fewer, longer calls win:
#: a 64 x 112 x 112 stride-2 max pool takes 306 us in blocks of 4 MiB, 462 in 512 KiB
#: (A/B in one process); 28 x 28 and smaller are flat from 512 KiB up.
POOL_BLOCK_BYTES = 4 << 20


def _separable(x: np.ndarray, y: np.ndarray, t: dict, ws: np.ndarray, ufunc, fill) -> None:
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


#: Planes at least this large (elements), unpadded, take the flat mode.
FLAT_MIN_PLANE = 2048
#: Input bytes per block of channels of the flat mode.
FLAT_BLOCK_BYTES = 4 << 20


def _flat(x: np.ndarray, y: np.ndarray, t: dict, ws: np.ndarray, ufunc) -> None:
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
    # a strided column pass combines its taps at every column first (see _reduce_rows_flat)
    scratch = rows if sw > 1 else 0
    t.update(mode="separable", rows_off=0, scratch_off=scratch, block=block,
             workspace=rows + (rows if scratch else 0),
             row_taps=_tap_ranges(ho, xs[2], kh, sh, t["pb"][0]),
             col_taps=_tap_ranges(wo, xs[3], kw, sw, t["pb"][1]))
    return t


def _padded_input(x: np.ndarray, t: dict, ws, fill) -> np.ndarray:
    """``x`` with its pads (filled with ``fill``), in the workspace; ``x`` itself if unpadded."""
    if not t["padded"]:
        return x
    xp = carve(workspace(ws, t["workspace"]), 0, (*x.shape[:2], *t["psp"]), x.dtype)
    nc = x.shape[0] * x.shape[1]
    pad_into(xp.reshape(nc, *t["psp"]), x.reshape(nc, *x.shape[2:]), t["pb"], t["pe_full"], fill)
    return xp


def _window_views(xp: np.ndarray, t: dict):
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


@op("MaxPool", since=1)
class MaxPool:
    """Max over sliding windows (pads, strides, dilations, ceil_mode, auto_pad)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        if ctx.num_outputs > 1:
            ctx.unsupported("the optional Indices output of MaxPool is not supported")
        if int(ctx.attrs.get("storage_order", 0)) not in (0, 1):
            ctx.fail("storage_order must be 0 or 1")
        return _infer_pool(ctx)

    @staticmethod
    def tiling(types, attrs) -> dict:
        # separable: max over the window's rows, then over its columns (kh + kw - 2
        # passes instead of kh * kw - 1, no padded copy)
        return _separable_tiling(types, _pool_tiling(types, attrs))

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        t = ensure_tiling(MaxPool, tiling, ins, attrs)
        if t["mode"] == "separable":
            _separable(x, y, t, workspace(ws, t["workspace"]), np.maximum, lowest(x.dtype))
            return
        if t["mode"] == "flat":
            _flat(x, y, t, workspace(ws, t["workspace"]), np.maximum)
            return
        if t["mode"] == "phase":
            np.copyto(y, _phase_pool(x, t, ws, lowest(x.dtype), np.maximum))
            return
        xp = _padded_input(x, t, ws, lowest(x.dtype))
        for k, v in enumerate(_window_views(xp, t)):
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


@op("AveragePool", since=1)
class AveragePool:
    """Mean over sliding windows; ``count_include_pad`` decides the divisor at the borders."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        if ctx.num_outputs != 1:
            ctx.fail("AveragePool has exactly one output")
        return _infer_pool(ctx)

    @staticmethod
    def tiling(types, attrs) -> dict:
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
            _separable(x, y, t, workspace(ws, t["workspace"]), np.add, 0)
            src = y
        elif t["mode"] == "flat":
            _flat(x, y, t, workspace(ws, t["workspace"]), np.add)
            src = y
        elif t["mode"] == "phase":
            src = _phase_pool(x, t, ws, 0, np.add)
        else:
            xp = _padded_input(x, t, ws, 0)
            for k, v in enumerate(_window_views(xp, t)):
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


def _infer_global(ctx: InferContext) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    if len(xs) < 3:
        ctx.fail(f"input must have rank >= 3, got {xs}")
    return [TensorType(xt.dtype, (xs[0], xs[1]) + (1,) * (len(xs) - 2))]


@op("GlobalAveragePool", since=1)
class GlobalAveragePool:
    infer = staticmethod(_infer_global)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        np.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True, out=outs[0])


@op("GlobalMaxPool", since=1)
class GlobalMaxPool:
    infer = staticmethod(_infer_global)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True, out=outs[0])

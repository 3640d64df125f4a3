"""Conv's im2col modes: ``wide`` (2-D: each tap's contiguous run of the stride phases
copied into a column block, then one GEMM per group) and ``im2col`` (N-D and the rest:
the sliding windows copied, then one GEMM)."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.ops.shapes import prod

from ..epilogue import relu
from ..scratch import carve, view


def wide_weights(w: np.ndarray, b: np.ndarray | None, t: dict) -> np.ndarray:
    """The wide mode's GEMM operand (groups, M/group, K): with one group and a bias,
    the bias is one more column (it meets a row of ones under the columns)."""
    m, g, mg = t["m"], t["g"], t["mg"]
    kk = t["cg"] * len(t["plan"]["taps"])
    if b is not None and g == 1:
        return np.concatenate([w.reshape(1, m, kk), b.reshape(1, m, 1).astype(w.dtype)], axis=2)
    return w.reshape(g, mg, kk)


def wide(planes: np.ndarray, w: np.ndarray, b, yi: np.ndarray, t: dict, ws: np.ndarray,
         with_relu: bool = False, w3: np.ndarray | None = None) -> None:
    """2-D conv of one image: copy each kernel tap's contiguous run into the column block,
    one GEMM per group, then store the valid columns (through the Relu with ``with_relu``).
    With one group the bias rides in the GEMM: a row of ones under the columns and the
    bias as one more weight column, so the store is the only pass after it.  ``w3``:
    :func:`wide_weights`, when the caller made it once."""
    c, m, g, cg, mg = t["c"], t["m"], t["g"], t["cg"], t["mg"]
    (ho, wo), rows = t["out"], t["rows"]
    wq, taps = t["plan"]["wq"], t["plan"]["taps"]
    kk = cg * len(taps)
    ones = b is not None and g == 1
    if w3 is None:
        w3 = wide_weights(w, b, t)
    bias = None if b is None or ones else b.reshape(m, 1, 1)
    if t.get("exact"):
        _wide_exact(planes, w3, ones, bias, yi, t, ws, with_relu)
        return
    for r0 in range(0, ho, rows):
        nr = min(rows, ho - r0)
        run = nr * wq
        cols = carve(ws, t["buf_off"], (c * len(taps) + ones, run), planes.dtype)
        taps_cols = cols[:c * len(taps)].reshape(c, len(taps), run)
        for k, (j, off) in enumerate(taps):
            start = r0 * wq + off
            np.copyto(taps_cols[:, k], planes[j, :, start:start + run])
        if ones:
            cols[-1] = 1
        acc = carve(ws, t["out_off"], (m, run), planes.dtype)
        np.matmul(w3, view(cols, (g, kk + ones, run)), out=view(acc, (g, mg, run)))
        res = view(acc, (m, nr, wq))[:, :, :wo]
        dst = yi[:, r0:r0 + nr]
        if bias is not None:
            np.add(res, bias, out=dst)
            if with_relu:
                relu(dst, dst)
        elif with_relu:
            relu(res, dst)
        else:
            np.copyto(dst, res)


def _wide_exact(planes, w3, ones: bool, bias, yi, t, ws, with_relu: bool) -> None:
    """The wide mode without junk columns: each tap's rows are gathered at the output's
    width, and the GEMM (bias riding in it as a row of ones) writes Y's rows itself."""
    c, g, mg = t["c"], t["g"], t["mg"]
    (ho, wo), rows = t["out"], t["rows"]
    wq, taps = t["plan"]["wq"], t["plan"]["taps"]
    kk = w3.shape[2]
    for r0 in range(0, ho, rows):
        nr = min(rows, ho - r0)
        cols = carve(ws, t["buf_off"], (c * len(taps) + ones, nr * wo), planes.dtype)
        taps_cols = cols[:c * len(taps)].reshape(c, len(taps), nr, wo)
        for k, (j, off) in enumerate(taps):
            start = r0 * wq + off
            np.copyto(taps_cols[:, k], planes[j, :, start:start + nr * wq].reshape(c, nr, wq)[:, :, :wo])
        if ones:
            cols[-1] = 1
        dst = yi[:, r0:r0 + nr]
        np.matmul(w3, view(cols, (g, kk, nr * wo)), out=view(dst, (g, mg, nr * wo)))
        if bias is not None:
            np.add(dst, bias, out=dst)
        if with_relu:
            relu(dst, dst)


def windows(xp: np.ndarray, kernel, strides, dilations, out_sp, start0: int = 0) -> np.ndarray:
    """Strided view (C, *kernel, *out_sp) of the sliding windows of ``xp`` (C, *padded).

    ``start0`` offsets the first spatial axis (first output row of a block).
    """
    nsp = len(kernel)
    st = xp.strides
    base = xp[(slice(None), slice(start0 * strides[0], None))]
    shape = (xp.shape[0], *kernel, *out_sp)
    strd = (st[0], *(st[1 + i] * dilations[i] for i in range(nsp)),
            *(st[1 + i] * strides[i] for i in range(nsp)))
    return as_strided(base, shape=shape, strides=strd, writeable=False)


def im2col(src: np.ndarray, w: np.ndarray, yi: np.ndarray, t: dict, ws: np.ndarray) -> None:
    """One image: copy the windows of a block of output rows into the workspace, then one
    GEMM."""
    c, g, cg, mg = t["c"], t["g"], t["cg"], t["mg"]
    kernel, out_sp, rows, lrow = t["kernel"], t["out"], t["rows"], t["lrow"]
    kk = cg * prod(kernel)
    w3 = w.reshape(g, mg, kk)
    for r0 in range(0, out_sp[0], rows):
        nr = min(rows, out_sp[0] - r0)
        cols = carve(ws, t["buf_off"], (c, *kernel, nr, *out_sp[1:]), src.dtype)
        np.copyto(cols, windows(src, kernel, t["strides"], t["dilations"],
                                [nr, *out_sp[1:]], r0))
        np.matmul(w3, view(cols, (g, kk, nr * lrow)),
                  out=view(yi[:, r0:r0 + nr], (g, mg, nr * lrow)))

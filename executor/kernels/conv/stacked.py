"""Conv's ``stacked`` mode (the "kn2row" formulation): one GEMM with every tap's packed
weights stacked (taps * M rows) over the padded input read once, then one strided sum
of the taps' shifted partial outputs."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..epilogue import epilogue, relu
from ..phases import pad_into_phases
from ..scratch import carve, view, workspace


def stacked_weights(w: np.ndarray, b: np.ndarray | None, t: dict) -> np.ndarray:
    """The stacked mode's GEMM operand (taps * M, C [+ 1]): the packed (kH, kW, M, C)
    weights as rows and, with a bias, one more column holding it on the first tap's
    rows (it meets a row of ones under the input, and is summed in once)."""
    ntaps, m, c = len(t["plan"]["taps"]), t["m"], t["c"]
    rows = w.reshape(ntaps * m, c)
    if b is None:
        return rows
    out = np.zeros((ntaps * m, c + 1), w.dtype)
    out[:, :c] = rows
    out[:m, c] = b
    return out


def conv(ins, outs, attrs: dict, t: dict, ws, wst: np.ndarray | None = None) -> None:
    """2-D, stride 1: one GEMM of every tap's weights over the padded input gives each
    tap's partial output over the whole plane; output column p sums tap (a, b)'s
    partial at p + a*dH*Wq + b*dW, which is one strided view (kH, kW, M, run) and one
    reduction.  Junk columns (the plane's padding width) are dropped in the store.
    ``wst``: :func:`stacked_weights`, when the caller made it once."""
    x, w, y = ins[0], ins[1], outs[0]
    if wst is None:
        wst = stacked_weights(w, ins[2] if len(ins) > 2 else None, t)
    ws = workspace(ws, t["workspace"])
    plan, c, m = t["plan"], t["c"], t["m"]
    (ho, wo), wq, plane, slack = t["out"], plan["wq"], plan["plane"], plan["slack"]
    (kh, kw), (dh, dw) = t["kernel"], t["dilations"]
    run, it, k = ho * wq, x.itemsize, wst.shape[1]
    cols = carve(ws, 0, (k, plane), x.dtype)
    part = carve(ws, t["part_off"], (kh * kw * m * plane + slack,), x.dtype)
    if slack:
        part[-slack:] = 0   # read only by the last junk columns: keep them finite
    partial = part[:kh * kw * m * plane].reshape(kh * kw * m, plane)
    taps = as_strided(part, shape=(kh, kw, m, run),
                      strides=((kw * m * plane + dh * wq) * it, (m * plane + dw) * it,
                               plane * it, it), writeable=False)
    relu_store = bool(attrs.get("fused_relu")) and not attrs.get("fused_add")
    for i in range(t["n"]):
        pad_into_phases(x[i], ws, 0, plan, 0)
        if k > c:
            cols[c] = 1
        np.matmul(wst, cols, out=partial)
        yi = y[i]
        if t["direct"]:
            np.add.reduce(taps, axis=(0, 1), out=view(yi, (m, run)))
            if relu_store:
                relu(yi, yi)
            continue
        acc = carve(ws, t["acc_off"], (m, run), x.dtype)
        np.add.reduce(taps, axis=(0, 1), out=acc)
        res = acc.reshape(m, ho, wq)[:, :, :wo]
        if relu_store:
            relu(res, yi)
        else:
            np.copyto(yi, res)
    if not relu_store:
        epilogue(y, ins[3] if len(ins) > 3 else None, attrs)

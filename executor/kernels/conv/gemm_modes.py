"""Conv's GEMM-first modes: ``pointwise`` (one GEMM per image and group, or one batched
product over the groups) and ``taps`` (one GEMM per kernel tap over the stride phases of
the padded input, each adding into the output).  They write the bias and a fused
residual first and let the GEMMs accumulate onto them."""
from __future__ import annotations

import numpy as np

from aircc.ops.shapes import prod

from ..blas import gemm
from ..epilogue import relu
from ..phases import pad_into_phases
from ..scratch import carve, view, workspace


def conv(ins, outs, attrs: dict, t: dict, ws) -> None:
    """The ``pointwise`` and ``taps`` modes, accumulating onto the bias and fused residual,
    then the fused Relu."""
    x, w, y = ins[0], ins[1], outs[0]
    b = ins[2] if len(ins) > 2 else None
    extra = ins[3] if len(ins) > 3 and attrs.get("fused_add") else None
    if extra is not None and extra.shape != y.shape:
        extra = np.broadcast_to(extra, y.shape)
    with_relu = bool(attrs.get("fused_relu"))
    n, c, m, g, cg, mg = t["n"], t["c"], t["m"], t["g"], t["cg"], t["mg"]
    nsp = len(t["out"])
    bias = None if b is None else b.reshape((m,) + (1,) * nsp)
    if t["mode"] == "pointwise" and g > 1:
        _grouped_pointwise(x, w, y, bias, extra, with_relu, t)
        return
    if t["mode"] == "pointwise":
        l = prod(t["out"])
        wt = w.reshape(1, m, cg)
        taps, run = [(0, 0)], l
    else:
        plan = t["plan"]
        (ho, wo), wq, taps = t["out"], plan["wq"], plan["taps"]
        run = ho * wq
        wt = w.reshape(len(taps), m, cg)
        ws = workspace(ws, t["workspace"])
    for i in range(n):
        yi = y[i]
        if t["mode"] == "pointwise":
            src = [x[i].reshape(c, l)]
            acc, accv = view(yi, (m, l)), yi
        else:
            planes = pad_into_phases(x[i], ws, 0, plan, 0)
            src = [planes[j] for j in range(planes.shape[0])]
            if t["direct"]:
                acc, accv = view(yi, (m, run)), yi
            else:
                acc = carve(ws, t["acc_off"], (m, run), x.dtype)
                accv = acc.reshape(m, ho, wq)[:, :, :wo]
                acc.reshape(m, ho, wq)[:, :, wo:] = 0   # junk columns: keep them finite
        beta = 1.0
        if extra is not None and bias is not None:
            np.add(extra[i], bias, out=accv)
        elif extra is not None:
            np.copyto(accv, extra[i])
        elif bias is not None:
            np.copyto(accv, bias)
        else:
            beta = 0.0
        for gi in range(g):
            rows, chans = slice(gi * mg, (gi + 1) * mg), slice(gi * cg, (gi + 1) * cg)
            for k, (j, off) in enumerate(taps):
                gemm(wt[k, rows], src[j][chans, off:off + run], acc[rows],
                     beta=beta if k == 0 else 1.0)
        if with_relu:
            relu(accv, yi)
        elif accv is not yi:
            np.copyto(yi, accv)


def _grouped_pointwise(x, w, y, bias, extra, with_relu, t) -> None:
    """Grouped 1x1: one batched product over the groups (numpy loops the BLAS calls in
    C), then the bias, residual and Relu in place."""
    n, g, cg, mg = t["n"], t["g"], t["cg"], t["mg"]
    l = prod(t["out"])
    w3 = w.reshape(g, mg, cg)
    for i in range(n):
        yi = y[i]
        np.matmul(w3, x[i].reshape(g, cg, l), out=view(yi, (g, mg, l)))
        if bias is not None:
            np.add(yi, bias, out=yi)
        if extra is not None:
            np.add(yi, extra[i], out=yi)
        if with_relu:
            relu(yi, yi)

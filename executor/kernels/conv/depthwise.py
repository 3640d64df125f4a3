"""Conv's depthwise modes (one output channel per input channel): ``depthwise_wide``
(2-D: each tap's run of the stride phases gathered per block of channels, then one
batched product) and ``depthwise`` (N-D: one multiply-add per tap)."""
from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..scratch import carve, view


def depthwise_wide(planes: np.ndarray, w: np.ndarray, yi: np.ndarray, bias, t: dict,
                   ws: np.ndarray) -> None:
    """2-D depthwise, one image: per block of channels, gather each tap's contiguous run
    into a (channels, taps, run) column block, then one batched (1 x taps) @ (taps x run)
    product per channel."""
    c = t["c"]
    (ho, wo), wq, taps = t["out"], t["plan"]["wq"], t["plan"]["taps"]
    run, ntaps, chunk = ho * wq, len(taps), t["chunk"]
    acc_all = carve(ws, t["acc_off"], (c, 1, run), planes.dtype)
    cols_all = carve(ws, t["cols_off"], (chunk, ntaps, run), planes.dtype)
    w3 = w.reshape(c, 1, ntaps)
    for c0 in range(0, c, chunk):
        c1 = min(c, c0 + chunk)
        cols = cols_all[:c1 - c0]
        for k, (j, off) in enumerate(taps):
            np.copyto(cols[:, k], planes[j, c0:c1, off:off + run])
        np.matmul(w3[c0:c1], cols, out=acc_all[c0:c1])
    res = view(acc_all, (c, ho, wq))[:, :, :wo]
    if bias is None:
        np.copyto(yi, res)
    else:
        np.add(res, bias, out=yi)


def depthwise(src: np.ndarray, w: np.ndarray, yi: np.ndarray, t: dict, ws: np.ndarray) -> None:
    """One image, not 2-D: loop over the kernel window."""
    kernel, strides, dil, out_sp = t["kernel"], t["strides"], t["dilations"], t["out"]
    nsp = len(kernel)
    c = t["c"]
    tmp = carve(ws, t["tmp_off"], (c, *out_sp), yi.dtype)
    wv = w.reshape(c, *kernel)
    st = src.strides
    first = True
    for kpos in itertools.product(*(range(k) for k in kernel)):
        base = src[(slice(None),) + tuple(slice(kpos[j] * dil[j], None) for j in range(nsp))]
        v = as_strided(base, shape=(c, *out_sp),
                       strides=(st[0], *(st[1 + j] * strides[j] for j in range(nsp))),
                       writeable=False)
        wk = wv[(slice(None),) + kpos].reshape((c,) + (1,) * nsp)
        if first:
            np.multiply(v, wk, out=yi)
            first = False
        else:
            np.multiply(v, wk, out=tmp)
            np.add(yi, tmp, out=yi)

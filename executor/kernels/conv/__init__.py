"""Conv: a GEMM per kernel tap (accumulating), im2col + GEMM, pointwise and depthwise paths.

Mode by shape (chosen in the tiling, once per shape: :mod:`.choice`):

- ``pointwise`` 1x1, stride 1, no padding: one GEMM per image and group
  (:mod:`.gemm_modes`).
- ``taps`` 2-D, weights packed by the ``pack-weights`` pass (or a single tap): the
  padded input is split into stride phases so that each tap reads one contiguous
  run, and each tap is one GEMM that adds into the output (no im2col copy;
  :mod:`.gemm_modes`).
- ``stacked`` 2-D, stride 1, packed weights, far fewer output than input channels
  (DenseNet's 128 -> 32): one GEMM with every tap's weights stacked (taps * M rows)
  over the padded input read once, then one strided sum of the taps' shifted partial
  outputs (the "kn2row" formulation: the GEMM reads the input once instead of once per
  tap, and has taps * M rows instead of M; :mod:`.stacked`).
- ``winograd`` 3x3, stride 1, ungrouped, both channel counts >= 64 and an output of
  enough tiles: Winograd F(4x4, 3x3) or F(2x2, 3x3), a quarter or 0.44 of the
  multiply-adds, every transform a small GEMM (:mod:`.winograd`; the weights are
  transformed once, in ``prepare``).
- ``wide`` other 2-D: im2col of the tap runs, then one GEMM per group (:mod:`.wide`).
- ``depthwise_wide`` / ``depthwise``: one multiply-add per tap (:mod:`.depthwise`).
- ``im2col`` N-D and the rest: copy the windows, then one GEMM (:mod:`.wide`).

The GEMM-based modes write the bias (and a fused residual) first and let the
GEMM accumulate onto it, so the epilogue is at most one more pass (Relu).
"""
from __future__ import annotations

import numpy as np

from aircc.executor.device.prepared import prepared_array

from ..epilogue import epilogue
from ..numpy_backend import NUMPY
from ..phases import pad_into, pad_into_phases
from ..scratch import carve, ensure_tiling, workspace
from . import choice, depthwise, gemm_modes, stacked, wide, winograd

NUMPY.layout("Conv")(choice.weight_layout)


@NUMPY.kernel("Conv", since=1)
class Conv:
    """N-D convolution with groups, dilations, strides, pads / auto_pad and optional bias."""

    tiling = staticmethod(choice.tiling)

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        """The wide, stacked and Winograd modes with constant weights (and bias): their
        GEMM operand made once, in device memory (``prepared``) when it is not a view
        of the weights."""
        if not tiling or tiling.get("mode") not in ("wide", "stacked", "winograd") \
                or not constant[1]:
            return None
        w = ins[1]
        if tiling["mode"] == "winograd":
            return winograd.prepare(ins, outs, attrs, tiling, ws, prepared)
        if len(ins) > 2 and ins[2] is not None and not constant[2]:
            return None
        b = ins[2] if len(ins) > 2 else None
        make = stacked.stacked_weights if tiling["mode"] == "stacked" else wide.wide_weights
        operand = make(w, b, tiling)
        if not np.shares_memory(operand, w):   # a new array (the bias as a column): on the device
            key = (tiling["mode"], w.ctypes.data, w.shape, w.dtype.str, b.ctypes.data, operand.shape)
            first = [operand]    # the first fill copies it; a refill makes it again from w, b

            def fill(out):
                np.copyto(out, first.pop() if first else make(w, b, tiling))
            operand = prepared_array(prepared, key, operand.shape, operand.dtype, fill)
        if tiling["mode"] == "stacked":
            return lambda: stacked.conv(ins, outs, attrs, tiling, ws, operand)
        return lambda: _run_with_epilogue(ins, outs, attrs, tiling, ws, operand)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        t = ensure_tiling(Conv, tiling, ins, attrs)
        if t["mode"] in ("pointwise", "taps"):
            gemm_modes.conv(ins, outs, attrs, t, ws)
            return
        if t["mode"] == "stacked":
            stacked.conv(ins, outs, attrs, t, ws)
            return
        if t["mode"] == "winograd":
            winograd.conv(ins, outs, attrs, t, ws)
            return
        _run_with_epilogue(ins, outs, attrs, t, ws)


def _run_with_epilogue(ins, outs, attrs, t, ws, w3=None) -> None:
    """The non-GEMM-first modes, then the fused epilogue; the wide mode stores its
    result through the Relu when nothing is added after it."""
    relu_store = t["mode"] == "wide" and bool(attrs.get("fused_relu")) and not attrs.get("fused_add")
    _run(ins, outs, attrs, t, ws, relu_store, w3)
    if not relu_store:
        epilogue(outs[0], ins[3] if len(ins) > 3 else None, attrs)


def _run(ins, outs, attrs, t, ws, relu_store: bool = False, w3=None) -> None:
    """The wide, depthwise and im2col modes, image by image, then the bias where the
    mode did not add it."""
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    y = outs[0]
    ws = workspace(ws, t["workspace"])
    n, c, m = t["n"], t["c"], t["m"]
    mode, out_sp = t["mode"], t["out"]
    nsp = len(out_sp)
    bias = None if b is None else b.reshape((m,) + (1,) * nsp)
    if mode in ("wide", "depthwise_wide"):
        for i in range(n):
            planes = pad_into_phases(x[i], ws, 0, t["plan"], 0)
            if mode == "wide":
                wide.wide(planes, w, b, y[i], t, ws, relu_store, w3)
            else:
                depthwise.depthwise_wide(planes, w, y[i], bias, t, ws)
        return
    xp = carve(ws, 0, (c, *t["psp"]), x.dtype) if t["padded"] else None
    for i in range(n):
        src = x[i]
        if xp is not None:
            pad_into(xp, src, t["pb"], t["pe"])
            src = xp
        if mode == "depthwise":
            depthwise.depthwise(src, w, y[i], t, ws)
        else:
            wide.im2col(src, w, y[i], t, ws)
    if bias is not None:
        np.add(y, bias, out=y)

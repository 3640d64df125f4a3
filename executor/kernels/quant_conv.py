"""QLinearConv and ConvInteger: im2col of the zero-point-shifted input, one exact GEMM per
image and group (:func:`.quant_arith.exact_matmul`); depthwise convolutions (one input
channel per group) as one multiply-add per kernel tap instead.

The shifted input is padded with 0 (the zero point itself), so padding is exact.  A
constant w is shifted and laid out as the GEMM's left operand once, in ``prepare``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from aircc.executor.device.prepared import prepared_array
from aircc.ops.defs.conv import window_params
from aircc.ops.shapes import prod, window_geometry

from .numpy_backend import NUMPY
from .quant_arith import F32_EXACT, exact_matmul, magnitude, requantize_reference, shifted

#: The weights as the GEMM's left operand (groups, M / group, C / group * taps), float32,
#: and the largest magnitude of their values.
Weights = tuple[np.ndarray, float]


def geometry(x_shape: tuple, w_shape: tuple, attrs: dict) -> dict:
    """The window geometry of a convolution (ints and lists only)."""
    nsp, kernel, strides, dilations, pads, auto_pad = window_params(x_shape, w_shape, attrs)
    kernel = [int(k) for k in kernel]
    out, pb, pe = window_geometry([int(d) for d in x_shape[2:]], kernel, strides, dilations,
                                  pads, auto_pad)
    return dict(kernel=kernel, strides=[int(s) for s in strides], out=out, pb=pb, pe=pe,
                dilations=[int(d) for d in dilations], group=int(attrs.get("group", 1)))


def weights_operand(w: np.ndarray, zp, group: int, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``w - zp`` (per tensor or output channel) as (group, M / group, C / group * taps)."""
    m = w.shape[0]
    z = None if zp is None else np.asarray(zp).reshape((-1,) + (1,) * (w.ndim - 1))
    flat = shifted(w, z).reshape(group, m // group, -1)
    if out is not None:
        np.copyto(out, flat)
        return out
    return flat


def bound_weights(w: np.ndarray, zp, group: int, constant: bool, prepared) -> Weights:
    """The weights operand (made once into prepared device memory when constant)."""
    z = None if zp is None else np.asarray(zp).reshape((-1,) + (1,) * (w.ndim - 1))
    shape = (group, w.shape[0] // group, prod(w.shape[1:]))
    if constant:
        zbytes = None if z is None else (z.dtype.str, z.tobytes())
        key = ("quantized-conv-w", w.ctypes.data, w.shape, w.dtype.str, zbytes, group)
        arr = prepared_array(prepared, key, shape, np.float32,
                             lambda out: weights_operand(w, zp, group, out))
    else:
        arr = weights_operand(w, zp, group)
    return arr, magnitude(w, z)


def windows(xp: np.ndarray, g: dict) -> np.ndarray:
    """A view (C, *kernel, *out) of the padded image ``xp`` (C, *padded): every tap's
    strided run of input positions."""
    nsp = len(g["kernel"])
    span = [(k - 1) * d + 1 for k, d in zip(g["kernel"], g["dilations"])]
    win = sliding_window_view(xp, span, axis=tuple(range(1, 1 + nsp)))
    picks = tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(g["out"], g["strides"])) \
        + tuple(slice(None, None, d) for d in g["dilations"])
    win = win[(slice(None),) + picks]
    return win.transpose((0,) + tuple(range(1 + nsp, 1 + 2 * nsp)) + tuple(range(1, 1 + nsp)))


def padded(x: np.ndarray, zp, g: dict) -> np.ndarray:
    """``x - zp`` (N, C, *sp) as float32, padded with zeros."""
    xs = shifted(x, zp)
    if not any(g["pb"]) and not any(g["pe"]):
        return xs
    pad = [(0, 0), (0, 0)] + list(zip(g["pb"], g["pe"]))
    return np.pad(xs, pad)


def conv_accumulate(x: np.ndarray, x_zp, weights: Weights, g: dict, n: int) -> np.ndarray:
    """The exact sums of image ``n`` as (M, P), float32 or float64."""
    w2, bound_w = weights
    groups, mg, k = w2.shape
    xp = padded(x[n:n + 1], x_zp, g)[0]
    bound_x = magnitude(x[n], x_zp)
    win = windows(xp, g)                              # (C, *kernel, *out)
    p = prod(g["out"])
    if k == prod(g["kernel"]) and mg == 1:            # depthwise: one multiply-add per tap
        exact = k * bound_x * bound_w <= F32_EXACT
        acc = np.zeros((groups, p), np.float32 if exact else np.float64)
        taps = w2.reshape(groups, k)
        for t, tap in enumerate(np.ndindex(*g["kernel"])):
            acc += win[(slice(None),) + tap].reshape(groups, p) * taps[:, t:t + 1]
        return acc
    cols = win.reshape(groups, k, p)                  # the im2col copy
    return exact_matmul(w2, cols, bound_w, bound_x).reshape(groups * mg, p)


def _pad(ins: list, n: int) -> list:
    return list(ins) + [None] * (n - len(ins))


def qlinear_conv(ins: list, outs: list, attrs: dict, weights: Optional[Weights] = None,
                 g: Optional[dict] = None) -> None:
    """QLinearConv into ``outs[0]``, image by image (``weights``: laid out ahead, when bound)."""
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias = _pad(ins, 9)
    g = g or geometry(x.shape, w.shape, attrs)
    weights = weights or bound_weights(w, w_zp, g["group"], False, None)
    m = w.shape[0]
    multiplier = (x_scale * w_scale / y_scale).reshape(-1, 1)      # float32, per channel
    y = outs[0]
    for n in range(x.shape[0]):
        acc = conv_accumulate(x, x_zp, weights, g, n)
        requantize_reference(acc, multiplier, y_zp, y[n].reshape(m, -1),
                             None if bias is None else bias.reshape(m, 1))


def conv_integer(ins: list, outs: list, attrs: dict, weights: Optional[Weights] = None,
                 g: Optional[dict] = None) -> None:
    """ConvInteger into ``outs[0]``, image by image."""
    x, w, x_zp, w_zp = _pad(ins, 4)
    g = g or geometry(x.shape, w.shape, attrs)
    weights = weights or bound_weights(w, w_zp, g["group"], False, None)
    y = outs[0]
    for n in range(x.shape[0]):
        acc = conv_accumulate(x, x_zp, weights, g, n)
        np.copyto(y[n].reshape(w.shape[0], -1), acc, casting="unsafe")


def bound_conv(run, x_at: int, w_at: int, zp_at: int, n_in: int) -> staticmethod:
    """A ``prepare`` laying a constant w out once, then running ``run``."""

    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        ins = _pad(ins, n_in)
        constant = list(constant) + [False] * (n_in - len(constant))
        if not constant[w_at] or (ins[zp_at] is not None and not constant[zp_at]):
            return None
        g = geometry(ins[x_at].shape, ins[w_at].shape, attrs)
        weights = bound_weights(ins[w_at], ins[zp_at], g["group"], True, prepared)
        return lambda: run(ins, outs, attrs, weights, g)

    return staticmethod(prepare)


@NUMPY.kernel("QLinearConv", 10)
class QLinearConv:
    """y = saturate(round((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp)."""

    prepare = bound_conv(qlinear_conv, 0, 3, 5, 9)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        qlinear_conv(ins, outs, attrs)


@NUMPY.kernel("ConvInteger", 10)
class ConvInteger:
    """int32 conv(x - x_zero_point, w - w_zero_point)."""

    prepare = bound_conv(conv_integer, 0, 1, 3, 4)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        conv_integer(ins, outs, attrs)

"""onnxruntime's QLinearAveragePool and QLinearGlobalAveragePool, and QLinearSoftmax.

The global pool sums the integers exactly and requantizes ``sum - N * x_zp`` by
``x_scale / (y_scale * N)`` in float32 (MLAS's kernel; so does an average pool whose
window is the whole image, unpadded).  The windowed pool dequantizes to float32, adds
each window's taps in onnxruntime's order (rows, then columns; a tap in the padding adds
0.0, which leaves a float sum unchanged), divides by the window's count and quantizes.
"""
from __future__ import annotations

import math

import numpy as np

from aircc.ops.defs.quant_linear import INTEGER_RANGES, MS_DOMAIN
from aircc.ops.shapes import prod, window_attrs, window_geometry

from .numpy_backend import NUMPY
from .quant_arith import requantize_float32, scalar

f32 = np.float32


def channels_first(x: np.ndarray, attrs: dict) -> np.ndarray:
    """A channels-last array (``channels_last`` 1) seen channels first (a view)."""
    if int(attrs.get("channels_last", 0)):
        return np.moveaxis(x, -1, 1)
    return x


def global_average(x: np.ndarray, sx, zx, sy, zy, y: np.ndarray) -> None:
    """MLAS's global average pool of ``x`` (N, C, *sp) into ``y`` (N, C, 1, ...)."""
    n = prod(x.shape[2:])
    acc = x.reshape(*x.shape[:2], -1).sum(axis=-1, dtype=np.int64) - int(scalar(zx)) * n
    scale = f32(scalar(sx)) / (f32(scalar(sy)) * f32(n))
    requantize_float32(acc, scale, scalar(zy), y)


@NUMPY.kernel("QLinearGlobalAveragePool", 1, MS_DOMAIN)
class QLinearGlobalAveragePool:
    """quantize(mean of dequantize(X) over every spatial position), per channel."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, sx, zx, sy, zy = ins
        global_average(channels_first(x, attrs), sx, zx, sy, zy, channels_first(outs[0], attrs))


def _counts(size: int, n_out: int, k: int, stride: int, pad: int) -> np.ndarray:
    """Per output position along one axis, how many taps fall inside the input."""
    start = np.arange(n_out) * stride - pad
    return np.minimum(start + k, size) - np.maximum(start, 0)


def average_pool(x: np.ndarray, sx, zx, sy, zy, y: np.ndarray, attrs: dict) -> None:
    """onnxruntime's QLinearAveragePool of ``x`` (N, C, *sp) into ``y`` (channels first)."""
    nsp = x.ndim - 2
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides, _, pads, auto_pad = window_attrs(attrs, nsp, kernel)
    out, pb, pe = window_geometry(list(x.shape[2:]), kernel, strides, [1] * nsp, pads,
                                  auto_pad, bool(attrs.get("ceil_mode", 0)))
    if list(x.shape[2:]) == kernel and not any(pb) and not any(pe):
        global_average(x, sx, zx, sy, zy, y)
        return
    deq = np.subtract(x, int(scalar(zx)), dtype=f32)
    deq *= f32(scalar(sx))
    full = [(o - 1) * s + k for o, s, k in zip(out, strides, kernel)]
    tail = [max(f - d - b, 0) for f, d, b in zip(full, x.shape[2:], pb)]
    deq = np.pad(deq, [(0, 0), (0, 0)] + list(zip(pb, tail)))
    acc = np.zeros((*x.shape[:2], *out), f32)
    for tap in np.ndindex(*kernel):
        acc += deq[(slice(None), slice(None)) + tuple(
            slice(t, t + (o - 1) * s + 1, s) for t, o, s in zip(tap, out, strides))]
    if int(attrs.get("count_include_pad", 0)):
        acc /= f32(prod(kernel))
    else:
        count = np.ones((), np.int64)
        for i in range(nsp):
            c = _counts(x.shape[2 + i], out[i], kernel[i], strides[i], pb[i])
            count = np.multiply.outer(count, c)
        acc /= count.astype(f32)
    acc /= f32(scalar(sy))
    acc += f32(int(scalar(zy)))
    lo, hi = INTEGER_RANGES[y.dtype.name]
    np.rint(acc, out=acc)
    np.clip(acc, lo, hi, out=acc)
    np.copyto(y, acc, casting="unsafe")


@NUMPY.kernel("QLinearAveragePool", 1, MS_DOMAIN)
class QLinearAveragePool:
    """quantize(AveragePool(dequantize(X))), as onnxruntime computes it."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, sx, zx, sy, zy = list(ins) + [None] * (5 - len(ins))
        average_pool(channels_first(x, attrs), sx, zx, sy, zy,
                     channels_first(outs[0], attrs), attrs)


# ------------------------------------------------------------------ softmax
def exp_table(x_scale: float, reduce_len: int, signed: bool) -> np.ndarray:
    """onnxruntime's 256 ``exp`` values: entry of byte i is exp((v - 255 + shift) *
    x_scale) for the i-th value v counted from the largest, shift keeping the sum of
    ``reduce_len`` of them within float32."""
    shift = math.log(float(f32(np.finfo(f32).max) / f32(reduce_len)))
    shift = max(0.0, shift - 5) / float(f32(x_scale))
    v = np.arange(256, dtype=np.float64)
    values = np.exp((v - 255 + shift) * float(f32(x_scale))).astype(f32)
    table = np.empty(256, f32)
    index = ((v.astype(np.int64) - 128) % 256) if signed else v.astype(np.int64)
    table[index] = values
    return table


def softmax_rows(x: np.ndarray, table: np.ndarray, y_scale, y_zp, y: np.ndarray) -> None:
    """QLinearSoftmax of the rows of ``x`` (R, D) into ``y`` (R, D): each value's table entry
    times ``floor(1 / y_scale)`` over the row's sum (in order), rounded, saturated."""
    signed = x.dtype == np.int8
    top = x.max(axis=1, keepdims=True).astype(np.int64)
    if signed:
        index = ((127 - top) + x.astype(np.int64)) % 256
    else:
        index = 255 - top + x.astype(np.int64)
    values = table[index]
    total = np.add.accumulate(values, axis=1)[:, -1:]         # in order, as onnxruntime
    scale = f32(math.floor(f32(1.0) / f32(scalar(y_scale))))
    q = np.rint((values * scale) / total) + f32(int(scalar(y_zp)))
    lo, hi = INTEGER_RANGES[y.dtype.name]
    np.copyto(y, np.clip(q, lo, hi), casting="unsafe")


@NUMPY.kernel("QLinearSoftmax", 1, MS_DOMAIN)
class QLinearSoftmax:
    """Y = quantize(softmax(dequantize(X))) along ``axis``, onnxruntime's table method."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, sx, _, sy, zy = list(ins) + [None] * (5 - len(ins))
        y = outs[0]
        opset = int(attrs["opset"])
        axis = int(attrs.get("axis", 1 if opset < 13 else -1)) % x.ndim
        if opset < 13:
            d = prod(x.shape[axis:])
            rows, out = x.reshape(-1, d), y.reshape(-1, d)
        else:
            d = x.shape[axis]
            rows = np.moveaxis(x, axis, -1).reshape(-1, d)
            out = np.empty(rows.shape, y.dtype)
        softmax_rows(rows, exp_table(scalar(sx), d, x.dtype == np.int8), sy, zy, out)
        if opset >= 13:
            np.copyto(y, np.moveaxis(out.reshape(np.moveaxis(x, axis, -1).shape), -1, axis))

"""onnxruntime's quantized elementwise ops: QLinearAdd, QLinearMul, QLinearSigmoid,
QLinearLeakyRelu, QLinearConcat, QLinearWhere.

Each computes what onnxruntime's CPU kernel computes, in the same float32 steps, so the
integers agree exactly: QLinearAdd as MLAS's AVX2 kernel (two fused multiply-adds on the
raw values, B's term first unless A is the one value per span of onnxruntime's broadcast
loop; emulated in float64, which holds every product exactly, with one rounding to
float32 each), QLinearMul as its SSE2 one (the exact integer product times
``a_scale * b_scale / c_scale``), the others through a 256-entry table of requantized
values (:func:`requant_table`) indexed by the input's bytes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aircc.ops.defs.quant_linear import INTEGER_RANGES, MS_DOMAIN

from .numpy_backend import NUMPY
from .quant_arith import quantize_float32, scalar

f32 = np.float32


def _fma(x: np.ndarray, y, z) -> np.ndarray:
    """float32 ``x * y + z`` rounded once (x: small integers, y and z float32): the
    float64 sum is exact, its cast to float32 the fused multiply-add's one rounding."""
    return (x * np.float64(y) + np.asarray(z, np.float64)).astype(f32)


def span_kind(a_shape: tuple, b_shape: tuple) -> str:
    """Which of onnxruntime's broadcast loops runs: ``scalar_a`` / ``scalar_b`` (that input
    is one value per innermost span of the output) or ``vectors``."""
    if int(np.prod(a_shape)) == 1:
        return "scalar_a"
    if int(np.prod(b_shape)) == 1:
        return "scalar_b"
    rank = max(len(a_shape), len(b_shape))
    a = (1,) * (rank - len(a_shape)) + tuple(a_shape)
    b = (1,) * (rank - len(b_shape)) + tuple(b_shape)
    for da, db in zip(reversed(a), reversed(b)):
        if max(da, db) == 1:
            continue
        return "scalar_a" if da == 1 else "scalar_b" if db == 1 else "vectors"
    return "vectors"


def _saturate(r: np.ndarray, out: np.ndarray) -> None:
    lo, hi = INTEGER_RANGES[out.dtype.name]
    np.rint(r, out=r)
    np.clip(r, lo, hi, out=r)
    np.copyto(out, r, casting="unsafe")


@NUMPY.kernel("QLinearAdd", 1, MS_DOMAIN)
class QLinearAdd:
    """C = quantize(dequantize(A) + dequantize(B)), broadcast."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        a, sa, za, b, sb, zb, sc, zc = list(ins) + [None] * (8 - len(ins))
        r_ac, r_bc = f32(scalar(sa)) / f32(scalar(sc)), f32(scalar(sb)) / f32(scalar(sc))
        za, zb, zc = int(scalar(za)), int(scalar(zb)), int(scalar(zc))
        fixed = f32(zc) - f32(f32(r_ac * f32(za)) + f32(r_bc * f32(zb)))
        av, bv = a.astype(np.float64), b.astype(np.float64)
        if span_kind(a.shape, b.shape) == "scalar_a":     # the scalar's term goes in first
            r = _fma(bv, r_bc, _fma(av, r_ac, fixed))
        else:
            r = _fma(av, r_ac, _fma(bv, r_bc, fixed))
        _saturate(np.broadcast_to(r, outs[0].shape).copy(), outs[0])


@NUMPY.kernel("QLinearMul", 1, MS_DOMAIN)
class QLinearMul:
    """C = quantize(dequantize(A) * dequantize(B)), broadcast."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        a, sa, za, b, sb, zb, sc, zc = list(ins) + [None] * (8 - len(ins))
        ratio = f32(f32(scalar(sa)) * f32(scalar(sb))) / f32(scalar(sc))
        product = (a.astype(np.int32) - int(scalar(za))) * (b.astype(np.int32) - int(scalar(zb)))
        r = np.multiply(product, ratio, dtype=f32)
        r += f32(int(scalar(zc)))
        _saturate(np.broadcast_to(r, outs[0].shape).copy(), outs[0])


def requant_table(fn: Callable[[np.ndarray], np.ndarray], x_scale, x_zp, y_scale, y_zp,
                  dtype) -> np.ndarray:
    """``quantize(fn(dequantize(v)))`` for each of the 256 values v of ``dtype``, indexed by
    v's byte, in float32 as onnxruntime builds its lookup tables."""
    codes = np.arange(256, dtype=np.uint8).view(dtype)
    shifted = (codes.astype(np.int32) - int(scalar(x_zp))).astype(f32)
    values = np.asarray(fn(f32(scalar(x_scale)) * shifted), f32)
    table = np.empty(256, dtype)
    quantize_float32(values, scalar(y_scale), scalar(y_zp), table)
    return table


def lookup(table: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """``out = table[byte of x]``."""
    np.take(table, x.view(np.uint8), out=out)


def sigmoid(v: np.ndarray) -> np.ndarray:
    """float32 logistic function (computed in float64, rounded once)."""
    return (1.0 / (1.0 + np.exp(-v.astype(np.float64)))).astype(f32)


def _unary(fn_of_attrs: Callable[[dict], Callable]) -> staticmethod:
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, sx, zx, sy, zy = list(ins) + [None] * (5 - len(ins))
        lookup(requant_table(fn_of_attrs(attrs), sx, zx, sy, zy, x.dtype), x, outs[0])

    return staticmethod(kernel)


@NUMPY.kernel("QLinearSigmoid", 1, MS_DOMAIN)
class QLinearSigmoid:
    """Y = quantize(sigmoid(dequantize(X))), through a table."""

    kernel = _unary(lambda attrs: sigmoid)


@NUMPY.kernel("QLinearLeakyRelu", 1, MS_DOMAIN)
class QLinearLeakyRelu:
    """Y = quantize(leaky_relu(dequantize(X), alpha)), through a table."""

    kernel = _unary(lambda attrs: lambda v, a=f32(attrs.get("alpha", 0.01)):
                    np.where(v >= 0, v, a * v))


def requantized(x: np.ndarray, sx, zx, sy, zy) -> np.ndarray:
    """x requantized from (sx, zx) to (sy, zy): x itself when they are the same."""
    if f32(scalar(sx)) == f32(scalar(sy)) and int(scalar(zx)) == int(scalar(zy)):
        return x
    out = np.empty(x.shape, x.dtype)
    lookup(requant_table(lambda v: v, sx, zx, sy, zy, x.dtype), x, out)
    return out


@NUMPY.kernel("QLinearConcat", 1, MS_DOMAIN)
class QLinearConcat:
    """Y = concat of the inputs requantized to Y_scale / Y_zero_point, along ``axis``."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        axis = int(attrs["axis"]) % y.ndim
        start = 0
        for i in range(2, len(ins), 3):
            x = ins[i]
            stop = start + x.shape[axis]
            region = (slice(None),) * axis + (slice(start, stop),)
            np.copyto(y[region], requantized(x, ins[i + 1], ins[i + 2], ins[0], ins[1]))
            start = stop


@NUMPY.kernel("QLinearWhere", 1, MS_DOMAIN)
class QLinearWhere:
    """Z = where(condition, X, Y), X and Y requantized to z_scale / z_zero_point."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        cond, x, sx, zx, y, sy, zy, sz, zz = ins
        np.copyto(outs[0], np.where(cond, requantized(x, sx, zx, sz, zz),
                                    requantized(y, sy, zy, sz, zz)))

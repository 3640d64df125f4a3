"""Quantized matrix products: QLinearMatMul, MatMulInteger, QGemm, DynamicQuantizeMatMul,
MatMulIntegerToFloat.

Every product is :func:`.quant_arith.exact_matmul` of the zero-point-shifted operands.
A constant B (with its zero point) is shifted once, in ``prepare``, into device memory
(``prepared``), so a bound task multiplies without converting the weights.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from aircc.executor.device.prepared import prepared_array
from aircc.ops.defs.quant_linear import MS_DOMAIN

from .numpy_backend import NUMPY
from .quant_arith import (int_matmul, magnitude, quantize_float32, requantize_float32,
                          requantize_reference, scalar, shifted)
from .quant_linear import dynamic_params

#: A shifted float32 B and the largest magnitude of its values.
Operand = tuple[np.ndarray, float]


def _pad(ins: list, n: int) -> list:
    return list(ins) + [None] * (n - len(ins))


def as_matrix(b: np.ndarray) -> np.ndarray:
    """A 1-D B as a one-column matrix (numpy.matmul's rule; the result is reshaped back)."""
    return b.reshape(-1, 1) if b.ndim == 1 else b


def column_view(p) -> Optional[np.ndarray]:
    """A per-column parameter of B (``[N]``, ``[..., 1, N]``) broadcastable to B; per
    tensor as a scalar; None stays None."""
    if p is None:
        return None
    p = np.asarray(p)
    return p.reshape(()) if p.size == 1 else p


def b_operand(b: np.ndarray, zp, constant: bool = False, prepared=None,
              transpose: bool = False) -> Operand:
    """``B - zp`` (per tensor or column) as float32, with its magnitude; a constant one
    is made once into prepared device memory."""
    b = as_matrix(b).T if transpose else as_matrix(b)
    z = column_view(zp)
    if not constant:
        return shifted(b, z), magnitude(b, z)
    zbytes = None if z is None else (z.dtype.str, z.shape, z.tobytes())
    key = ("quantized-b", b.ctypes.data, b.shape, b.strides, b.dtype.str, zbytes)
    arr = prepared_array(prepared, key, b.shape, np.float32,
                         lambda out: np.subtract(b, 0 if z is None else z, out=out,
                                                 dtype=np.float32))
    return arr, magnitude(b, z)


def bound_b(kernel: Callable, b_at: int, zp_at: int, transpose_attr: str = "") -> staticmethod:
    """A ``prepare`` that shifts a constant B (input ``b_at``, its zero point ``zp_at``)
    once, then runs ``kernel(ins, outs, attrs, operand)``."""

    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        ins = _pad(ins, max(b_at, zp_at) + 1)
        constant = list(constant) + [False] * (len(ins) - len(constant))
        if not constant[b_at] or (ins[zp_at] is not None and not constant[zp_at]):
            return None
        operand = b_operand(ins[b_at], ins[zp_at], True, prepared,
                            bool(attrs.get(transpose_attr, 0)) if transpose_attr else False)
        return lambda: kernel(ins, outs, attrs, operand)

    return staticmethod(prepare)


# ---------------------------------------------------------------- default domain
def qlinear_matmul(ins, outs, attrs, operand: Optional[Operand] = None) -> None:
    """QLinearMatMul into ``outs[0]`` (``operand``: B shifted ahead, when bound)."""
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = _pad(ins, 8)
    b_f32, bound = operand or b_operand(b, b_zp)
    acc = int_matmul(a.reshape(1, -1) if a.ndim == 1 else a, a_zp, b_f32, bound)
    multiplier = a_scale * column_view(b_scale) / y_scale      # in the scales' type
    requantize_reference(acc, multiplier, y_zp, outs[0])


@NUMPY.kernel("QLinearMatMul", 10)
@NUMPY.kernel("QLinearMatMul", 21)
class QLinearMatMul:
    """y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)."""

    prepare = bound_b(qlinear_matmul, 3, 5)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        qlinear_matmul(ins, outs, attrs)


def matmul_integer(ins, outs, attrs, operand: Optional[Operand] = None) -> None:
    """MatMulInteger into ``outs[0]``."""
    a, b, a_zp, b_zp = _pad(ins, 4)
    b_f32, bound = operand or b_operand(b, b_zp)
    acc = int_matmul(a.reshape(1, -1) if a.ndim == 1 else a, a_zp, b_f32, bound)
    np.copyto(outs[0], acc.reshape(outs[0].shape), casting="unsafe")


@NUMPY.kernel("MatMulInteger", 10)
class MatMulInteger:
    """int32 (A - a_zero_point) @ (B - b_zero_point)."""

    prepare = bound_b(matmul_integer, 1, 3)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        matmul_integer(ins, outs, attrs)


# ---------------------------------------------------------------- com.microsoft
def qgemm(ins, outs, attrs, operand: Optional[Operand] = None) -> None:
    """QGemm into ``outs[0]``: requantized as MLAS does, or float32 without y_zero_point."""
    a, a_scale, a_zp, b, b_scale, b_zp, c, y_scale, y_zp = _pad(ins, 9)
    b_f32, bound = operand or b_operand(b, b_zp, transpose=bool(attrs.get("transB", 0)))
    a = a.T if attrs.get("transA", 0) else a
    acc = int_matmul(a, scalar(a_zp), b_f32, bound)
    if c is not None:
        acc = acc.astype(np.float64) + c             # int32 bias: exact in float64
    scales = np.float32(attrs.get("alpha", 1.0)) * np.float32(scalar(a_scale)) \
        * np.asarray(b_scale, np.float32).reshape(-1)
    if y_scale is not None:
        scales = scales / np.float32(scalar(y_scale))
    scales = scales.reshape(()) if scales.size == 1 else scales
    if y_zp is not None:
        requantize_float32(acc, scales, scalar(y_zp), outs[0])
    else:
        np.multiply(acc.astype(np.float32), scales, out=outs[0])


@NUMPY.kernel("QGemm", 1, MS_DOMAIN)
class QGemm:
    """Y = alpha * (A' - a_zp) @ (B' - b_zp) * a_scale * b_scale + C, requantized or float."""

    prepare = bound_b(qgemm, 3, 5, "transB")

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        qgemm(ins, outs, attrs)


def scaled_product(acc: np.ndarray, a_scale, b_scale, bias, out: np.ndarray) -> None:
    """``out = float32(acc) * (a_scale * b_scale) + bias``, b_scale per tensor or column."""
    multiplier = np.float32(a_scale) * column_view(np.asarray(b_scale, np.float32))
    y = np.multiply(acc.astype(np.float32), multiplier)
    if bias is not None:
        y += bias
    np.copyto(out, y.reshape(out.shape), casting="unsafe")


def dynamic_quantize_matmul(ins, outs, attrs, operand: Optional[Operand] = None) -> None:
    """DynamicQuantizeMatMul into ``outs[0]``: A quantized as onnxruntime does, then the
    scaled integer product."""
    a, b, b_scale, b_zp, bias = _pad(ins, 5)
    b_f32, bound = operand or b_operand(b, b_zp)
    a_scale, a_zp = dynamic_params(a)
    a_q = np.empty(a.shape, np.uint8)
    quantize_float32(a, a_scale, a_zp, a_q)
    acc = int_matmul(a_q.reshape(1, -1) if a.ndim == 1 else a_q, a_zp, b_f32, bound)
    scaled_product(acc, a_scale, b_scale, bias, outs[0])


@NUMPY.kernel("DynamicQuantizeMatMul", 1, MS_DOMAIN)
class DynamicQuantizeMatMul:
    """float32 A quantized to uint8 over its whole range, times the quantized B, scaled, + bias."""

    prepare = bound_b(dynamic_quantize_matmul, 1, 3)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        dynamic_quantize_matmul(ins, outs, attrs)


def matmul_integer_to_float(ins, outs, attrs, operand: Optional[Operand] = None) -> None:
    """MatMulIntegerToFloat into ``outs[0]``."""
    a, b, a_scale, b_scale, a_zp, b_zp, bias = _pad(ins, 7)
    b_f32, bound = operand or b_operand(b, b_zp)
    acc = int_matmul(a.reshape(1, -1) if a.ndim == 1 else a, scalar(a_zp, None), b_f32, bound)
    scaled_product(acc, scalar(a_scale), b_scale, bias, outs[0])


@NUMPY.kernel("MatMulIntegerToFloat", 1, MS_DOMAIN)
class MatMulIntegerToFloat:
    """(A - a_zp) @ (B - b_zp) * a_scale * b_scale + bias."""

    prepare = bound_b(matmul_integer_to_float, 1, 5)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        matmul_integer_to_float(ins, outs, attrs)

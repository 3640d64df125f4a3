"""Integer arithmetic of the quantized kernels: exact products and requantization.

numpy's matmul on int32 runs no BLAS (a 64 x 512 x 512 product takes 24 ms); on float32
it does (0.2 ms).  The zero-point-shifted 8-bit operands are small integers, so a float32
product is exact as long as every partial sum stays within 2**24: :func:`exact_matmul`
measures the operands' largest magnitudes, multiplies in float32 when ``K * |a| * |b|``
fits, and otherwise in chunks of K that do, summed in float64 (exact to 2**53).  Which
summation order BLAS picks does not matter: every partial sum is an exact integer.

Requantization follows whichever engine defines the op: :func:`requantize_reference` is
onnx's reference (the int32 sum times the float multiplier in float64),
:func:`requantize_float32` is onnxruntime's MLAS (both in float32); both round half to
even and saturate.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from aircc.ops.defs.quant_linear import INTEGER_RANGES

#: Integers up to this magnitude are exact in float32.
F32_EXACT = float(1 << 24)


def magnitude(x: np.ndarray, zp=None) -> float:
    """The largest ``|x - zp|`` (an upper bound when ``zp`` varies per column)."""
    if x.size == 0:
        return 0.0
    hi, lo = float(x.max()), float(x.min())
    if zp is None:
        return max(abs(hi), abs(lo))
    z = np.asarray(zp)
    return max(hi - float(z.min()), float(z.max()) - lo, 0.0)


def shifted(x: np.ndarray, zp=None) -> np.ndarray:
    """``x - zp`` as a new float32 array (exact for 8- and 16-bit integers)."""
    out = np.empty(x.shape, np.float32)
    if zp is None:
        np.copyto(out, x, casting="unsafe")
    else:
        np.subtract(x, np.asarray(zp), out=out, dtype=np.float32)
    return out


def k_chunk(k: int, bound_a: float, bound_b: float) -> int:
    """How many terms of K a float32 product sums exactly (``k`` when all of them)."""
    per_term = bound_a * bound_b
    if per_term == 0:
        return k
    return int(min(k, F32_EXACT // per_term))


def exact_matmul(a: np.ndarray, b: np.ndarray, bound_a: float, bound_b: float) -> np.ndarray:
    """``a @ b`` for float32 operands holding integers of magnitude at most ``bound_a`` /
    ``bound_b``: exact, as float32 (when one float32 product is exact) or float64."""
    k = a.shape[-1]
    step = k_chunk(k, bound_a, bound_b)
    if step >= k:
        return np.matmul(a, b)
    if step == 0:                  # a single product past 2**24 (not 8-bit operands)
        return np.matmul(a.astype(np.float64), b.astype(np.float64))
    acc: Optional[np.ndarray] = None
    for k0 in range(0, k, step):
        part = np.matmul(a[..., k0:k0 + step], b[..., k0:k0 + step, :])
        if acc is None:
            acc = part.astype(np.float64)
        else:
            acc += part
    return acc


def int_matmul(a: np.ndarray, a_zp, b_f32: np.ndarray, bound_b: float) -> np.ndarray:
    """The exact ``(a - a_zp) @ b_f32`` of an integer ``a`` and a shifted float32 ``b``,
    (M, K) rows flattened over a's leading dims when b is 2-D."""
    a_f32 = shifted(a, a_zp)
    bound_a = magnitude(a, a_zp)
    if a_f32.ndim > 2 and b_f32.ndim == 2:
        flat = exact_matmul(a_f32.reshape(-1, a_f32.shape[-1]), b_f32, bound_a, bound_b)
        return flat.reshape(*a_f32.shape[:-1], b_f32.shape[-1])
    return exact_matmul(a_f32, b_f32, bound_a, bound_b)


def clamp(r: np.ndarray, lo, hi) -> None:
    """``r`` clamped to [lo, hi] in place, NaN to ``lo`` as onnxruntime's MLAS has it (its
    max against the low bound comes first and gives the bound for NaN); infinities to the
    bound they pass."""
    np.fmax(r, lo, out=r)
    np.fmin(r, hi, out=r)


def saturate_into(r: np.ndarray, out: np.ndarray) -> None:
    """Round half to even, clamp to ``out``'s integer range and store (``r`` is overwritten)."""
    lo, hi = INTEGER_RANGES[out.dtype.name]
    np.rint(r, out=r)
    clamp(r, lo, hi)
    np.copyto(out, r.reshape(out.shape), casting="unsafe")


def requantize_reference(acc: np.ndarray, multiplier, zp, out: np.ndarray,
                         bias: Optional[np.ndarray] = None) -> None:
    """onnx's reference: ``saturate(round((acc + bias) * multiplier + zp))`` in float64
    (``acc`` and ``bias`` hold exact integers)."""
    r = np.array(acc, dtype=np.float64)
    if bias is not None:
        r += bias
    r *= np.asarray(multiplier).astype(np.float64)
    if zp is not None:
        r += np.asarray(zp).astype(np.float64)
    saturate_into(r, out)


def requantize_float32(acc: np.ndarray, scale, zp, out: np.ndarray) -> None:
    """onnxruntime's MLAS: ``saturate(round(float32(acc) * scale) + zp)`` in float32."""
    r = np.multiply(acc.astype(np.float32), np.asarray(scale, np.float32))
    lo, hi = INTEGER_RANGES[out.dtype.name]
    np.rint(r, out=r)
    if zp is not None:
        r += np.asarray(zp).astype(np.float32)
    clamp(r, lo, hi)
    np.copyto(out, r.reshape(out.shape), casting="unsafe")


def quantize_float32(x: np.ndarray, scale: float, zp, out: np.ndarray) -> None:
    """MLAS's QuantizeLinear: ``saturate(round(x / scale) + zp)``, x and scale float32."""
    r = np.divide(x, np.float32(scale), dtype=np.float32)
    np.rint(r, out=r)
    if zp is not None:
        r += np.float32(zp)
    lo, hi = INTEGER_RANGES[out.dtype.name]
    clamp(r, lo, hi)
    np.copyto(out, r, casting="unsafe")


def scalar(p, default=0):
    """A per-tensor parameter (scalar or one-element array, or None) as a numpy scalar."""
    if p is None:
        return default
    return np.asarray(p).reshape(-1)[0]

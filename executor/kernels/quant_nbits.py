"""MatMulNBits (``com.microsoft``): A @ dequantize(B)^T + bias, B's N rows quantized to
2, 4 or 8 bits per block of K.

B [N, k_blocks, blob] packs each block's values little end first (4 bits: the low nibble
holds the even k); the scales are [N * k_blocks] (or [N, k_blocks]); the zero points,
when given, are packed the same way per row ([N * ceil(k_blocks * bits / 8)] bytes) or
are floats like the scales; without them a value's zero point is 2^(bits - 1).  The
weights are dequantized into a float [K, N] matrix (once, into prepared device memory,
when B, scales and zero points are constants) and multiplied as a float MatMul, which is
what onnxruntime computes with ``accuracy_level`` 0 (its default).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from aircc.executor.device.prepared import prepared_array
from aircc.ops.defs.quant_linear import MS_DOMAIN

from .numpy_backend import NUMPY


def unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` unsigned ``bits``-bit values of each row of bytes ``packed``."""
    rows = packed.reshape(packed.shape[0], -1)
    if bits == 8:
        return rows[:, :count]
    per = 8 // bits
    shifts = np.arange(per, dtype=np.uint8) * bits
    values = (rows[:, :, None] >> shifts) & np.uint8((1 << bits) - 1)
    return values.reshape(rows.shape[0], -1)[:, :count]


def dequantized(b: np.ndarray, scales: np.ndarray, zero_points: Optional[np.ndarray],
                g_idx: Optional[np.ndarray], attrs: dict, out: np.ndarray) -> np.ndarray:
    """``out`` [K, N] = the transposed float weights of B."""
    k, n, bits, block = int(attrs["K"]), int(attrs["N"]), int(attrs.get("bits", 4)), \
        int(attrs["block_size"])
    blocks = -(-k // block)
    q = unpack(b, bits, blocks * block)[:, :k].astype(np.float32)         # [N, K]
    s = scales.reshape(n, blocks).astype(np.float32)
    if zero_points is None:
        z = np.full((n, blocks), float(1 << (bits - 1)), np.float32)
    elif zero_points.dtype == np.uint8:
        z = unpack(zero_points.reshape(n, -1), bits, blocks).astype(np.float32)
    else:
        z = zero_points.reshape(n, blocks).astype(np.float32)
    col = (np.arange(k) // block) if g_idx is None else g_idx.astype(np.int64)
    w = (q - z[:, col]) * s[:, col]
    np.copyto(out, w.T.astype(out.dtype, copy=False))
    return out


def _weights(ins: list, attrs: dict, dtype, constant: bool, prepared) -> np.ndarray:
    a, b, scales, zero_points, g_idx = (list(ins) + [None] * 6)[:5]
    shape = (int(attrs["K"]), int(attrs["N"]))
    if not constant:
        return dequantized(b, scales, zero_points, g_idx, attrs, np.empty(shape, dtype))
    key = ("nbits", b.ctypes.data, b.shape, scales.ctypes.data,
           None if zero_points is None else zero_points.ctypes.data,
           None if g_idx is None else g_idx.ctypes.data, int(attrs.get("bits", 4)),
           int(attrs["block_size"]), np.dtype(dtype).str)
    return prepared_array(prepared, key, shape, dtype,
                          lambda out: dequantized(b, scales, zero_points, g_idx, attrs, out))


def matmul_nbits(ins: list, outs: list, w: np.ndarray) -> None:
    """``outs[0] = A @ w + bias`` with the dequantized weights ``w`` [K, N]."""
    a = ins[0]
    bias = ins[5] if len(ins) > 5 else None
    y = outs[0]
    flat = y.reshape(-1, y.shape[-1])
    np.matmul(a.reshape(-1, a.shape[-1]), w, out=flat)
    if bias is not None:
        flat += bias


@NUMPY.kernel("MatMulNBits", 1, MS_DOMAIN)
class MatMulNBits:
    """Y = A @ dequantize(B)^T + bias, B quantized to ``bits`` per block of K."""

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        if not all(c for x, c in zip(ins[1:5], constant[1:5]) if x is not None):
            return None
        w = _weights(ins, attrs, ins[0].dtype, True, prepared)
        return lambda: matmul_nbits(ins, outs, w)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        matmul_nbits(ins, outs, _weights(ins, attrs, ins[0].dtype, False, None))

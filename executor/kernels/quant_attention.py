"""QAttention and QEmbedLayerNormalization (``com.microsoft``), as onnxruntime's CPU kernels
compute them: the QKV projection an exact integer product scaled to float32 plus the
bias, then attention in float32 (scores scaled, the mask's ``mask_filter_value`` added,
a softmax, the weighted sum of V); the embeddings dequantized per element, summed and
layer-normalized in float32.
"""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.quant_linear import MS_DOMAIN

from .numpy_backend import NUMPY
from .quant_arith import int_matmul, scalar
from .quant_gemm import b_operand

f32 = np.float32


def attention_bias(mask, batch: int, seq: int, total: int, unidirectional: bool,
                   fill: float) -> np.ndarray:
    """The additive mask [B, S, T]: 0 where a query attends, ``fill`` where the mask
    leaves a key out, float32's lowest for a future key of a ``unidirectional`` one."""
    bias = np.zeros((batch, seq, total), f32)
    keys = np.arange(total)
    if mask is not None:
        m = np.asarray(mask)
        if m.ndim == 1:
            out = keys[None, :] >= m[:batch, None]
            if m.shape[0] == 2 * batch:
                out |= keys[None, :] < m[batch:, None]
            bias += np.where(out, f32(fill), f32(0))[:, None, :]
        elif m.ndim == 2:
            bias += np.where(m > 0, f32(0), f32(fill))[:, None, :]
        else:
            bias += np.where(m > 0, f32(0), f32(fill))
    if unidirectional:                # a future key is out whatever the mask says
        future = keys[None, :] > (np.arange(seq)[:, None] + total - seq)
        bias[:, future] = np.finfo(f32).min
    return bias


def qattention(ins: list, outs: list, attrs: dict, weights=None) -> None:
    """QAttention into ``outs[0]`` (``weights``: the weight shifted ahead, when bound)."""
    x, w, bias, x_scale, w_scale, mask, x_zp, w_zp = (list(ins) + [None] * 8)[:8]
    batch, seq, _ = x.shape
    heads = int(attrs["num_heads"])
    weights = weights or b_operand(w, scalar(w_zp, None))
    acc = int_matmul(x, scalar(x_zp, None), *weights)                   # [B, S, 3H]
    qkv = np.multiply(acc.astype(f32), f32(scalar(x_scale)) * f32(scalar(w_scale))) + bias
    hidden = qkv.shape[-1] // 3
    size = hidden // heads
    q, k, v = (qkv[..., i * hidden:(i + 1) * hidden].reshape(batch, seq, heads, size)
               .transpose(0, 2, 1, 3) for i in range(3))
    scale = float(attrs.get("scale", 0.0) or 0.0) or 1.0 / np.sqrt(size)
    scores = np.matmul(q, k.transpose(0, 1, 3, 2)) * f32(scale)
    scores += attention_bias(mask, batch, seq, seq, bool(attrs.get("unidirectional", 0)),
                             float(attrs.get("mask_filter_value", -10000.0)))[:, None]
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    context = np.matmul(scores, v)                                       # [B, N, S, size]
    np.copyto(outs[0], context.transpose(0, 2, 1, 3).reshape(batch, seq, hidden))


@NUMPY.kernel("QAttention", 1, MS_DOMAIN)
class QAttention:
    """Multi-head self-attention over QKV = dequantized (input @ weight) + bias."""

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        w_zp = ins[7] if len(ins) > 7 else None
        constant = list(constant) + [False] * 8
        if not constant[1] or (w_zp is not None and not constant[7]):
            return None
        weights = b_operand(ins[1], scalar(w_zp, None), True, prepared)
        return lambda: qattention(ins, outs, attrs, weights)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        qattention(ins, outs, attrs)


def dequantized_rows(table: np.ndarray, rows: np.ndarray, scale, zp) -> np.ndarray:
    """The rows ``rows`` of a quantized table, dequantized to float32."""
    picked = table[rows].astype(np.int32) - int(scalar(zp))
    return picked.astype(f32) * f32(scalar(scale))


@NUMPY.kernel("QEmbedLayerNormalization", 1, MS_DOMAIN)
class QEmbedLayerNormalization:
    """LayerNorm(dequantized word + position (+ segment) embeddings) and the mask's counts."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        ins = list(ins) + [None] * (18 - len(ins))
        ids, segments, words, positions, segment_table, gamma, beta, mask = ins[:8]
        scales, zps = ins[8:13], ins[13:18]
        batch, seq = ids.shape
        x = dequantized_rows(words, ids, scales[0], zps[0])
        x += dequantized_rows(positions, np.arange(seq), scales[1], zps[1])[None]
        if segments is not None:
            x += dequantized_rows(segment_table, segments, scales[2], zps[2])
        x -= x.mean(axis=-1, keepdims=True, dtype=f32)
        spread = np.sqrt((x * x).mean(axis=-1, keepdims=True, dtype=f32)
                         + f32(attrs.get("epsilon", 1e-12)))
        g = dequantized_rows(gamma, np.arange(gamma.shape[0]), scales[3], zps[3])
        b = dequantized_rows(beta, np.arange(beta.shape[0]), scales[4], zps[4])
        np.copyto(outs[0], x / spread * g + b)
        if len(outs) > 1 and outs[1] is not None:
            counts = (mask == 1).sum(axis=1) if mask is not None else np.zeros(batch)
            np.copyto(outs[1], counts, casting="unsafe")

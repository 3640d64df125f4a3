"""Kernels of onnxruntime's attention contrib ops, Attention, MultiHeadAttention and
DecoderMaskedMultiHeadAttention, and of ``aircc.AttentionMask``
(:mod:`aircc.ops.defs.contrib_attention`).

Each computes in float32 (float64 for float64 inputs; float16 is widened and rounded
once): the heads' scores in one batched product, the masks added, a softmax, the
product with V written into the output's [B, S, H D] layout.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from aircc.ops.defs.contrib_attention import MASK_FILTER_VALUE
from aircc.ops.defs.contrib_common import MS_DOMAIN

from .contrib_common import compute_dtype
from .numpy_backend import NUMPY


def heads(x: np.ndarray, h: int) -> np.ndarray:
    """[B, S, H D] as [B, H, S, D] (a view)."""
    b, s, d = x.shape
    return x.reshape(b, s, h, d // h).transpose(0, 2, 1, 3)


def write_heads(ctx: np.ndarray, out: np.ndarray) -> None:
    """The context [B, H, S, D] into ``out`` [B, S, H D]."""
    b, h, s, d = ctx.shape
    np.copyto(out.reshape(b, s, h, d), ctx.transpose(0, 2, 1, 3), casting="unsafe")


def key_mask(mask: Optional[np.ndarray], b: int, s: int, t: int, filter_value: float,
             dtype=np.float32) -> Optional[np.ndarray]:
    """onnxruntime's mask forms (``mask_index``: [B] key ends, [2 B] ends and starts, [B, T],
    [B, S, T]) as an additive mask [B, 1, S or 1, T]: ``filter_value`` at padded keys;
    None for no mask (also a [B, 1] mask over more than one key, which onnxruntime ignores)."""
    if mask is None or (mask.ndim == 2 and mask.shape[1] == 1 and t != 1):
        return None
    fill = dtype(filter_value)
    if mask.ndim == 1:
        pos = np.arange(t)
        keep = pos[None, :] < mask[:b, None]
        if mask.shape[0] == 2 * b:
            keep &= pos[None, :] >= np.minimum(mask[b:], t)[:, None]
        return np.where(keep, dtype(0), fill)[:, None, None, :]
    if mask.ndim == 2:
        return np.where(mask > 0, dtype(0), fill)[:, None, None, :]
    return np.where(mask > 0, dtype(0), fill)[:, None, :, :]


def future(s: int, t: int, past: int) -> np.ndarray:
    """[S, T] True where key j is after query i (at position ``past`` + i), but in the last
    row, which onnxruntime's causal mask leaves whole (where S + past < T: cross-attention)."""
    hidden = np.arange(t)[None, :] > past + np.arange(s)[:, None]
    hidden[-1] = False
    return hidden


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """Softmax along the last axis, in place."""
    z -= z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, add=None,
           hidden: Optional[np.ndarray] = None, scores_out: Optional[np.ndarray] = None) -> np.ndarray:
    """softmax(scale q k^T + add, keys where ``hidden`` is True left out) v for q [B, H, S, D],
    k [B, H, T, D], v [B, H, T, Dv]; ``scores_out`` gets the scores before the softmax (a
    hidden key's the lowest float, as onnxruntime writes it)."""
    z = np.matmul(q, np.swapaxes(k, -1, -2))
    z *= z.dtype.type(scale)
    if add is not None:
        z += add
    if hidden is not None:
        z[np.broadcast_to(hidden, z.shape)] = np.finfo(z.dtype).min
    if scores_out is not None:
        np.copyto(scores_out, z, casting="unsafe")
    return np.matmul(softmax_rows(z), v)


def _scale(attrs: dict, head_size: int) -> float:
    scale = float(attrs.get("scale", 0.0))
    return scale if scale else 1.0 / float(np.sqrt(head_size))


def _bias_add(mask, bias, dtype):
    if bias is None:
        return mask
    bias = bias.astype(dtype, copy=False)
    return bias if mask is None else mask + bias


@NUMPY.kernel("Attention", 1, MS_DOMAIN)
class Attention:
    """onnxruntime's Attention (see its definition): one product for Q, K and V, the past
    before the new keys and values, the mask forms and attention_bias added, causal with
    ``unidirectional``."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, w, bias, mask, past, attn_bias = (list(ins) + [None] * 6)[:6]
        dt = compute_dtype(x)
        h = int(attrs["num_heads"])
        sizes = attrs.get("qkv_hidden_sizes") or [w.shape[1] // 3] * 3
        dq, dk, _ = (int(n) for n in sizes)
        qkv = np.matmul(x.astype(dt, copy=False), w.astype(dt, copy=False))
        if bias is not None:
            qkv += bias.astype(dt, copy=False)
        q, k, v = heads(qkv[..., :dq], h), heads(qkv[..., dq:dq + dk], h), heads(qkv[..., dq + dk:], h)
        if past is not None:
            k = np.concatenate([past[0].astype(dt, copy=False), k], axis=2)
            v = np.concatenate([past[1].astype(dt, copy=False), v], axis=2)
        b, s = x.shape[:2]
        t = k.shape[2]
        add = _bias_add(key_mask(mask, b, s, t, attrs.get("mask_filter_value", MASK_FILTER_VALUE), dt),
                        attn_bias, dt)
        hidden = future(s, t, t - s) if int(attrs.get("unidirectional", 0)) and s > 1 else None
        write_heads(attend(q, k, v, _scale(attrs, dq // h), add, hidden), outs[0])
        if len(outs) > 1 and outs[1] is not None:
            np.copyto(outs[1][0], k, casting="unsafe")
            np.copyto(outs[1][1], v, casting="unsafe")


def _mha_qkv(ins, h: int, dt):
    """(q, k, v) [B, H, *, D] of a MultiHeadAttention's inputs, the bias added (not to a key
    and value given per head, as onnxruntime has it)."""
    query, key, value, bias = ins[0], ins[1], ins[2], ins[3]
    query = query.astype(dt, copy=False)
    if query.ndim == 5:                                     # packed QKV [B, S, H, 3, D]
        q, k, v = (query[:, :, :, j].transpose(0, 2, 1, 3) for j in range(3))
    else:
        q = heads(query, h)
        key = key.astype(dt, copy=False)
        if key.ndim == 5:                                   # packed KV [B, L, H, 2, D]
            k, v = (key[:, :, :, j].transpose(0, 2, 1, 3) for j in range(2))
        elif key.ndim == 4:                                 # [B, H, L, D]: no bias for them
            if bias is not None:
                q = q + bias[:query.shape[2]].astype(dt).reshape(1, h, 1, -1)
            return q, key, value.astype(dt, copy=False)
        else:
            k, v = heads(key, h), heads(value.astype(dt, copy=False), h)
    if bias is not None:
        dq, dk = q.shape[1] * q.shape[3], k.shape[1] * k.shape[3]
        parts = np.split(bias.astype(dt, copy=False), [dq, dq + dk])
        q, k, v = (a + p.reshape(1, h, 1, -1) for a, p in zip((q, k, v), parts))
    return q, k, v


@NUMPY.kernel("MultiHeadAttention", 1, MS_DOMAIN)
class MultiHeadAttention:
    """onnxruntime's MultiHeadAttention (see its definition)."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        ins = (list(ins) + [None] * 8)[:8]
        dt = compute_dtype(ins[0])
        h = int(attrs["num_heads"])
        q, k, v = _mha_qkv(ins, h, dt)
        past_k, past_v = ins[6], ins[7]
        p = 0
        if past_k is not None:
            p = past_k.shape[2]
            k = np.concatenate([past_k.astype(dt, copy=False), k], axis=2)
            v = np.concatenate([past_v.astype(dt, copy=False), v], axis=2)
        b, _, s, _ = q.shape
        t = k.shape[2]
        add = _bias_add(key_mask(ins[4], b, s, t, attrs.get("mask_filter_value", MASK_FILTER_VALUE), dt),
                        ins[5], dt)
        hidden = future(s, t, p) if int(attrs.get("unidirectional", 0)) and s > 1 else None
        outs = (list(outs) + [None] * 4)[:4]
        write_heads(attend(q, k, v, _scale(attrs, q.shape[3]), add, hidden, outs[3]), outs[0])
        for out, kv in ((outs[1], k), (outs[2], v)):
            if out is not None:
                np.copyto(out, kv, casting="unsafe")


def _beam_past(past: np.ndarray, p: int, beams: int, indirection: np.ndarray) -> np.ndarray:
    """past [B, H, M, D]'s first ``p`` positions, each row's from the beam
    ``indirection`` [B / beams, beams, M] names for it."""
    rows = np.arange(past.shape[0])
    src = (rows // beams * beams)[:, None] + indirection.reshape(past.shape[0], -1)[:, :p]   # [B, p]
    return past[src, :, np.arange(p)[None, :]].transpose(0, 2, 1, 3)                       # [B, H, p, D]


@NUMPY.kernel("DecoderMaskedMultiHeadAttention", 1, MS_DOMAIN)
class DecoderMaskedMultiHeadAttention:
    """One decoding step over a shared key-value buffer (beam search's indirection
    followed), or cross-attention (see the definition)."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        query, key, value, mask, attn_bias, past_k, past_v, past_len, beams, indirection, bias = \
            (list(ins) + [None] * 11)[:11]
        dt = compute_dtype(query)
        h = int(attrs["num_heads"])
        outs = (list(outs) + [None] * 4)[:4]
        if key is not None and key.ndim == 4:                           # cross-attention
            q = heads(query.astype(dt), h)
            if bias is not None:
                q = q + bias[:query.shape[2]].astype(dt).reshape(1, h, 1, -1)
            k, v = key.astype(dt, copy=False), value.astype(dt, copy=False)
            presents = (key, value)
        else:
            if key is None:                                             # packed QKV
                query, key, value = np.split(query, 3, axis=2)
            q, k_new, v_new = _mha_qkv([query, key, value, bias], h, dt)
            p = int(past_len.reshape(-1)[0])
            presents = []
            for past, new, out in ((past_k, k_new, outs[1]), (past_v, v_new, outs[2])):
                present = past.astype(dt) if out is None else out
                np.copyto(present, past, casting="unsafe")
                present[:, :, p] = new[:, :, 0]
                presents.append(present)
            k, v = (np.concatenate([_beam_past(past, p, int(beams.reshape(-1)[0]), indirection), new], axis=2)
                    if indirection is not None else pres[:, :, :p + 1].astype(dt)
                    for past, new, pres in ((past_k, k_new, presents[0]), (past_v, v_new, presents[1])))
            presents = ()
        t = k.shape[2]
        if mask is not None and mask.ndim == 2 and mask.shape[1] > t:
            mask = mask[:, :t]                      # a mask over the whole buffer
        if attn_bias is not None and beams is not None and attn_bias.shape[0] > 1:
            attn_bias = attn_bias[np.arange(q.shape[0]) // int(beams.reshape(-1)[0])]   # onnxruntime's rows
        add = _bias_add(key_mask(mask, q.shape[0], 1, t, attrs.get("mask_filter_value", MASK_FILTER_VALUE), dt),
                        attn_bias[..., :t] if attn_bias is not None else None, dt)
        write_heads(attend(q, k, v, _scale(attrs, q.shape[3]), add, None, outs[3]), outs[0])
        for out, kv in zip(outs[1:3], presents):
            if out is not None:
                np.copyto(out, kv, casting="unsafe")


@NUMPY.kernel("AttentionMask", 1, "aircc")
class AttentionMask:
    """The additive mask of onnxruntime's mask forms for an attention over X's own keys."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        mask, x = ins[0], ins[1]
        b, s = x.shape[:2]
        y = outs[0]
        y.fill(0)
        m = key_mask(mask, b, s, s, float(attrs.get("mask_filter_value", MASK_FILTER_VALUE)))
        if m is not None:
            y += m
        if int(attrs.get("unidirectional", 0)) and s > 1:
            y[np.broadcast_to(future(s, s, 0), y.shape)] = -np.inf

"""Kernel of onnxruntime's GroupQueryAttention (:mod:`aircc.ops.defs.contrib_gqa`): per
batch row, the step's valid tokens rotated and appended to the cache, then each group
of query heads attends to its key-value head's cached tokens."""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.contrib_common import MS_DOMAIN

from .contrib_common import compute_dtype
from .contrib_position import rotate
from .numpy_backend import NUMPY


def _split(ins, h: int, kvh: int, dt):
    """(q [B, S, H, D], k, v [B, S, KVH, D]) of separate or packed inputs."""
    query = ins[0].astype(dt, copy=False)
    b, s, width = query.shape
    if ins[1] is None:
        d = width // (h + 2 * kvh)
        q, k, v = np.split(query, [h * d, (h + kvh) * d], axis=2)
    else:
        d = width // h
        q, k, v = query, ins[1].astype(dt, copy=False), ins[2].astype(dt, copy=False)
    return q.reshape(b, s, h, d), k.reshape(b, s, kvh, d), v.reshape(b, s, kvh, d)


def _positions(pos_ids, b: int, past: int, s: int, first_prompt: bool) -> np.ndarray:
    """The positions of batch row ``b``'s step tokens."""
    if pos_ids is None:
        return past + np.arange(s)
    if first_prompt:
        return pos_ids.reshape(-1)[0] + np.arange(s)
    return pos_ids[b if pos_ids.shape[0] > 1 else 0]


def _softmax(z: np.ndarray, sink) -> np.ndarray:
    """Softmax along the last axis with ``sink`` [heads, 1, 1] (or None) added to each
    denominator as exp(sink)."""
    m = z.max(axis=-1, keepdims=True)
    if sink is not None:
        m = np.maximum(m, sink)
    z = np.exp(z - m)
    den = z.sum(axis=-1, keepdims=True)
    if sink is not None:
        den += np.exp(sink - m)
    return z / den


@NUMPY.kernel("GroupQueryAttention", 1, MS_DOMAIN)
class GroupQueryAttention:
    """Grouped-query attention with a key-value cache (see the definition's module doc)."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        ins = (list(ins) + [None] * 12)[:12]
        past_k, past_v, seqlens, total, cos, sin, pos_ids, bias, head_sink = ins[3:12]
        h, kvh = int(attrs["num_heads"]), int(attrs["kv_num_heads"])
        dt = compute_dtype(ins[0])
        q, k, v = _split(ins, h, kvh, dt)
        b, s, _, d = q.shape
        g = h // kvh
        first_prompt = s == int(total.reshape(-1)[0])
        out = outs[0].reshape(b, s, kvh, g, d)
        out.fill(0)
        outs = (list(outs) + [None, None])[:3]
        length = outs[1].shape[2] if outs[1] is not None else int(seqlens.max()) + 1
        caches = [np.zeros((b, kvh, length, d), dt) if o is None else o for o in outs[1:3]]
        for c in caches:
            c.fill(0)
        scale = float(attrs.get("scale", 0.0)) or 1.0 / float(np.sqrt(d))
        softcap = float(attrs.get("softcap", 0.0))
        window = int(attrs.get("local_window_size", -1))
        causal = bool(int(attrs.get("causal", 1)))
        rotary = bool(int(attrs.get("do_rotary", 0)))
        sink = None
        if head_sink is not None:
            sink = head_sink.astype(dt).reshape(kvh, g, 1, 1)
        elif int(attrs.get("smooth_softmax", -1)) > 0:
            sink = np.zeros((kvh, g, 1, 1), dt)
        for i in range(b):
            t = int(seqlens[i]) + 1
            n = min(s, t)
            p = t - n
            m = s if first_prompt else n        # a first prompt's padding rows are cached too
            qi, ki = q[i, :m], k[i, :m]
            if rotary:
                pos = _positions(pos_ids, i, p, s, first_prompt)[:m]
                c = cos.astype(dt, copy=False)[pos][:, None, :]
                sn = sin.astype(dt, copy=False)[pos][:, None, :]
                inter = bool(int(attrs.get("rotary_interleaved", 0)))
                qi, ki = rotate(qi, c, sn, inter), rotate(ki, c, sn, inter)
            qi = qi[:n]
            for cache, past, new in ((caches[0], past_k, ki), (caches[1], past_v, v[i, :m])):
                if p:
                    cache[i, :, :p] = past[i, :, :p]
                cache[i, :, p:p + m] = new.transpose(1, 0, 2)
            keys, values = caches[0][i, :, :t].astype(dt), caches[1][i, :, :t].astype(dt)
            z = np.matmul(qi.reshape(n, kvh, g, d).transpose(1, 2, 0, 3), keys[:, None].swapaxes(-1, -2))
            z *= dt(scale)
            if softcap:
                z = dt(softcap) * np.tanh(z / dt(softcap))
            if bias is not None:
                bi = bias[i if bias.shape[0] > 1 else 0, :, :n, :t].astype(dt)
                z += np.broadcast_to(bi, (h, n, t)).reshape(kvh, g, n, t)
            at = p + np.arange(n)[:, None]
            j = np.arange(t)[None, :]
            hidden = (j > at) if causal else np.zeros((n, t), bool)
            if window >= 0:
                hidden |= j <= at - window
            z[..., hidden] = -np.inf
            ctx = np.matmul(_softmax(z, sink), values[:, None])          # [KVH, G, n, D]
            np.copyto(out[i, :n], ctx.transpose(2, 0, 1, 3), casting="unsafe")

"""Kernels of onnxruntime's position contrib ops (:mod:`aircc.ops.defs.contrib_position`):
RotaryEmbedding and RelativePositionBias; :func:`rotate` is shared with
GroupQueryAttention's kernel."""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.contrib_common import MS_DOMAIN

from .contrib_common import compute_dtype
from .numpy_backend import NUMPY


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """x [..., D] with its first 2 R entries rotated by the angles whose cosines and sines
    ``cos`` and ``sin`` [..., R] give (broadcast over x's leading axes): halves, or pairs
    when ``interleaved``.  A new array."""
    y = x.copy()
    r = cos.shape[-1]
    if interleaved:
        a, b = x[..., 0:2 * r:2], x[..., 1:2 * r:2]
        y[..., 0:2 * r:2] = a * cos - b * sin
        y[..., 1:2 * r:2] = b * cos + a * sin
    else:
        a, b = x[..., :r], x[..., r:2 * r]
        y[..., :r] = a * cos - b * sin
        y[..., r:2 * r] = b * cos + a * sin
    return y


@NUMPY.kernel("RotaryEmbedding", 1, MS_DOMAIN)
class RotaryEmbedding:
    """Each head's first rotary-dim entries rotated by its token's position's angles."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, pos, cos, sin = ins[0], ins[1], ins[2], ins[3]
        dt = compute_dtype(x)
        r = cos.shape[1]
        if x.ndim == 4:                                       # [B, H, S, D] as [B, S, H, D]
            xs = x.transpose(0, 2, 1, 3)
        else:
            heads = int(attrs.get("num_heads", 0)) or x.shape[2] // (2 * r)
            xs = x.reshape(x.shape[0], x.shape[1], heads, -1)
        b, s = xs.shape[:2]
        positions = pos.reshape(-1)[0] + np.arange(s) if pos.ndim == 1 else pos
        positions = np.broadcast_to(positions, (b, s))
        c = cos.astype(dt, copy=False)[positions][:, :, None, :]
        sn = sin.astype(dt, copy=False)[positions][:, :, None, :]
        y = rotate(xs.astype(dt), c, sn, bool(int(attrs.get("interleaved", 0))))
        if x.ndim == 4:
            y = y.transpose(0, 2, 1, 3)
        np.copyto(outs[0], y.reshape(outs[0].shape), casting="unsafe")


def relative_buckets(q: int, k: int, buckets: int, max_distance: int, bidirectional: bool) -> np.ndarray:
    """T5's bucket [q, k] of each key's offset from each query (computed in float32, as
    the models are)."""
    rel = np.arange(k)[None, :] - np.arange(q)[:, None]
    out = np.zeros((q, k), np.int64)
    if bidirectional:
        buckets //= 2
        out += (rel > 0) * buckets
        rel = np.abs(rel)
    else:
        rel = -np.minimum(rel, 0)
    exact = buckets // 2
    with np.errstate(divide="ignore"):
        scaled = np.log(rel.astype(np.float32) / np.float32(exact)) / np.float32(np.log(max_distance / exact))
    large = exact + np.where(rel < exact, 0, scaled * np.float32(buckets - exact)).astype(np.int64)
    out += np.where(rel < exact, rel, np.minimum(large, buckets - 1))
    return out


@NUMPY.kernel("RelativePositionBias", 1, MS_DOMAIN)
class RelativePositionBias:
    """bias_table[bucket(k - q), h] as [1, H, query_length, key_length]."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        table = ins[0]
        q, k = int(ins[1].reshape(-1)[0]), int(ins[2].reshape(-1)[0])
        idx = relative_buckets(q, k, table.shape[0], int(attrs["max_distance"]),
                               bool(int(attrs.get("is_bidirectional", 0))))
        np.copyto(outs[0][0], table[idx].transpose(2, 0, 1))

"""Kernels of onnxruntime's normalisation contrib ops (:mod:`aircc.ops.defs.contrib_norm`):
SkipLayerNormalization, SkipSimplifiedLayerNormalization, EmbedLayerNormalization,
GroupNorm, SkipGroupNorm, and the default domain's SimplifiedLayerNormalization and
LayerNormalization before opset 17.  Statistics in float32 (float64 for float64)."""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.contrib_common import MS_DOMAIN
from aircc.ops.shapes import axis_plain

from .contrib_common import compute_dtype
from .numpy_backend import NUMPY
from .norm import LayerNormalization as LayerNormalization17

#: onnxruntime's default ``epsilon`` of its Skip / Embed layer normalisations.
BERT_EPSILON = 1e-12


def _write(out, value) -> None:
    if out is not None:
        np.copyto(out, value.reshape(out.shape), casting="unsafe")


def normalized(s: np.ndarray, axes: tuple, eps: float, rms: bool):
    """(s normalised over ``axes``, mean, inverse deviation); ``rms``: divided by the root
    mean square, the mean not taken out (and returned as zeros)."""
    if rms:
        mean = np.zeros(s.shape[:axes[0]] + (1,) * len(axes), s.dtype)
        d = s
    else:
        mean = s.mean(axis=axes, keepdims=True)
        d = s - mean
    inv = np.mean(d * d, axis=axes, keepdims=True)
    inv += s.dtype.type(eps)
    inv = 1 / np.sqrt(inv)
    return d * inv, mean, inv


def _skip_norm(ins, outs, attrs, rms: bool) -> None:
    """output, mean, inverse deviation and the sum of a Skip...Normalization."""
    if rms:
        x, skip, gamma, bias = (list(ins) + [None] * 4)[:4]
        beta = None
    else:
        x, skip, gamma, beta, bias = (list(ins) + [None] * 5)[:5]
    dt = compute_dtype(x)
    s = x.astype(dt) + skip.astype(dt, copy=False)
    if bias is not None:
        s += bias.astype(dt, copy=False)
    y, mean, inv = normalized(s, (s.ndim - 1,), float(attrs.get("epsilon", BERT_EPSILON)), rms)
    y *= gamma.astype(dt, copy=False)
    if beta is not None:
        y += beta.astype(dt, copy=False)
    outs = (list(outs) + [None] * 4)[:4]
    for out, value in zip(outs, (y, mean, inv, s)):
        _write(out, value)


@NUMPY.kernel("SkipLayerNormalization", 1, MS_DOMAIN)
class SkipLayerNormalization:
    """LayerNormalization of input + skip + bias."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _skip_norm(ins, outs, attrs, rms=False)


@NUMPY.kernel("SkipSimplifiedLayerNormalization", 1, MS_DOMAIN)
class SkipSimplifiedLayerNormalization:
    """RMS normalisation of input + skip + bias."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _skip_norm(ins, outs, attrs, rms=True)


@NUMPY.kernel("SimplifiedLayerNormalization", 1)
class SimplifiedLayerNormalization:
    """x / sqrt(mean(x^2) + eps) * scale over axes [axis, rank)."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, scale = ins[0], ins[1]
        dt = compute_dtype(x)
        axis = axis_plain(int(attrs.get("axis", -1)), x.ndim)
        y, _, inv = normalized(x.astype(dt), tuple(range(axis, x.ndim)),
                               float(attrs.get("epsilon", 1e-5)), rms=True)
        y *= scale.astype(dt, copy=False)
        _write(outs[0], y)
        if len(outs) > 1:
            _write(outs[1], inv)


@NUMPY.kernel("LayerNormalization", 1)
class LayerNormalization1(LayerNormalization17):
    """onnxruntime's LayerNormalization before opset 17: opset 17's kernel."""


@NUMPY.kernel("EmbedLayerNormalization", 1, MS_DOMAIN)
class EmbedLayerNormalization:
    """Word, position and segment embeddings summed and layer-normalised; the mask index."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        ids, seg, word, pos, seg_table, gamma, beta, mask, pos_ids = (list(ins) + [None] * 9)[:9]
        dt = compute_dtype(word)
        b, s = ids.shape
        positions = np.broadcast_to(np.arange(s) if pos_ids is None else pos_ids, (b, s))
        parts = [(ids, word, "input_ids"), (positions, pos, "position ids")]
        if seg is not None:
            parts.append((seg, seg_table, "segment_ids"))
        e = None
        for index, table, what in parts:
            if index.size and (index.min() < 0 or index.max() >= table.shape[0]):
                raise ValueError(f"{what} has values outside [0, {table.shape[0]}), the rows of its table")
            rows = table.astype(dt, copy=False)[index]
            e = rows if e is None else e + rows
        y, _, _ = normalized(e, (2,), float(attrs.get("epsilon", BERT_EPSILON)), rms=False)
        y = y * gamma.astype(dt, copy=False) + beta.astype(dt, copy=False)
        outs = (list(outs) + [None] * 3)[:3]
        _write(outs[0], y)
        if outs[1] is not None:
            outs[1][...] = 0 if mask is None else (mask == 1).sum(axis=1)
        _write(outs[2], e)


def group_norm(s: np.ndarray, gamma, beta, attrs: dict, last: bool) -> np.ndarray:
    """GroupNorm of ``s`` (NHWC if ``last``, else NCHW), SiLU after with ``activation=1``."""
    groups = int(attrs["groups"])
    n, c = s.shape[0], s.shape[-1] if last else s.shape[1]
    g = s.reshape(n, -1, groups, c // groups) if last else s.reshape(n, groups, c // groups, -1)
    axes = (1, 3) if last else (2, 3)
    mean = g.mean(axis=axes, keepdims=True)
    d = g - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    y = (d / np.sqrt(var + s.dtype.type(attrs.get("epsilon", 1e-5)))).reshape(s.shape)
    shape = (1,) * (s.ndim - 1) + (c,) if last else (1, c) + (1,) * (s.ndim - 2)
    y = y * gamma.astype(s.dtype).reshape(shape) + beta.astype(s.dtype).reshape(shape)
    if int(attrs.get("activation", 0)):
        y = y / (1 + np.exp(-y))
    return y


@NUMPY.kernel("GroupNorm", 1, MS_DOMAIN)
class GroupNorm:
    """Group normalisation (NHWC or NCHW), SiLU optional."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0].astype(compute_dtype(ins[0]))
        _write(outs[0], group_norm(x, ins[1], ins[2], attrs, bool(int(attrs.get("channels_last", 1)))))


@NUMPY.kernel("SkipGroupNorm", 1, MS_DOMAIN)
class SkipGroupNorm:
    """GroupNorm (NHWC) of X + skip + bias; optionally that sum."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, gamma, beta, skip, bias = (list(ins) + [None] * 5)[:5]
        s = x.astype(compute_dtype(x))
        s += (skip if skip.ndim == 4 else skip[:, None, None, :]).astype(s.dtype, copy=False)
        if bias is not None:
            s += bias.astype(s.dtype, copy=False)
        _write(outs[0], group_norm(s, gamma, beta, attrs, last=True))
        if len(outs) > 1:
            _write(outs[1], s)

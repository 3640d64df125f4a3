"""Kernels of onnxruntime's activation contrib ops (:mod:`aircc.ops.defs.contrib_activation`):
Gelu, FastGelu, BiasGelu, QuickGelu, BiasAdd, BiasSplitGelu, ThresholdedRelu before opset 10."""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.contrib_common import MS_DOMAIN

from .elementwise import scalar_like
from .gelu import gelu
from .numpy_backend import NUMPY

EXACT = {"approximate": "none"}
TANH = {"approximate": "tanh"}


def _biased(x: np.ndarray, bias, y: np.ndarray) -> np.ndarray:
    """x + bias written into y (x itself without a bias)."""
    if bias is None:
        return x
    np.add(x, bias, out=y)
    return y


@NUMPY.kernel("Gelu", 1, MS_DOMAIN)
class Gelu:
    """x Phi(x), exact."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        gelu(ins[0], outs[0], EXACT)


@NUMPY.kernel("FastGelu", 1, MS_DOMAIN)
class FastGelu:
    """GELU's tanh approximation of x + bias."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        x = _biased(ins[0], ins[1] if len(ins) > 1 else None, y)
        gelu(x.copy() if x is y else x, y, TANH)


@NUMPY.kernel("BiasGelu", 1, MS_DOMAIN)
class BiasGelu:
    """Exact GELU of A + B."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        gelu(_biased(ins[0], ins[1], y).copy(), y, EXACT)


@NUMPY.kernel("QuickGelu", 1, MS_DOMAIN)
class QuickGelu:
    """x sigmoid(alpha x)."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        alpha = scalar_like(y, float(attrs.get("alpha", 1.702)))
        with np.errstate(over="ignore"):
            np.multiply(x, -alpha, out=y)
            np.exp(y, out=y)
            np.add(y, scalar_like(y, 1), out=y)
            np.divide(x, y, out=y)


@NUMPY.kernel("BiasAdd", 1, MS_DOMAIN)
class BiasAdd:
    """X + bias + skip."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        np.add(ins[0], ins[1], out=outs[0])
        np.add(outs[0], ins[2], out=outs[0])


@NUMPY.kernel("BiasSplitGelu", 1, MS_DOMAIN)
class BiasSplitGelu:
    """L GELU(R) of the halves [L | R] of X + bias."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        t = ins[0] + ins[1]
        half = t.shape[-1] // 2
        y = outs[0]
        gelu(np.ascontiguousarray(t[..., half:]), y, EXACT)
        np.multiply(y, t[..., :half], out=y)


@NUMPY.kernel("ThresholdedRelu", 1)
class ThresholdedRelu1:
    """x if x > alpha else 0."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        np.copyto(outs[0], np.where(x > scalar_like(x, float(attrs.get("alpha", 1.0))), x, 0))

"""Kernel of Gelu (opset 20; also what the fuse-gelu pass makes of the exported erf form)."""
from __future__ import annotations

import math

import numpy as np

from aircc.ops.shapes import prod

from .elementwise import ERF_CHUNK, ERF_TANH32, erf, scalar_like
from .numpy_backend import NUMPY
from .scratch import carve, view

# GELU(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt(2))) / 2.  With erf(u) = tanh(u P(u^2))
# (see elementwise.py), Phi(x) = (1 + tanh(z)) / 2 = 1 / (1 + exp(-2z)) with 2z = x Q(x^2)
# and Q(t) = sqrt(2) P(t / 2): 17 float32 passes instead of 21, and no cancellation in
# 1 + erf for negative x.  exp(u) = exp2(u log2 e), and numpy's float32 exp2 is within
# 1 ulp and runs at twice the speed of its exp (0.17 against 0.31 ns an element here),
# so the coefficients carry the log2 e (measured against math.erfc in float64: within
# 4.2 ulp on [-1, 12], 3.5 with exp; within 3e-7 absolute below).  Coefficients of
# -Q log2 e, high order first.
_GELU_NEG_Q32 = [np.float32(-math.sqrt(2) * math.log2(math.e) * float(c)
                            / 2.0 ** (len(ERF_TANH32) - 1 - i))
                 for i, c in enumerate(ERF_TANH32)]


def _gelu_f32(x: np.ndarray, y: np.ndarray, t: np.ndarray | None = None) -> None:
    """y = GELU(x) for float32 x and y of the same (cache-sized) length; ``t`` (their
    length, optional) is scratch."""
    q = _GELU_NEG_Q32
    mul, add = np.multiply, np.add
    with np.errstate(over="ignore", invalid="ignore"):
        t = mul(x, x, t)
        mul(t, q[0], y)
        add(y, q[1], y)
        for c in q[2:]:
            mul(y, t, y)
            add(y, c, y)
        mul(y, x, y)
        np.exp2(y, y)
        add(y, np.float32(1), y)
        np.divide(x, y, y)


def gelu(x: np.ndarray, y: np.ndarray, attrs: dict) -> None:
    """y = GELU(x), exact (erf) or ``approximate="tanh"``; y may be x (a fused activation
    run after a oneDNN product)."""
    exact = attrs.get("approximate", "none") != "tanh"
    in_place = np.may_share_memory(x, y)
    if exact and x.dtype == np.float32 and y.dtype == np.float32:
        xf, yf = x.reshape(-1), view(y, (-1,))
        for i in range(0, xf.size, ERF_CHUNK):
            chunk = xf[i:i + ERF_CHUNK]
            _gelu_f32(chunk.copy() if in_place else chunk, yf[i:i + ERF_CHUNK])
        return
    if in_place:                       # every step below reads x after writing y
        x = x.copy()
    if not exact:
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        np.multiply(x, x, out=y)
        np.multiply(y, scalar_like(y, 0.044715), out=y)
        np.add(y, scalar_like(y, 1), out=y)
        np.multiply(y, x, out=y)
        np.multiply(y, scalar_like(y, math.sqrt(2 / math.pi)), out=y)
        np.tanh(y, out=y)
    else:
        erf(np.multiply(x, scalar_like(y, 1 / math.sqrt(2))), y)
    np.add(y, scalar_like(y, 1), out=y)
    np.multiply(y, x, out=y)
    np.multiply(y, scalar_like(y, 0.5), out=y)


def _exact_f32(types, attrs) -> bool:
    return attrs.get("approximate", "none") != "tanh" and types[0].dtype == "float32"


@NUMPY.kernel("Gelu", 20)
class Gelu:
    """x Phi(x); float32 exact as x / (1 + 2^(-x Q(x^2) log2 e)) in cache-sized chunks."""

    @staticmethod
    def tiling(types, attrs, target) -> dict:
        if not types[0].is_static or not _exact_f32(types, attrs):
            return {}
        return {"workspace": min(prod(types[0].shape), ERF_CHUNK) * 4}

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        x, y = ins[0], outs[0]
        if x.dtype != np.float32 or y.dtype != np.float32 or attrs.get("approximate", "none") == "tanh" \
                or not x.flags.c_contiguous or not y.flags.c_contiguous or ws is None \
                or ws.nbytes < min(x.size, ERF_CHUNK) * 4 or np.may_share_memory(x, y):
            return None
        xf, yf = x.reshape(-1), y.reshape(-1)
        chunks = [(xf[i:i + ERF_CHUNK], yf[i:i + ERF_CHUNK],
                   carve(ws, 0, (min(ERF_CHUNK, xf.size - i),), np.float32))
                  for i in range(0, xf.size, ERF_CHUNK)]
        if len(chunks) == 1:
            return lambda f=_gelu_f32, c=chunks[0]: f(*c)

        def run():
            for c in chunks:
                _gelu_f32(*c)
        return run

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        gelu(ins[0], outs[0], attrs)

"""Kernels of the unary elementwise ops: math functions and activations (table-driven
registration), IsInf and Clip; :func:`erf`, which numpy lacks, for them and for Gelu.

Every entry of :data:`UNARY` is ``(name, since, fn)`` where ``fn(x, y, attrs)`` writes
``y`` in place.  The ops are defined (shape rules, traits) in :mod:`aircc.ops.defs.elementwise`.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numpy.polynomial import chebyshev

from .epilogue import relu
from .numpy_backend import NUMPY
from .scratch import view


def scalar_like(y: np.ndarray, v: float) -> np.generic:
    """``v`` as a scalar of ``y``'s dtype (keeps float32 math in float32)."""
    return y.dtype.type(v)


# ------------------------------------------------------------------ erf
# numpy has no erf.  float32 (and float16) inputs: erf(x) = tanh(x * P(x^2)), P of
# degree 6 fitted offline to atanh(erf(x)) / x on [0, 4] (iteratively reweighted least
# squares on the error it makes in erf, then checked in float32 against math.erf):
# within 3.4 ulp of erf everywhere.  tanh saturates where erf does: for |x| >= 3.92
# (erf rounds to 1 in float32) x * P(x^2) >= 8.96, and tanh of that is 1 (or 1 ulp
# under); P grows without bound past 4, so no clamp is needed and +-inf give +-1.
# That is 16 float32 passes over a cache-sized chunk (numpy's tanh is vectorised),
# against 25 for a (6, 5) rational.  float64 inputs use a Taylor series of erf(x)/x
# in x^2 for |x| < 1 and a Chebyshev fit (in 1/x) of erfcx(x) = erfc(x) exp(x^2) on
# [1, 6] (~1e-15).
# Chunks of 64k elements (256 KiB in float32) stay in a core's cache; smaller ones pay
# numpy's per-call cost more often (16k took 20% longer on BERT's GELU).
ERF_CHUNK = 65536
"""Elements per chunk of the float32 erf (and of Gelu, which shares its polynomial)."""
ERF_TANH32 = [np.float32(c) for c in (
    1.351662035631307e-07, -5.563642389461165e-06, 8.707454981049523e-05,
    -6.185260717757046e-04, -1.929665741045028e-04, 1.027693822979927e-01,
    1.128379225730896e+00)]
"""Coefficients of P, high order first in t = x^2: float32 erf(x) = tanh(x P(x^2))."""


def _f64_tables():
    taylor = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
              for n in range(19)]
    lo, hi = 1.0 / 6.0, 1.0

    def erfcx(u):
        return np.array([math.erfc(1 / v) * math.exp(1 / (v * v))
                         for v in (np.atleast_1d(u) + 1) * (hi - lo) / 2 + lo])

    poly = chebyshev.cheb2poly(chebyshev.chebinterpolate(erfcx, 22))
    return taylor[::-1], poly[::-1].tolist(), lo, hi


_ERF_TAYLOR, _ERF_POLY, _ERF_LO, _ERF_HI = _f64_tables()


def _horner(coefs_high_first, t: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    p = np.multiply(t, coefs_high_first[0], out=out)
    p += coefs_high_first[1]
    for c in coefs_high_first[2:]:
        p *= t
        p += c
    return p


def _erf_f64(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    r = np.ones_like(a)
    small = a < 1.0
    s = a[small]
    r[small] = s * _horner(_ERF_TAYLOR, s * s)
    mid = ~small & (a < 1.0 / _ERF_LO)
    u = a[mid]
    t = (1.0 / u - _ERF_LO) * (2.0 / (_ERF_HI - _ERF_LO)) - 1.0
    r[mid] = 1.0 - np.exp(-u * u) * _horner(_ERF_POLY, t)
    np.copysign(r, x, out=r)
    return r


def _erf_f32(x: np.ndarray, y: np.ndarray) -> None:
    """y = erf(x) for float32 x and y of the same (cache-sized) length."""
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.multiply(x, x)
        p = _horner(ERF_TANH32, t)
        np.multiply(x, p, out=y)
    np.tanh(y, out=y)


def erf(x: np.ndarray, y: np.ndarray) -> None:
    """y = erf(x): float32 within 6 ulp, float64 ~1e-15 (float16 via float32)."""
    xf, yf = x.reshape(-1), view(y, (-1,))
    wide = x.dtype == np.float64
    for i in range(0, xf.size, ERF_CHUNK):
        xs, ys = xf[i:i + ERF_CHUNK], yf[i:i + ERF_CHUNK]
        if wide:
            np.copyto(ys, _erf_f64(xs), casting="unsafe")
        elif xs.dtype == np.float32 and ys.dtype == np.float32:
            _erf_f32(xs, ys)
        else:
            r = np.empty(xs.shape, np.float32)
            _erf_f32(xs.astype(np.float32), r)
            np.copyto(ys, r, casting="unsafe")


# --------------------------------------------------------- activations
def _sigmoid(x, y, attrs):
    with np.errstate(over="ignore"):
        np.negative(x, out=y)
        np.exp(y, out=y)
    np.add(y, scalar_like(y, 1), out=y)
    np.reciprocal(y, out=y)


def _leaky(x, y, alpha):
    np.multiply(x, scalar_like(y, alpha), out=y)
    (np.maximum if alpha <= 1 else np.minimum)(x, y, out=y)


def _elu_like(x, y, alpha, gamma=1.0):
    """y = gamma * (x if x > 0 else alpha * (exp(x) - 1))."""
    np.minimum(x, scalar_like(y, 0), out=y)
    np.expm1(y, out=y)
    np.multiply(y, scalar_like(y, alpha), out=y)
    np.copyto(y, x, where=x > 0)
    if gamma != 1.0:
        np.multiply(y, scalar_like(y, gamma), out=y)


def _softplus(x, y, attrs):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), without overflow."""
    np.abs(x, out=y)
    np.negative(y, out=y)
    np.exp(y, out=y)
    np.log1p(y, out=y)
    np.add(y, x, out=y, where=x > 0)


def _hard_sigmoid(x, y, alpha, beta):
    np.multiply(x, scalar_like(y, alpha), out=y)
    np.add(y, scalar_like(y, beta), out=y)
    np.clip(y, scalar_like(y, 0), scalar_like(y, 1), out=y)


def _softsign(x, y, attrs):
    np.abs(x, out=y)
    np.add(y, scalar_like(y, 1), out=y)
    np.divide(x, y, out=y)


def _hard_swish(x, y, attrs):
    _hard_sigmoid(x, y, 1.0 / 6, 0.5)
    np.multiply(y, x, out=y)


def _shrink(x, y, attrs):
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    y[...] = 0
    np.add(x, scalar_like(y, bias), out=y, where=x < -lambd, casting="unsafe")
    np.subtract(x, scalar_like(y, bias), out=y, where=x > lambd, casting="unsafe")


def _ufunc(f) -> Callable:
    return lambda x, y, attrs: f(x, out=y)


def _round(x, y, attrs):
    np.round(x, out=y)  # round half to even, as ONNX Round


def _thresholded_relu(x, y, attrs):
    y[...] = 0
    alpha = float(attrs.get("alpha", 1.0))
    np.copyto(y, x, where=x > alpha)


def _mish(x, y, attrs):
    _softplus(x, y, attrs)
    np.tanh(y, out=y)
    np.multiply(y, x, out=y)


def _celu(x, y, attrs):
    alpha = float(attrs.get("alpha", 1.0))
    np.divide(x, scalar_like(y, alpha), out=y)
    np.minimum(y, scalar_like(y, 0), out=y)
    np.expm1(y, out=y)
    np.multiply(y, scalar_like(y, alpha), out=y)
    np.copyto(y, x, where=x > 0)


_SELU_A, _SELU_G = 1.67326319217681884765625, 1.05070102214813232421875

#: (name, since, fn(x, y, attrs))
UNARY = [
    ("Relu", 1, lambda x, y, a: relu(x, y)),
    ("Sigmoid", 1, _sigmoid),
    ("Tanh", 1, _ufunc(np.tanh)),
    ("Exp", 1, _ufunc(np.exp)),
    ("Log", 1, _ufunc(np.log)),
    ("Sqrt", 1, _ufunc(np.sqrt)),
    ("Neg", 1, _ufunc(np.negative)),
    ("Abs", 1, _ufunc(np.abs)),
    ("Reciprocal", 1, _ufunc(np.reciprocal)),
    ("Floor", 1, _ufunc(np.floor)),
    ("Ceil", 1, _ufunc(np.ceil)),
    ("Erf", 9, lambda x, y, a: erf(x, y)),
    ("Sign", 9, _ufunc(np.sign)),
    ("Not", 1, _ufunc(np.logical_not)),
    ("BitwiseNot", 18, _ufunc(np.invert)),
    ("Sin", 7, _ufunc(np.sin)),
    ("Cos", 7, _ufunc(np.cos)),
    ("Tan", 7, _ufunc(np.tan)),
    ("Asin", 7, _ufunc(np.arcsin)),
    ("Acos", 7, _ufunc(np.arccos)),
    ("Atan", 7, _ufunc(np.arctan)),
    ("Sinh", 9, _ufunc(np.sinh)),
    ("Cosh", 9, _ufunc(np.cosh)),
    ("Asinh", 9, _ufunc(np.arcsinh)),
    ("Acosh", 9, _ufunc(np.arccosh)),
    ("Atanh", 9, _ufunc(np.arctanh)),
    ("Round", 11, _round),
    ("IsNaN", 9, _ufunc(np.isnan)),
    ("LeakyRelu", 1, lambda x, y, a: _leaky(x, y, float(a.get("alpha", 0.01)))),
    ("Elu", 1, lambda x, y, a: _elu_like(x, y, float(a.get("alpha", 1.0)))),
    ("Selu", 1, lambda x, y, a: _elu_like(x, y, float(a.get("alpha", _SELU_A)),
                                          float(a.get("gamma", _SELU_G)))),
    ("Celu", 12, _celu),
    ("HardSigmoid", 1, lambda x, y, a: _hard_sigmoid(x, y, float(a.get("alpha", 0.2)),
                                                     float(a.get("beta", 0.5)))),
    ("Softplus", 1, _softplus),
    ("Softsign", 1, _softsign),
    ("HardSwish", 14, _hard_swish),
    ("Mish", 18, _mish),
    ("ThresholdedRelu", 10, _thresholded_relu),
    ("Shrink", 9, _shrink),
]


def _register(name: str, since: int, fn: Callable) -> None:
    def kernel(ins, outs, attrs, tiling, ws, fn=fn):
        fn(ins[0], outs[0], attrs)

    cls = type(name, (), {"kernel": staticmethod(kernel), "__doc__": f"Elementwise {name}."})
    NUMPY.kernel(name, since)(cls)


for _entry in UNARY:
    _register(*_entry)


@NUMPY.kernel("IsInf", 10)
class IsInf:
    """IsInf: ``detect_positive`` / ``detect_negative`` pick the infinities found."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        pos, neg = int(attrs.get("detect_positive", 1)), int(attrs.get("detect_negative", 1))
        if pos and neg:
            np.isinf(x, out=y)
        elif pos:
            np.isposinf(x, out=y)
        elif neg:
            np.isneginf(x, out=y)
        else:
            y[...] = False


def _clip(x, y, lo, hi) -> None:
    if lo is None and hi is None:
        np.copyto(y, x)
    elif hi is None:
        np.maximum(x, lo, out=y)
    elif lo is None:
        np.minimum(x, hi, out=y)
    else:
        np.minimum(np.maximum(x, lo, out=y), hi, out=y)


@NUMPY.kernel("Clip", 6)
class Clip6:
    """Clip with ``min``/``max`` attributes."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        lo, hi = attrs.get("min"), attrs.get("max")
        _clip(ins[0], y, None if lo is None else scalar_like(y, lo),
              None if hi is None else scalar_like(y, hi))


@NUMPY.kernel("Clip", 11)
class Clip11:
    """Clip with optional scalar ``min``/``max`` inputs."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else None
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else None
        y = outs[0]
        _clip(ins[0], y, None if lo is None else lo.reshape(()).astype(y.dtype),
              None if hi is None else hi.reshape(()).astype(y.dtype))

"""Unary elementwise ops: math functions and activations (table-driven registration).

Every entry is ``(name, since, fn)`` where ``fn(x, y, attrs)`` writes ``y`` in place.
Clip (attrs since 6, optional inputs since 11) is registered by hand.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numpy.polynomial import chebyshev as _cheb

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import relu, view
from aircc.executor.kernels.registry import InferContext, op


def _same(ctx: InferContext) -> list[TensorType]:
    return [ctx.input_type(0)]


def _bool_out(ctx: InferContext) -> list[TensorType]:
    return [TensorType("bool", ctx.input_type(0).shape)]


def _c(y: np.ndarray, v: float):
    """A scalar in ``y``'s dtype (keeps float32 math in float32)."""
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
_ERF_CHUNK = 65536
_ERF_TANH32 = [np.float32(c) for c in (        # high order first, in t = x^2
    1.351662035631307e-07, -5.563642389461165e-06, 8.707454981049523e-05,
    -6.185260717757046e-04, -1.929665741045028e-04, 1.027693822979927e-01,
    1.128379225730896e+00)]


def _f64_tables():
    taylor = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
              for n in range(19)]
    lo, hi = 1.0 / 6.0, 1.0

    def erfcx(u):
        return np.array([math.erfc(1 / v) * math.exp(1 / (v * v))
                         for v in (np.atleast_1d(u) + 1) * (hi - lo) / 2 + lo])

    poly = _cheb.cheb2poly(_cheb.chebinterpolate(erfcx, 22))
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
        p = _horner(_ERF_TANH32, t)
        np.multiply(x, p, out=y)
    np.tanh(y, out=y)


def erf(x: np.ndarray, y: np.ndarray) -> None:
    """y = erf(x): float32 within 6 ulp, float64 ~1e-15 (float16 via float32)."""
    xf, yf = x.reshape(-1), view(y, (-1,))
    wide = x.dtype == np.float64
    for i in range(0, xf.size, _ERF_CHUNK):
        xs, ys = xf[i:i + _ERF_CHUNK], yf[i:i + _ERF_CHUNK]
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
    np.add(y, _c(y, 1), out=y)
    np.reciprocal(y, out=y)


def _leaky(x, y, alpha):
    np.multiply(x, _c(y, alpha), out=y)
    (np.maximum if alpha <= 1 else np.minimum)(x, y, out=y)


def _elu_like(x, y, alpha, gamma=1.0):
    """y = gamma * (x if x > 0 else alpha * (exp(x) - 1))."""
    np.minimum(x, _c(y, 0), out=y)
    np.expm1(y, out=y)
    np.multiply(y, _c(y, alpha), out=y)
    np.copyto(y, x, where=x > 0)
    if gamma != 1.0:
        np.multiply(y, _c(y, gamma), out=y)


def _softplus(x, y, attrs):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), without overflow."""
    np.abs(x, out=y)
    np.negative(y, out=y)
    np.exp(y, out=y)
    np.log1p(y, out=y)
    np.add(y, x, out=y, where=x > 0)


def _hard_sigmoid(x, y, alpha, beta):
    np.multiply(x, _c(y, alpha), out=y)
    np.add(y, _c(y, beta), out=y)
    np.clip(y, _c(y, 0), _c(y, 1), out=y)


def _softsign(x, y, attrs):
    np.abs(x, out=y)
    np.add(y, _c(y, 1), out=y)
    np.divide(x, y, out=y)


def _hard_swish(x, y, attrs):
    _hard_sigmoid(x, y, 1.0 / 6, 0.5)
    np.multiply(y, x, out=y)


def _shrink(x, y, attrs):
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    y[...] = 0
    np.add(x, _c(y, bias), out=y, where=x < -lambd, casting="unsafe")
    np.subtract(x, _c(y, bias), out=y, where=x > lambd, casting="unsafe")


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
    np.divide(x, _c(y, alpha), out=y)
    np.minimum(y, _c(y, 0), out=y)
    np.expm1(y, out=y)
    np.multiply(y, _c(y, alpha), out=y)
    np.copyto(y, x, where=x > 0)


_SELU_A, _SELU_G = 1.67326319217681884765625, 1.05070102214813232421875

#: (name, since, fn(x, y, attrs), shape rule)
UNARY = [
    ("Relu", 1, lambda x, y, a: relu(x, y), _same),
    ("Sigmoid", 1, _sigmoid, _same),
    ("Tanh", 1, _ufunc(np.tanh), _same),
    ("Exp", 1, _ufunc(np.exp), _same),
    ("Log", 1, _ufunc(np.log), _same),
    ("Sqrt", 1, _ufunc(np.sqrt), _same),
    ("Neg", 1, _ufunc(np.negative), _same),
    ("Abs", 1, _ufunc(np.abs), _same),
    ("Reciprocal", 1, _ufunc(np.reciprocal), _same),
    ("Floor", 1, _ufunc(np.floor), _same),
    ("Ceil", 1, _ufunc(np.ceil), _same),
    ("Erf", 9, lambda x, y, a: erf(x, y), _same),
    ("Sign", 9, _ufunc(np.sign), _same),
    ("Not", 1, _ufunc(np.logical_not), _same),
    ("Sin", 7, _ufunc(np.sin), _same),
    ("Cos", 7, _ufunc(np.cos), _same),
    ("Tan", 7, _ufunc(np.tan), _same),
    ("Asin", 7, _ufunc(np.arcsin), _same),
    ("Acos", 7, _ufunc(np.arccos), _same),
    ("Atan", 7, _ufunc(np.arctan), _same),
    ("Sinh", 9, _ufunc(np.sinh), _same),
    ("Cosh", 9, _ufunc(np.cosh), _same),
    ("Asinh", 9, _ufunc(np.arcsinh), _same),
    ("Acosh", 9, _ufunc(np.arccosh), _same),
    ("Atanh", 9, _ufunc(np.arctanh), _same),
    ("Round", 11, _round, _same),
    ("IsNaN", 9, _ufunc(np.isnan), _bool_out),
    ("LeakyRelu", 1, lambda x, y, a: _leaky(x, y, float(a.get("alpha", 0.01))), _same),
    ("Elu", 1, lambda x, y, a: _elu_like(x, y, float(a.get("alpha", 1.0))), _same),
    ("Selu", 1, lambda x, y, a: _elu_like(x, y, float(a.get("alpha", _SELU_A)),
                                          float(a.get("gamma", _SELU_G))), _same),
    ("Celu", 12, _celu, _same),
    ("HardSigmoid", 1, lambda x, y, a: _hard_sigmoid(x, y, float(a.get("alpha", 0.2)),
                                                     float(a.get("beta", 0.5))), _same),
    ("Softplus", 1, _softplus, _same),
    ("Softsign", 1, _softsign, _same),
    ("HardSwish", 14, _hard_swish, _same),
    ("Mish", 18, _mish, _same),
    ("ThresholdedRelu", 10, _thresholded_relu, _same),
    ("Shrink", 9, _shrink, _same),
]


def _register(name: str, since: int, fn: Callable, rule: Callable) -> None:
    def kernel(ins, outs, attrs, tiling, ws, fn=fn):
        fn(ins[0], outs[0], attrs)

    cls = type(name, (), {"infer": staticmethod(rule), "kernel": staticmethod(kernel),
                          "__doc__": f"Elementwise {name}."})
    op(name, since=since)(cls)


for _entry in UNARY:
    _register(*_entry)


@op("IsInf", since=10)
class IsInf:
    infer = staticmethod(_bool_out)

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


@op("Clip", since=6)
class Clip6:
    """Clip with ``min``/``max`` attributes."""

    infer = staticmethod(_same)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        lo, hi = attrs.get("min"), attrs.get("max")
        _clip(ins[0], y, None if lo is None else _c(y, lo), None if hi is None else _c(y, hi))


@op("Clip", since=11)
class Clip11:
    """Clip with optional scalar ``min``/``max`` inputs."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        for i in (1, 2):
            if ctx.has_input(i):
                s = ctx.input_type(i).shape
                if s is not None and (len(s) > 1 or (len(s) == 1 and s[0] != 1)):
                    ctx.fail(f"input {i} must be a scalar, got shape {s}")
        return [ctx.input_type(0)]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else None
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else None
        y = outs[0]
        _clip(ins[0], y, None if lo is None else lo.reshape(()).astype(y.dtype),
              None if hi is None else hi.reshape(()).astype(y.dtype))

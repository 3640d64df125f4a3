"""Kernel tests, unary elementwise ops and activations: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import math

import numpy as np
import pytest
from aircc.executor.kernels import elementwise, gelu
from aircc.ops import Trait, op_def
from aircc.ops.defs import elementwise as elementwise_defs
from kernel_harness import BACKEND, RNG, check, ints, rand

_DOMAIN = {"Log": (0.1, 5), "Sqrt": (0, 5), "Reciprocal": (0.5, 3), "Acosh": (1, 4),
           "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99), "Atanh": (-0.99, 0.99),
           "Erf": (-5, 5), "Gelu": (-5, 5), "Exp": (-10, 10)}
_ATTRS = {"LeakyRelu": {"alpha": 0.2}, "Elu": {"alpha": 0.7}, "HardSigmoid": {"alpha": 0.3},
          "Celu": {"alpha": 1.5}, "ThresholdedRelu": {"alpha": 0.3}, "Shrink": {"lambd": 0.4,
                                                                                  "bias": 0.1}}


@pytest.mark.parametrize("name,since", [(e[0], e[1]) for e in elementwise.UNARY])
def test_unary(name, since):
    lo, hi = _DOMAIN.get(name, (-3, 3))
    x = rand(3, 4, 5, lo=lo, hi=hi)
    if name == "Not":
        x = RNG.integers(0, 2, size=(3, 4)).astype(bool)
    elif name == "BitwiseNot":                  # integers only: both signs, and unsigned
        check(name, [RNG.integers(-100, 100, size=(3, 4)).astype(np.int32)], opset=since)
        check(name, [RNG.integers(0, 255, size=(3, 4)).astype(np.uint8)], opset=since)
        return
    elif name == "IsNaN":
        x[0, 0, :2] = np.nan
    elif name == "Round":
        x[0, 0, :4] = [0.5, 1.5, -2.5, 2.4999]
    opset = max(since, 13)
    check(name, [x], _ATTRS.get(name), opset=opset, rtol=2e-6 if name != "Gelu" else 1e-5)
    check(name, [x.astype(np.float64) if x.dtype != bool else x], _ATTRS.get(name), opset=opset,
          rtol=1e-6, atol=1e-7)


def test_relu_against_shared_zeros():
    """Relu on tensors past RELU_ZEROS_MIN compares with a read-only view of zeros (numpy's
    SIMD maximum): same values as max(x, 0), NaN and -0 kept as numpy keeps them, strided
    inputs, in place, and the zeros block is never written."""
    from aircc.executor.kernels.epilogue import RELU_ZEROS_MIN, relu
    from aircc.executor.kernels.scratch import zeros

    x = rand(3, 40, 70, lo=-2, hi=2)
    assert x.size >= RELU_ZEROS_MIN
    x[0, 0, :3] = [np.nan, -0.0, np.inf]
    y = np.empty_like(x)
    relu(x, y)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    strided = x[:, :, ::2]
    out = np.empty(strided.shape, np.float32)
    relu(strided, out)
    np.testing.assert_array_equal(out, np.maximum(strided, 0))
    z = x.copy()
    relu(z, z)
    np.testing.assert_array_equal(z, np.maximum(x, 0))
    zv = zeros((5, 7), np.float32)
    assert zv.shape == (5, 7) and not zv.flags.writeable and not zv.any()
    with pytest.raises(ValueError):
        zv[0, 0] = 1
    big = zeros((300, 300), np.float32)                 # grows the block, still all zeros
    assert not big.any() and not zeros((5, 7), np.float32).any()


def test_unary_extras():
    check("LeakyRelu", [rand(4, 5)], {"alpha": 1.5}, opset=6)
    check("Gelu", [rand(4, 5, lo=-4, hi=4)], {"approximate": "tanh"}, opset=20)
    check("Relu", [ints(3, 4, dtype=np.int32)], opset=14)
    check("Neg", [ints(3, 4)], opset=13)
    check("Abs", [ints(3, 4, dtype=np.int8)], opset=13)
    check("Sign", [ints(3, 4)], opset=13)
    x = np.array([np.inf, -np.inf, 1.0, np.nan], dtype=np.float32)
    check("IsInf", [x], opset=10)
    check("IsInf", [x], {"detect_negative": 0}, opset=10)
    check("IsInf", [x], {"detect_positive": 0}, opset=10)
    check("Sigmoid", [rand(5, lo=-100, hi=100)], opset=6)
    check("Softplus", [rand(5, lo=-100, hi=100)], opset=1)


def test_erf_accuracy():
    """float32: within 4 ulp (tanh of a polynomial, in float32), saturating to +-1 for
    large |x| with no clamp; float64: within 1e-14 relative."""
    xs = np.concatenate([np.linspace(-6, 6, 200001), np.geomspace(1e-30, 6, 2001),
                         -np.geomspace(1e-30, 6, 2001), np.geomspace(3.9, 1e30, 2001),
                         -np.geomspace(3.9, 1e30, 2001), [0.0, np.inf, -np.inf]])
    for dt in (np.float32, np.float64):
        x = xs.astype(dt)
        y = np.empty_like(x)
        elementwise.erf(x, y)
        r = np.array([math.erf(float(v)) for v in x])
        if dt == np.float32:
            ulp = np.abs(y.astype(np.float64) - r) / np.spacing(np.abs(r).astype(np.float32))
            assert ulp.max() <= 4, ulp.max()
        else:
            err = np.abs(y - r) / np.maximum(np.abs(r), 1e-300)
            assert err.max() < 1e-14, err.max()
    y = np.empty(3, np.float32)
    elementwise.erf(np.array([np.nan, -0.0, 1e-3], np.float32), y)
    assert np.isnan(y[0]) and y[1] == 0 and np.signbit(y[1]) and abs(y[2] - math.erf(1e-3)) < 1e-9


def test_gelu_float32_accuracy():
    """Gelu (exact) in float32 is x / (1 + 2^(-x Q(x^2) log2 e)): within 4.2 ulp of x Phi(x)
    where the result is not tiny, within 3e-7 absolute in the negative tail (where
    1 + erf would cancel), x for large x and -0 for very negative x, NaN stays NaN."""
    xs = np.concatenate([np.linspace(-12, 12, 400001), np.geomspace(1e-30, 12, 2001),
                         -np.geomspace(1e-30, 12, 2001), [1e30, -1e30, 0.0]]).astype(np.float32)
    y = np.empty_like(xs)
    gelu.gelu(xs, y, {})
    r = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in xs.astype(np.float64)])
    err = np.abs(y.astype(np.float64) - r)
    ulp = err / np.spacing(np.abs(r).astype(np.float32))
    assert ulp[xs >= -1].max() <= 4.2, ulp[xs >= -1].max()
    assert err[xs < -1].max() <= 3e-7, err[xs < -1].max()
    assert y[-3] == np.float32(1e30) and y[-2] == 0 and np.signbit(y[-2])
    z = np.empty(2, np.float32)
    gelu.gelu(np.array([np.nan, 2.0], np.float32), z, {})
    assert np.isnan(z[0]) and abs(z[1] - 2 * 0.5 * math.erfc(-2 / math.sqrt(2))) < 1e-6


@pytest.mark.parametrize("opset", [6, 11, 13])
def test_clip(opset):
    x = rand(3, 4, lo=-2, hi=2)
    if opset == 6:
        check("Clip", [x], {"min": -0.5, "max": 0.7}, opset=6)
        check("Clip", [x], {"max": 0.7}, opset=6)
        check("Clip", [x], opset=6)
    else:
        lo, hi = np.array(-0.5, np.float32), np.array(0.7, np.float32)
        check("Clip", [x, lo, hi], opset=opset)
        check("Clip", [x, None, hi], opset=opset)
        check("Clip", [x, lo], opset=opset)
        check("Clip", [x], opset=opset)
    if opset == 13:
        check("Clip", [ints(3, 4), np.array(-2, np.int64), np.array(3, np.int64)], opset=13)


def test_every_kernel_has_a_definition_of_its_version():
    """The kernel table and the definitions list the same (op, since) pairs."""
    assert [(e[0], e[1]) for e in elementwise.UNARY] == \
        [(e[0], e[1]) for e in elementwise_defs.UNARY]
    for name, since in [(e[0], e[1]) for e in elementwise.UNARY] + [("IsInf", 10), ("Clip", 6),
                                                                     ("Clip", 11), ("Gelu", 20)]:
        d = op_def(name, since)
        assert d.native and d.since == since, (name, since, d.since)
        assert BACKEND.impl(name, since).since == since, (name, since)


_HOST = {"Neg", "Abs", "Floor", "Ceil", "Sqrt", "Not", "Sign"}


@pytest.mark.parametrize("name,since", [(e[0], e[1]) for e in elementwise.UNARY]
                         + [("IsInf", 10), ("Gelu", 20), ("Clip", 6), ("Clip", 11)])
def test_traits(name, since):
    """Every unary op, IsNaN, IsInf and Gelu apply per element (Clip is not marked);
    HOST_CAPABLE on the shape-arithmetic ones."""
    d = op_def(name, since)
    assert d.has(Trait.ELEMENTWISE) == (name != "Clip"), name
    assert d.has(Trait.HOST_CAPABLE) == (name in _HOST), name
    assert d.engine == "vector" and d.foldable and d.value_inputs == ()

"""Kernel tests, normalisations: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import math

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from kernel_harness import T, check, infer, rand, run_ours


@pytest.mark.parametrize("opset", [7, 9, 15])
def test_batchnorm(opset):
    c = 4
    inputs = [rand(2, c, 5, 6), rand(c), rand(c), rand(c), rand(c, lo=0.5, hi=2)]
    check("BatchNormalization", inputs, {"epsilon": 1e-3}, opset=opset, engine="ort")
    check("BatchNormalization", [rand(3, c)] + inputs[1:], opset=opset, engine="ort")


def test_batchnorm_training_rejected():
    ts = [T((2, 3, 4, 4))] + [T((3,))] * 4
    with pytest.raises(ShapeInferenceError):
        infer("BatchNormalization", ts, {"training_mode": 1}, opset=15)
    with pytest.raises(ShapeInferenceError):
        infer("BatchNormalization", ts, opset=9, n_out=5)


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn(size):
    check("LRN", [rand(2, 7, 4, 5)], {"size": size, "alpha": 1e-2, "beta": 0.75, "bias": 2.0},
          opset=13, engine="ort")
    check("LRN", [rand(1, 4, 3, 3)], {"size": size}, opset=1, engine="ort")


def test_lrn_even_size():
    """onnxruntime rejects even sizes and onnx's reference is wrong: check the spec formula."""
    x = rand(2, 6, 3, 3)
    size, alpha, beta, bias = 4, 0.1, 0.6, 1.5
    sq = np.zeros_like(x)
    for c in range(6):
        lo, hi = max(0, c - (size - 1) // 2), min(6, c + math.ceil((size - 1) / 2) + 1)
        sq[:, c] = (x[:, lo:hi] ** 2).sum(axis=1)
    expected = x / (bias + alpha / size * sq) ** beta
    _, (y,) = run_ours("LRN", [x], {"size": size, "alpha": alpha, "beta": beta, "bias": bias})
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis,n_out", [(-1, 1), (1, 3), (0, 2), (2, 1)])
def test_layernorm(axis, n_out):
    x = rand(2, 3, 8)
    shape = x.shape[axis:]
    check("LayerNormalization", [x, rand(*shape), rand(*shape)],
          {"axis": axis, "epsilon": 1e-5}, opset=17, n_out=n_out, rtol=1e-4, atol=1e-5)
    check("LayerNormalization", [x, rand(*shape)], {"axis": axis}, opset=17, n_out=n_out,
          rtol=1e-4, atol=1e-5)


def test_layernorm_row_statistics_by_gemm_stay_accurate():
    """float32 rows of up to GEMM_STATS_MAX take mean and variance from a GEMM: against a
    float64 reference on data far from zero (the mean is subtracted before the
    variance), with Mean and InvStdDev; longer rows take numpy's reductions."""
    from aircc.executor.kernels import norm

    rng = np.random.default_rng(14)
    for cols in (64, norm.GEMM_STATS_MAX, norm.GEMM_STATS_MAX + 1):
        x = (rng.standard_normal((2, 16, cols)) * 0.5 + 30).astype(np.float32)
        scale, bias = rand(cols, lo=0.5, hi=1.5), rand(cols)
        outs = [np.empty_like(x), np.empty((2, 16, 1), np.float32), np.empty((2, 16, 1), np.float32)]
        norm.LayerNormalization.kernel([x, scale, bias], outs, {"axis": -1, "epsilon": 1e-5}, None, None)
        x64 = x.astype(np.float64)
        mean, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
        ref = (x64 - mean) / np.sqrt(var + 1e-5) * scale + bias
        np.testing.assert_allclose(outs[0], ref, rtol=0, atol=2e-5)
        np.testing.assert_allclose(outs[1], mean, rtol=1e-6)
        np.testing.assert_allclose(outs[2], 1 / np.sqrt(var + 1e-5), rtol=1e-4)


def test_instancenorm():
    check("InstanceNormalization", [rand(2, 3, 5, 4), rand(3), rand(3)], {"epsilon": 1e-3},
          opset=6, rtol=1e-4, atol=1e-5)
    check("InstanceNormalization", [rand(2, 3, 7), rand(3), rand(3)], opset=6, rtol=1e-4,
          atol=1e-5)

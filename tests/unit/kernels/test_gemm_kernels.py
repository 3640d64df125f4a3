"""Kernel tests, gemm and matmul: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from kernel_harness import T, check, infer, ints, rand


@pytest.mark.parametrize("a,b", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)),
                                 ((3, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2)),
                                 ((1, 3, 4), (2, 4, 6)), ((2, 3, 5, 4), (4, 6))])
def test_matmul(a, b):
    check("MatMul", [rand(*a), rand(*b)], opset=13)


def test_matmul_rows_as_one_gemm_writes_into_its_output():
    """(..., M, K) @ (K, N) runs as one GEMM over every row, written in place; a strided
    output (a slice of a larger buffer) takes numpy's per-matrix path instead."""
    from aircc.executor.kernels.gemm import MatMul
    a, b = rand(2, 3, 5, 4), rand(4, 6)
    y = np.full((2, 3, 5, 6), np.nan, np.float32)
    MatMul.kernel([a, b], [y], {}, {}, None)
    np.testing.assert_allclose(y, np.matmul(a, b), rtol=1e-6)
    big = np.full((2, 3, 5, 8), np.nan, np.float32)
    MatMul.kernel([a, b], [big[..., :6]], {}, {}, None)
    np.testing.assert_allclose(big[..., :6], np.matmul(a, b), rtol=1e-6)
    assert np.isnan(big[..., 6:]).all()


def test_matmul_int():
    check("MatMul", [ints(2, 3), ints(3, 4)], opset=13)


GEMM_CASES = [
    ((3, 4), (4, 5), (5,), {}),
    ((4, 3), (4, 5), (3, 5), {"transA": 1, "alpha": 0.5, "beta": 2.0}),
    ((3, 4), (5, 4), (1, 5), {"transB": 1}),
    ((4, 3), (5, 4), (3, 1), {"transA": 1, "transB": 1, "beta": 0.0}),
    ((3, 4), (4, 5), (), {"alpha": 2.0}),
    ((3, 4), (4, 5), None, {}),
]


@pytest.mark.parametrize("a,b,c,attrs", GEMM_CASES)
def test_gemm(a, b, c, attrs):
    inputs = [rand(*a), rand(*b)] + ([] if c is None else [rand(*c)])
    check("Gemm", inputs, attrs, opset=13 if c is None else 9)


def test_matmul_symbolic():
    (t,) = infer("MatMul", [T(("B", "S", 64)), T((64, 32))])
    assert t.shape == ("B", "S", 32)
    (t,) = infer("MatMul", [T(("B", 1, "S", 8)), T((4, 8, "S"))])
    assert t.shape == ("B", 4, "S", "S")
    with pytest.raises(ShapeInferenceError):
        infer("MatMul", [T((3, 4)), T((5, 6))])

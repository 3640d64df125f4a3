"""Kernel tests, shape ops: reshapes, transposes, casts, shape reads: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from kernel_harness import T, check, infer, ints, rand, run_ours
from onnx import TensorProto

RESHAPE_CASES = [
    ((2, 3, 4), [4, 6], 0), ((2, 3, 4), [0, -1], 0), ((2, 3, 4), [-1], 0),
    ((2, 3, 4), [2, 0, 2, 2], 0), ((2, 3, 4), [1, -1, 4, 1], 0), ((2, 0, 4), [0, 4, -1], 0),
    ((2, 0, 4), [0, 4, 0], 1), ((6,), [2, 3], 1),
]


@pytest.mark.parametrize("xs,shape,allowzero", RESHAPE_CASES)
def test_reshape(xs, shape, allowzero):
    x = rand(*xs)
    check("Reshape", [x, np.array(shape, np.int64)], {"allowzero": allowzero} if allowzero
          else None, opset=14 if allowzero else 5)


def test_reshape_attr_version():
    (t,) = infer("Reshape", [T((2, 3, 4))], {"shape": [0, -1]}, opset=4)
    assert t.shape == (2, 12)
    _, (y,) = run_ours("Reshape", [rand(2, 3, 4)], {"shape": [4, -1]}, opset=1)
    assert y.shape == (4, 6)


def test_reshape_symbolic():
    def r(xs, shape, **kw):
        return infer("Reshape", [T(xs), T((len(shape),), "int64")], kw, opset=14,
                     values=[None, np.array(shape, np.int64)])[0].shape
    assert r(("N", 3, 4), [0, -1]) == ("N", 12)
    assert r(("N", 3, 4), [-1, 12]) == ("N", 12)
    assert r(("N", "S", 64), [0, 0, 4, 16]) == ("N", "S", 4, 16)
    assert r(("N", "S", 4, 16), [0, 0, -1]) == ("N", "S", 64)
    assert r(("N", "S", 8), [-1, 8])[1] == 8 and isinstance(r(("N", "S", 8), [-1, 8])[0], str)
    assert r(("N", 3, 4), [2, -1])[0] == 2
    (t,) = infer("Reshape", [T(("N", 3, 4)), T((3,), "int64")], opset=14)
    assert len(t.shape) == 3 and all(isinstance(d, str) for d in t.shape)
    with pytest.raises(ShapeInferenceError):
        r((2, 3, 4), [5, -1])
    with pytest.raises(ShapeInferenceError):
        r((2, 3, 4), [-1, -1])


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    check("Flatten", [rand(2, 3, 4)], {"axis": axis}, opset=13)


def test_flatten_symbolic():
    (t,) = infer("Flatten", [T(("N", 3, 4))])
    assert t.shape == ("N", 12)


def test_squeeze_unsqueeze():
    x = rand(1, 3, 1, 4)
    check("Squeeze", [x], opset=11)
    check("Squeeze", [x], {"axes": [0, -2]}, opset=11)
    check("Squeeze", [x, np.array([2], np.int64)], opset=13)
    check("Squeeze", [x], opset=13)
    check("Unsqueeze", [rand(3, 4)], {"axes": [0, 3]}, opset=11)
    check("Unsqueeze", [rand(3, 4)], {"axes": [-1]}, opset=11)
    check("Unsqueeze", [rand(3, 4), np.array([1, -1], np.int64)], opset=13)
    check("Unsqueeze", [np.array(5.0, np.float32), np.array([0], np.int64)], opset=13)
    with pytest.raises(ShapeInferenceError):
        infer("Squeeze", [T((2, 3))], {"axes": [0]}, opset=11)
    (t,) = infer("Unsqueeze", [T(("N", 3)), T((1,), "int64")], opset=13,
                 values=[None, np.array([0])])
    assert t.shape == (1, "N", 3)
    # no axes: a symbolic dim may be 1 at run time, so the rank is not known (AffineGrid's
    # expansion squeezes a (N, 1, 3) slice of a symbolic batch)
    for opset in (11, 13):
        (t,) = infer("Squeeze", [T(("N", 1, 3))], opset=opset)
        assert t.shape is None
        (t,) = infer("Squeeze", [T((2, 1, 3))], opset=opset)
        assert t.shape == (2, 3)


@pytest.mark.parametrize("perm", [None, [0, 2, 1, 3], [3, 1, 0, 2]])
def test_transpose(perm):
    check("Transpose", [rand(2, 3, 4, 5)], None if perm is None else {"perm": perm}, opset=13)


def test_transpose_symbolic():
    (t,) = infer("Transpose", [T(("N", 3, "H", 5))], {"perm": [0, 2, 3, 1]})
    assert t.shape == ("N", "H", 5, 3)
    (t,) = infer("Transpose", [T(("N", 3))])
    assert t.shape == (3, "N")
    with pytest.raises(ShapeInferenceError):
        infer("Transpose", [T((2, 3))], {"perm": [0, 0]})


def test_identity_dropout():
    x = rand(3, 4)
    check("Identity", [x], opset=13)
    check("Identity", [ints(3)], opset=1)
    check("Dropout", [x], {"ratio": 0.3}, opset=7, n_out=2, engine="ort", compare=[0])
    (_, mt), (_, m) = run_ours("Dropout", [x], {"ratio": 0.3}, opset=7, n_out=2)
    assert mt.dtype == "float32" and (m == 1).all()  # opset 7-9: mask has X's type
    check("Dropout", [x], opset=10, n_out=2)
    check("Dropout", [x], opset=9)
    check("Dropout", [x, np.array(0.4, np.float32)], opset=12, n_out=2)
    check("Dropout", [x, np.array(0.4, np.float32), np.array(False)], opset=13, n_out=2)
    # training mode: kept elements are scaled, dropped ones are 0
    _, (y, m) = run_ours("Dropout", [x, np.array(0.5, np.float32), np.array(True)],
                         {"seed": 3}, opset=13, n_out=2)
    np.testing.assert_allclose(y, np.where(m, x * 2, 0), rtol=1e-6)


@pytest.mark.parametrize("src,to", [(np.float32, TensorProto.INT64),
                                    (np.float32, TensorProto.INT32),
                                    (np.int64, TensorProto.FLOAT), (np.float32, TensorProto.BOOL),
                                    (np.bool_, TensorProto.FLOAT),
                                    (np.float32, TensorProto.FLOAT16),
                                    (np.float64, TensorProto.UINT8),
                                    (np.int32, TensorProto.INT8)])
def test_cast(src, to):
    x = (rand(3, 5, lo=-3, hi=3) * 10)
    if src == np.float64 or to == TensorProto.UINT8:
        x = np.abs(x)
    x = x.astype(src)
    check("Cast", [x], {"to": to}, opset=13)


def test_cast_versions():
    (t,) = infer("Cast", [T((2,))], {"to": "INT64"}, opset=1)
    assert t.dtype == "int64"
    check("Cast", [rand(4)], {"to": TensorProto.DOUBLE}, opset=6)
    check("CastLike", [rand(4) * 10, ints(1)], opset=15)


def test_shape_size():
    x = rand(2, 3, 4, 5)
    check("Shape", [x], opset=13)
    check("Shape", [x], {"start": 1}, opset=15)
    check("Shape", [x], {"start": -3, "end": -1}, opset=15)
    check("Shape", [x], {"start": 3, "end": 1}, opset=15)
    check("Shape", [x], {"end": 10}, opset=15)
    check("Size", [x], opset=13)
    check("Size", [np.array(1.0, np.float32)], opset=13)

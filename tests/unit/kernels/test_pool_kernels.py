"""Kernel tests, pools: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from kernel_harness import BACKEND, TARGET, T, check, infer, ints, rand

POOL_CASES = [
    ((1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 11), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                      "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 10, 10), {"kernel_shape": [4, 4], "strides": [3, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "auto_pad": "VALID"}),
    ((1, 2, 7, 9), {"kernel_shape": [1, 3], "strides": [1, 2]}),
    ((1, 2, 9, 7), {"kernel_shape": [3, 1], "pads": [1, 0, 1, 0]}),
    ((1, 2, 3, 4), {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),    # no tap covers every row
    # stride 1, rows as long as the input's: the column pass runs over the flattened rows
    ((2, 3, 6, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 2, 5, 9), {"kernel_shape": [2, 4], "pads": [0, 1, 1, 2]}),
    ((1, 2, 5, 6), {"kernel_shape": [1, 3], "pads": [0, 0, 0, 2]}),
    ((1, 2, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]}),  # rows 2x
    ((1, 2, 11, 11), {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 0, 0]}),
    ((2, 3, 20), {"kernel_shape": [4], "strides": [2], "pads": [1, 2]}),
    ((1, 2, 6, 7, 5), {"kernel_shape": [2, 3, 2], "pads": [0, 1, 1, 1, 1, 0]}),
]


@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_maxpool(xs, attrs):
    check("MaxPool", [rand(*xs)], attrs, opset=12, engine="ort")


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_2d_pools_are_separable_unless_dilated(op_type):
    impl = BACKEND.impl(op_type, 12)
    x = T((1, 4, 12, 12))
    t = impl.tile([x], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, TARGET)
    assert t["mode"] == "separable"
    assert t["row_taps"] == [[1, 6, 1], [0, 6, 0], [0, 6, 1]]   # [first out, end, first in]
    assert impl.tile([x], {"kernel_shape": [3, 3], "dilations": [2, 2]}, TARGET)["mode"] == "phase"


def test_maxpool_dilations_and_ints():
    attrs = {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]}
    check("MaxPool", [rand(1, 2, 9, 9)], attrs, opset=12, engine="ort")
    check("MaxPool", [rand(1, 2, 9, 9)], {**attrs, "ceil_mode": 1, "strides": [2, 2]},
          opset=12, engine="ort")
    check("MaxPool", [ints(1, 2, 6, 6, dtype=np.int8)], {"kernel_shape": [3, 3],
          "pads": [1, 1, 1, 1]}, opset=12, engine="ort")
    check("MaxPool", [rand(1, 2, 8, 8)], {"kernel_shape": [3, 3], "strides": [2, 2]}, opset=8)


def test_maxpool_indices_rejected():
    with pytest.raises(ShapeInferenceError):
        infer("MaxPool", [T((1, 2, 4, 4))], {"kernel_shape": [2, 2]}, opset=12, n_out=2)


@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_avgpool(xs, attrs, cip):
    check("AveragePool", [rand(*xs)], {**attrs, "count_include_pad": cip}, opset=11,
          engine="ort")


def test_avgpool_versions():
    check("AveragePool", [rand(1, 2, 9, 9)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
          opset=7)
    check("AveragePool", [rand(1, 2, 9, 9)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
          "dilations": [2, 2], "count_include_pad": 0}, opset=19, engine="ort")


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("xs", [(2, 3, 5, 4), (1, 4, 7), (1, 2, 3, 4, 5)])
def test_global_pool(op_type, xs):
    check(op_type, [rand(*xs)], opset=9, engine="ort")

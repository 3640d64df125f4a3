"""Kernel tests, constant builders: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
from kernel_harness import T, check, infer, ints, rand
from onnx import numpy_helper


def test_constant():
    check("Constant", [], {"value": numpy_helper.from_array(rand(2, 3))}, opset=13)
    check("Constant", [], {"value_float": 2.5}, opset=13)
    check("Constant", [], {"value_floats": [1.0, 2.0]}, opset=13)
    check("Constant", [], {"value_int": 7}, opset=13)
    check("Constant", [], {"value_ints": [1, 2, 3]}, opset=13)
    check("Constant", [], {"value": numpy_helper.from_array(ints(4))}, opset=9)


def test_constant_of_shape():
    check("ConstantOfShape", [np.array([2, 3], np.int64)], opset=9)
    check("ConstantOfShape", [np.array([4], np.int64)],
          {"value": numpy_helper.from_array(np.array([7], np.int64))}, opset=9)
    check("ConstantOfShape", [np.array([2, 0], np.int64)],
          {"value": numpy_helper.from_array(np.array([1.5], np.float16))}, opset=9)
    (t,) = infer("ConstantOfShape", [T((3,), "int64")], opset=9)
    assert len(t.shape) == 3 and t.dtype == "float32"

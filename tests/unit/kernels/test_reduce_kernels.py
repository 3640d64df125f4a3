"""Kernel tests, reductions and arg-reductions: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.ops.defs.reduce import AXES_INPUT_SINCE, REDUCE_OPS
from kernel_harness import T, check, infer, ints, rand

_RED_AXES = [None, [1], [0, 2], [-1]]


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", _RED_AXES)
@pytest.mark.parametrize("name", list(REDUCE_OPS))
def test_reduce(name, axes, keepdims):
    x = rand(2, 3, 4, lo=0.2, hi=1.5) if name in ("ReduceLogSum", "ReduceProd") else rand(2, 3, 4)
    attrs = {"keepdims": keepdims}
    # axes as attribute (opset 11 everywhere)
    check(name, [x], {**attrs, **({} if axes is None else {"axes": axes})}, opset=11,
          rtol=1e-5, atol=1e-6)
    # axes as input
    since = AXES_INPUT_SINCE[name]
    inputs = [x] if axes is None else [x, np.array(axes, np.int64)]
    check(name, inputs, attrs, opset=since, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_reduce_noop_and_unknown_axes(name):
    since = AXES_INPUT_SINCE[name]
    check(name, [rand(2, 3)], {"noop_with_empty_axes": 1}, opset=since)
    check(name, [rand(2, 3), np.zeros(0, np.int64)], {"noop_with_empty_axes": 1}, opset=since)
    check(name, [rand(2, 3), np.zeros(0, np.int64)], {}, opset=since)
    (t,) = infer(name, [T((2, 3, 4)), T((2,), "int64")], {"keepdims": 0}, opset=since)
    assert len(t.shape) == 1 and isinstance(t.shape[0], str)
    (t,) = infer(name, [T(("N", 3, 4)), T((1,), "int64")], {}, opset=since,
                 values=[None, np.array([1])])
    assert t.shape == ("N", 1, 4)


@pytest.mark.parametrize("name", ["ArgMax", "ArgMin"])
def test_argmax(name):
    x = np.round(rand(3, 4, 5) * 2)  # ties
    check(name, [x], {"axis": 1}, opset=11)
    check(name, [x], {"axis": -1, "keepdims": 0}, opset=11)
    check(name, [x], opset=1)
    check(name, [x], {"axis": 2, "select_last_index": 1}, opset=12)
    check(name, [ints(4, 6)], {"axis": 1, "keepdims": 0, "select_last_index": 1}, opset=13)

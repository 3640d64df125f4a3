"""Kernel tests, topk, cumsum, onehot, trilu, hardmax: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from kernel_harness import check, ints, rand


@pytest.mark.parametrize("largest", [0, 1])
def test_topk(largest):
    x = np.round(rand(3, 7, 4) * 3)  # ties
    check("TopK", [x, np.array([3], np.int64)], {"axis": 1, "largest": largest}, opset=11,
          n_out=2)
    check("TopK", [ints(3, 6), np.array([6], np.int64)], {"largest": largest}, opset=11,
          n_out=2)
    if largest:
        check("TopK", [x], {"k": 2}, opset=1, n_out=2)
        check("TopK", [x, np.array([2], np.int64)], {"axis": 0}, opset=10, n_out=2)


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(exclusive, reverse):
    x = rand(3, 4, 5)
    for axis in (0, -1):
        check("CumSum", [x, np.array(axis, np.int64)],
              {"exclusive": exclusive, "reverse": reverse}, opset=14)
    check("CumSum", [ints(6), np.array(0, np.int32)],
          {"exclusive": exclusive, "reverse": reverse}, opset=11)


def test_onehot_trilu_hardmax():
    idx = np.array([[0, 2, -1], [1, 4, 3]], np.int64)
    vals = np.array([0.5, 2.0], np.float32)
    check("OneHot", [idx, np.array(5, np.int64), vals], opset=11)
    check("OneHot", [idx, np.array([5], np.int64), np.array([0, 1], np.int64)], {"axis": 0},
          opset=11, engine="ort")
    check("OneHot", [np.abs(idx).astype(np.float32), np.array(5.0, np.float32), vals],
          {"axis": 1}, opset=9, engine="ort")
    x = rand(2, 4, 5)
    for k in (None, 0, 1, -2, 6):
        for upper in (0, 1):
            inputs = [x] if k is None else [x, np.array(k, np.int64)]
            check("Trilu", inputs, {"upper": upper}, opset=14)
    check("Hardmax", [np.round(rand(3, 4, 5))], opset=13)
    check("Hardmax", [rand(3, 4, 5)], {"axis": 1}, opset=13)


def test_trilu_of_a_bool_mask():
    """A causal mask as exporters write it: ``torch.triu`` of a bool tensor."""
    mask = np.ones((2, 5, 6), bool)
    for k in (None, 1, -1):
        for upper in (0, 1):
            inputs = [mask] if k is None else [mask, np.array(k, np.int64)]
            check("Trilu", inputs, {"upper": upper}, opset=14)

"""Kernels give IEEE results where ONNX wants them (log(0) = -inf, sqrt(-1) = NaN, 0 / 0 =
NaN), in both modes and in constant folding, without numpy's floating-point warnings: a
passing run of a model whose data meets them is not a page of RuntimeWarnings."""
from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from graphs import const, model, tensor


def _model():
    """Log, Sqrt of its result, Div by a constant holding a zero; and a folded Log(0)."""
    return model([helper.make_node("Log", ["x"], ["l"]), helper.make_node("Sqrt", ["l"], ["s"]),
                  helper.make_node("Div", ["s", "d"], ["q"]), helper.make_node("Log", ["z"], ["lz"]),
                  helper.make_node("Add", ["q", "lz"], ["y"])],
                 [tensor("x", [4])], [tensor("y", [4])],
                 [const("d", np.array([0, 1, 1, 0], np.float32)),
                  const("z", np.array([1, 1, 0, 1], np.float32))])


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_ieee_results_without_numpy_warnings(mode, device):
    m, x = _model(), np.array([0, 1, -1, 4], np.float32)
    before = np.geterr()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with aircc.load(aircc.compile(m, mode=mode, target="cpu-avx2"), device=device) as loaded:
            got = loaded.run({"x": x})["y"]
    np.testing.assert_array_equal(got, want)          # NaN, -inf and NaN where onnxruntime has them
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert np.geterr() == before                      # the caller's thread keeps its own state

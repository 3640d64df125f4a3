"""Unknown dims as exporters write them: ``dim_value: -1`` and several dims named ``'?'``.

Each is its own unknown dim, as onnxruntime reads them: a ``-1`` used to pass the compile
and fail the load (``shape[0] must be an int or a str, got int -1``), and two ``'?'`` dims
were tied together as one symbol, so a valid feed was refused (``dim '?' is 48 in input
'x' but 192 in input 'x'``).  A named dim (``batch``, torch's ``s0``) still ties the dims
that share its name.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from aircc.errors import InputError
from graphs import model, tensor


def relu_sum(x_dims, y_dims=None, opset=13):
    """x -> Relu -> ReduceSum over the last axis (keepdims) -> y, plus x2 -> Relu -> z."""
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("ReduceSum", ["r", "axes"], ["y"], keepdims=1),
               helper.make_node("Relu", ["x2"], ["z"])],
              [tensor("x", x_dims), tensor("x2", ["?", "?"])],
              [tensor("y", y_dims or [d if d != x_dims[-1] else 1 for d in x_dims]), tensor("z", ["?", "?"])],
              [helper.make_tensor("axes", 7, [1], [-1])], opset=opset)
    return m


def with_minus_one(m, index: int = 0):
    """The model with input 0's dim ``index`` (and the outputs' same dim) as ``dim_value: -1``."""
    for vi in (m.graph.input[0], m.graph.output[0]):
        vi.type.tensor_type.shape.dim[index].dim_value = -1
    return m


def _check(m, feeds, mode, device, input_shapes=None):
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    compiled = aircc.compile(m, mode=mode, input_shapes=input_shapes)
    with aircc.load(compiled, device=device) as loaded:
        got = loaded.run(feeds)
    for name, w in zip(("y", "z"), want):
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5)
    return compiled


def _feeds(rng, x_shape, x2_shape=(5, 7)):
    return {"x": rng.standard_normal(x_shape).astype(np.float32),
            "x2": rng.standard_normal(x2_shape).astype(np.float32)}


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_a_dim_value_of_minus_one_is_unknown(mode, device):
    m = with_minus_one(relu_sum([1, 3, 4, 6]))
    feeds = _feeds(np.random.default_rng(0), (2, 3, 4, 6))
    shapes = {"x": [2, 3, 4, 6], "x2": [5, 7]} if mode == "static" else None
    compiled = _check(m, feeds, mode, device, shapes)
    assert compiled.report.mode == mode


def test_minus_one_in_input_shapes_is_unknown_too(device):
    m = relu_sum(["batch", 3, 4, 6])
    compiled = _check(m, _feeds(np.random.default_rng(1), (3, 3, 4, 6)), "dynamic", device,
                      {"x": [-1, 3, 4, 6]})
    with aircc.load(compiled, device=device) as loaded:   # the -1 dim is free: any size runs
        assert loaded.run(_feeds(np.random.default_rng(2), (5, 3, 4, 6)))["y"].shape == (5, 3, 4, 1)


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_several_question_marks_are_several_dims(mode, device):
    m = relu_sum(["?", 3, "?", "?"], ["?", 3, "?", 1])
    feeds = _feeds(np.random.default_rng(3), (2, 3, 48, 192), (48, 2))
    shapes = {"x": [2, 3, 48, 192], "x2": [48, 2]} if mode == "static" else None
    _check(m, feeds, mode, device, shapes)


def test_a_named_dim_still_ties_the_dims_that_share_it(device):
    m = relu_sum(["s0", 3, "s0", 6])          # torch's exporter names its dims s0, s1, ...
    compiled = aircc.compile(m, mode="dynamic")
    with aircc.load(compiled, device=device) as loaded:
        loaded.run(_feeds(np.random.default_rng(4), (4, 3, 4, 6)))
        with pytest.raises(InputError, match="dim 's0' is 4 .* but 5"):
            loaded.run(_feeds(np.random.default_rng(4), (4, 3, 5, 6)))
        assert loaded.run(_feeds(np.random.default_rng(5), (2, 3, 2, 6)))["y"].shape == (2, 3, 2, 1)


def test_the_session_shows_an_unknown_dim_as_none():
    m = with_minus_one(relu_sum([1, 3, 4, 6]))
    sess = aircc.InferenceSession(m.SerializeToString())
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].shape == ref.get_inputs()[0].shape == [None, 3, 4, 6]

"""Recurrent models end to end: LSTM, GRU and RNN layers built with onnx.helper and
``torch.nn.LSTM`` / ``torch.nn.GRU`` exported by torch.onnx (the TorchScript exporter and
the default one), compiled static and dynamic, run on the virtual device and compared
with onnxruntime; every recurrent node runs the native kernel, none the fallback."""
from __future__ import annotations

import io
import logging
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import aircc

RECURRENT = ("LSTM", "GRU", "RNN")
RNG = np.random.default_rng(7)


def _weights(name: str, *shape) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.3).astype(np.float32), name)


def stacked_model() -> onnx.ModelProto:
    """A bidirectional LSTM (sequence lengths, initial states, peepholes) whose Y feeds a
    reverse GRU with clip whose only output is Y_h, beside a forward GRU
    (linear_before_reset) and a Relu RNN on the same input."""
    seq, batch, inp, h = 6, 3, 5, 4
    nodes = [
        helper.make_node("LSTM", ["x", "lw", "lr", "lb", "lens", "h0", "c0", "lp"],
                         ["y", "y_h", "y_c"], hidden_size=h, direction="bidirectional"),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["yt", "shape"], ["y2"]),
        helper.make_node("GRU", ["y2", "gw", "gr", "gb", "lens"], ["", "gru_h"], hidden_size=h,
                         direction="reverse", clip=0.9),
        helper.make_node("GRU", ["x", "gw2", "gr2", "gb2"], ["gru2_y"], hidden_size=h,
                         linear_before_reset=1),
        helper.make_node("RNN", ["x", "rw", "rr", "", "", "h0r"], ["rnn_y", "rnn_h"],
                         hidden_size=h, activations=["Relu"]),
    ]
    weights = [_weights("lw", 2, 4 * h, inp), _weights("lr", 2, 4 * h, h),
               _weights("lb", 2, 8 * h), _weights("lp", 2, 3 * h),
               _weights("gw", 1, 3 * h, 2 * h), _weights("gr", 1, 3 * h, h),
               _weights("gb", 1, 6 * h),
               _weights("gw2", 1, 3 * h, inp), _weights("gr2", 1, 3 * h, h),
               _weights("gb2", 1, 6 * h), _weights("rw", 1, h, inp), _weights("rr", 1, h, h),
               numpy_helper.from_array(np.array([seq, batch, 2 * h], np.int64), "shape")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inp]),
              helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]),
              helper.make_tensor_value_info("h0", TensorProto.FLOAT, [2, batch, h]),
              helper.make_tensor_value_info("c0", TensorProto.FLOAT, [2, batch, h]),
              helper.make_tensor_value_info("h0r", TensorProto.FLOAT, [1, batch, h])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
               for n in ("y", "y_h", "y_c", "gru_h", "gru2_y", "rnn_y", "rnn_h")]
    graph = helper.make_graph(nodes, "recurrent", inputs, outputs, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return onnx.shape_inference.infer_shapes(model)


def stacked_feeds() -> dict:
    return {"x": RNG.standard_normal((6, 3, 5)).astype(np.float32),
            "lens": np.array([6, 2, 0], np.int32),
            "h0": RNG.standard_normal((2, 3, 4)).astype(np.float32),
            "c0": RNG.standard_normal((2, 3, 4)).astype(np.float32),
            "h0r": RNG.standard_normal((1, 3, 4)).astype(np.float32)}


def torch_model(kind: str, exporter: str) -> onnx.ModelProto:
    """A 2-layer ``nn.LSTM`` (bidirectional) or ``nn.GRU``, batch first, with a linear
    head, exported with dynamic batch and sequence axes."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            cell = nn.LSTM if kind == "lstm" else nn.GRU
            self.rnn = cell(8, 12, 2, batch_first=True, bidirectional=kind == "lstm")
            self.head = nn.Linear(24 if kind == "lstm" else 12, 5)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    torch.manual_seed(0)
    net, x = Net().eval(), torch.randn(2, 7, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            if exporter == "legacy":
                buf = io.BytesIO()
                torch.onnx.export(net, (x,), buf, dynamo=False, opset_version=17,
                                  input_names=["x"], output_names=["y"],
                                  dynamic_axes={"x": {0: "batch", 1: "seq"}})
                return onnx.load_from_string(buf.getvalue())
            batch, seq = torch.export.Dim("batch", min=1), torch.export.Dim("seq", min=2)
            program = torch.onnx.export(net, (x,), dynamo=True, input_names=["x"],
                                        output_names=["y"],
                                        dynamic_shapes={"x": {0: batch, 1: seq}})
            return program.model_proto
        finally:
            logging.disable(logging.NOTSET)


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_native(compiled) -> None:
    """Every recurrent node of the optimised graph runs the native kernel."""
    assert compiled.report.fallback_nodes == []
    nodes = [n for n in compiled.graph.walk() if n.op in RECURRENT]
    assert nodes and all(n.meta.get("impl") != "fallback" for n in nodes)


def assert_matches(got: dict, expected: list) -> None:
    assert len(got) == len(expected)
    for y, ref in zip(got.values(), expected):
        assert y.shape == ref.shape and y.dtype == ref.dtype
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_helper_built_layers(mode, device):
    model, feeds = stacked_model(), stacked_feeds()
    compiled = aircc.compile(model, mode=mode)
    assert compiled.report.mode == mode
    assert_native(compiled)
    loaded = aircc.load(compiled, device=device)
    try:
        expected = onnxruntime_outputs(model, feeds)
        assert_matches(loaded.run(feeds), expected)
        feeds["lens"] = np.array([3, 6, 1], np.int32)       # the same model, other lengths
        assert_matches(loaded.run(feeds), onnxruntime_outputs(model, feeds))
    finally:
        loaded.close()


@pytest.mark.parametrize("kind, exporter", [("lstm", "legacy"), ("gru", "legacy"),
                                            ("lstm", "dynamo")])
def test_torch_exports_static_and_dynamic(kind, exporter, device):
    model = torch_model(kind, exporter)
    assert {n.op_type for n in model.graph.node} & set(RECURRENT)
    shapes = [(2, 7, 8), (3, 4, 8)]
    cases = [{"x": RNG.standard_normal(s).astype(np.float32)} for s in shapes]
    expected = [onnxruntime_outputs(model, feeds) for feeds in cases]
    dynamic = aircc.compile(model, mode="dynamic")
    assert_native(dynamic)
    loaded = aircc.load(dynamic, device=device)
    try:
        for feeds, ref in zip(cases, expected):
            assert_matches(loaded.run(feeds), ref)
    finally:
        loaded.close()
    for feeds, ref in zip(cases, expected):
        static = aircc.compile(model, mode="static", input_shapes={"x": list(feeds["x"].shape)})
        assert static.report.mode == "static"
        assert_native(static)
        loaded = aircc.load(static, device=device)
        try:
            assert_matches(loaded.run(feeds), ref)
        finally:
            loaded.close()

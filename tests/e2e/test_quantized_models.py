"""Models as onnxruntime's quantizers write them, end to end.  The float models: small
torch models exported by the TorchScript exporter (a CNN with Conv/BN/Relu/pools/Add/Mul/
Concat/Sigmoid/LeakyRelu/Gemm, a bidirectional LSTM, a small Hugging Face BERT from
``BertConfig`` with random weights, an MLP) and a BERT embedding and attention as
onnxruntime's transformer optimizer fuses them (built with onnx.helper).  Their quantized
forms: ``quantize_dynamic`` (per tensor and per channel), ``quantize_static`` (QDQ and
QOperator, per tensor and per channel, int8 and uint8 activations, 16-bit activations in
com.microsoft Q/DQ) with random calibration data, ``MatMulNBitsQuantizer`` (4-bit weights)
and, after ``quantize_dynamic``, onnxruntime's own graph optimizer (which writes
DynamicQuantizeMatMul and MatMulIntegerToFloat).  Each is compiled static and dynamic; no
node may run on the fallback; outputs are compared with onnxruntime (one thread: its LSTM
quantizes each thread's share of the batch on its own).

Tolerance: an output made by a DequantizeLinear is within one step of its scale (both
compute the same integers up to float rounding at a rounding boundary); a float output
with no scale of its own (dynamic quantization, LayerNormalization, MatMulNBits) within
1e-4 of the output's largest magnitude (seen: 1e-6).  The QDQ models are compared with
onnxruntime running them as written (graph optimizations off): its default level fuses
Q/DQ pairs into integer kernels whose requantization rounds differently, by a few steps
after two BERT layers.
"""
from __future__ import annotations

import collections
import functools
import logging
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

import aircc
import exports
from corpus.cache import quiet

RNG = np.random.default_rng(3)
BERT = "bert-eager-legacy17"


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.c3 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        f = torch.nn.functional
        y = f.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        a, b = self.c2(y), torch.sigmoid(self.c3(y))
        z = torch.cat([a + b, f.leaky_relu(a * b, 0.1)], 1)
        z = f.avg_pool2d(self.dw(z), 2)
        z = z * torch.sigmoid(f.adaptive_avg_pool2d(z, 1))
        return self.fc(z.flatten(1))


class LSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(16, 32, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(64, 5)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


class MLP(torch.nn.Module):
    """Two projections of one input (a shared activation) and a third of their product."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Linear(32, 48), torch.nn.Linear(32, 48),
                                  torch.nn.Linear(48, 16))

    def forward(self, x):
        return self.c(torch.relu(self.a(x)) * self.b(x))


def fused_bert(path: str) -> str:
    """A BERT embedding and attention as onnxruntime's transformer optimizer fuses them
    (com.microsoft EmbedLayerNormalization and Attention), then a projection."""
    rng = np.random.default_rng(5)
    vocab, seq, hidden = 50, 16, 32

    def weight(name, *shape, std=0.3, mean=0.0):
        return numpy_helper.from_array((mean + rng.standard_normal(shape) * std)
                                       .astype(np.float32), name)

    inits = [weight("word", vocab, hidden), weight("pos", seq, hidden), weight("seg", 2, hidden),
             weight("gamma", hidden, std=0.1, mean=1.0), weight("beta", hidden, std=0.1),
             weight("qkv_w", hidden, 3 * hidden), weight("qkv_b", 3 * hidden, std=0.1),
             weight("out_w", hidden, hidden)]
    nodes = [helper.make_node("EmbedLayerNormalization", ["ids", "segs", "word", "pos", "seg",
                                                          "gamma", "beta", "mask"],
                              ["emb", "mask_index"], domain="com.microsoft", epsilon=1e-12),
             helper.make_node("Attention", ["emb", "qkv_w", "qkv_b", "mask_index"], ["att"],
                              domain="com.microsoft", num_heads=4),
             helper.make_node("MatMul", ["att", "out_w"], ["y"])]
    inputs = [helper.make_tensor_value_info(n, onnx.TensorProto.INT32, ["B", "S"])
              for n in ("ids", "segs", "mask")]
    graph = helper.make_graph(nodes, "fused_bert", inputs, [helper.make_tensor_value_info(
        "y", onnx.TensorProto.FLOAT, ["B", "S", hidden])], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    onnx.save(helper.make_model(graph, opset_imports=opsets), path)
    return path


SHAPES = {"cnn": {"x": (2, 3, 16, 16)}, "lstm": {"x": (2, 7, 16)}, "mlp": {"x": (2, 5, 32)}}


def feeds(kind: str, seed: int) -> dict:
    if kind == "bert":
        return exports.inputs(BERT, batch=2, seq=8, seed=seed)
    rng = np.random.default_rng(seed)
    if kind == "fused-bert":
        mask = np.ones((2, 8), np.int32)
        mask[1, 5:] = 0
        return {"ids": rng.integers(0, 50, (2, 8)).astype(np.int32),
                "segs": rng.integers(0, 2, (2, 8)).astype(np.int32), "mask": mask}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES[kind].items()}




@functools.lru_cache(maxsize=None)
def float_model(kind: str, folder: str) -> str:
    if kind == "bert":
        return exports.exported(BERT)
    if kind == "fused-bert":
        return fused_bert(os.path.join(folder, "fused-bert.onnx"))
    torch.manual_seed(0)
    model = {"cnn": CNN, "lstm": LSTM, "mlp": MLP}[kind]().eval()
    path = os.path.join(folder, f"{kind}.onnx")
    args = tuple(torch.from_numpy(v) for v in feeds(kind, 0).values())
    with quiet():
        torch.onnx.export(model, args, path, dynamo=False, input_names=list(SHAPES[kind]),
                          opset_version=17)
    return path


def nbits_quantizer():
    """onnxruntime's MatMulNBitsQuantizer (its module configures the root logger when
    imported: that is undone)."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    root.setLevel(level)
    root.handlers[:] = handlers
    return MatMulNBitsQuantizer


class Calibration(CalibrationDataReader):
    def __init__(self, kind: str):
        self.batches = iter([feeds(kind, seed) for seed in range(10, 14)])

    def get_next(self):
        return next(self.batches, None)


def quantized(kind: str, how: str, folder: str) -> str:
    """The path of ``kind`` quantized ``how`` (made once per process)."""
    return _quantized(kind, how, folder)


@functools.lru_cache(maxsize=None)
def _quantized(kind: str, how: str, folder: str) -> str:
    src, out = float_model(kind, folder), os.path.join(folder, f"{kind}.{how}.onnx")
    with quiet():
        if how.startswith("dynamic"):
            quantize_dynamic(src, out, per_channel=how.endswith("pc"),
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        elif how.startswith("ort-optimized"):
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
            so.optimized_model_filepath = out
            ort.InferenceSession(quantized(kind, how.replace("ort-optimized", "dynamic"), folder),
                                 so, providers=["CPUExecutionProvider"])
        elif how.startswith("nbits"):
            q = nbits_quantizer()(onnx.load(src), block_size=16,
                                  is_symmetric=how.endswith("symmetric"))
            q.process()
            q.model.save_model_to_file(out)
        else:
            fmt, *options = how.split("-")
            activations = {"u8": QuantType.QUInt8, "u16": QuantType.QUInt16}.get(
                next((o for o in options if o[0] == "u"), ""), QuantType.QInt8)
            quantize_static(src, out, Calibration(kind),
                            quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                            per_channel="pc" in options, activation_type=activations,
                            weight_type=QuantType.QUInt8 if "u16" in options else QuantType.QInt8,
                            extra_options={"UseQDQContribOps": True} if "u16" in options else {})
    return out


#: (model, how it is quantized, ops of the quantized model the case is there for).
CASES = [
    ("cnn", "dynamic", {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"}),
    ("cnn", "dynamic-pc", {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"}),
    ("cnn", "qdq", {"QuantizeLinear", "DequantizeLinear"}),
    ("cnn", "qdq-pc-u8", {"QuantizeLinear", "DequantizeLinear"}),
    ("cnn", "qop-u8", {"QLinearConv", "QLinearAdd", "QLinearMul", "QLinearSigmoid",
                       "QLinearLeakyRelu", "QLinearConcat", "QLinearAveragePool",
                       "QLinearGlobalAveragePool", "QGemm"}),
    ("cnn", "qop-pc", {"QLinearConv", "QLinearConcat", "QGemm"}),
    ("lstm", "dynamic", {"DynamicQuantizeLSTM", "MatMulInteger"}),
    ("lstm", "qop-u8", {"QLinearMatMul", "QLinearAdd"}),
    ("bert", "dynamic", {"DynamicQuantizeLinear", "MatMulInteger"}),
    ("bert", "qdq-pc", {"QuantizeLinear", "DequantizeLinear"}),
    ("bert", "qop-u8", {"QLinearMatMul", "QLinearAdd", "QLinearMul", "QLinearSoftmax"}),
    ("fused-bert", "dynamic", {"QEmbedLayerNormalization", "QAttention", "MatMulInteger"}),
    ("mlp", "ort-optimized", {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"}),
    ("mlp", "ort-optimized-pc", {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"}),
    ("mlp", "nbits", {"MatMulNBits"}),
    ("mlp", "nbits-symmetric", {"MatMulNBits"}),
    ("mlp", "qdq-u16", {"com.microsoft::QuantizeLinear", "com.microsoft::DequantizeLinear"}),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("quantized"))


def output_steps(model: onnx.ModelProto) -> dict:
    """Each graph output made by a DequantizeLinear: its (largest) scale."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    made_by = {o: n for n in model.graph.node for o in n.output}
    steps = {}
    for out in model.graph.output:
        node = made_by.get(out.name)
        if node is not None and node.op_type == "DequantizeLinear" and node.input[1] in inits:
            steps[out.name] = float(np.max(inits[node.input[1]]))
    return steps


def reference(path: str, how: str, feed: dict) -> list:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if how.startswith("qdq"):
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feed)


@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("kind,how,ops", CASES, ids=[f"{k}-{h}" for k, h, _ in CASES])
def test_quantized_model_matches_onnxruntime(folder, kind, how, ops, mode):
    path = quantized(kind, how, folder)
    model = onnx.load(path)
    found = collections.Counter(n.op_type for n in model.graph.node) + \
        collections.Counter(f"{n.domain}::{n.op_type}" for n in model.graph.node if n.domain)
    assert ops <= set(found), f"the quantizer wrote {dict(found)}"
    if how.startswith("qdq") and kind in ("cnn", "bert"):         # Conv / LayerNorm biases
        int32 = {t.name for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT32}
        assert any(n.op_type == "DequantizeLinear" and n.input[0] in int32
                   for n in model.graph.node), "no int32 (bias) DequantizeLinear"
    shapes = {k: list(v.shape) for k, v in feeds(kind, 0).items()}
    compiled = aircc.compile(path, mode=mode, input_shapes=shapes if mode == "static" else None)
    assert compiled.report.fallback_nodes == []
    steps = output_steps(model)
    with aircc.load(compiled) as loaded:
        for seed in (1, 2):
            feed = feeds(kind, seed)
            got = loaded.run(feed)
            for (name, value), want in zip(got.items(), reference(path, how, feed)):
                diff = np.abs(value.astype(np.float64) - want)
                tol = steps[name] * 1.0001 if name in steps else 1e-4 * max(1.0, np.abs(want).max())
                assert diff.max() <= tol, (name, diff.max(), tol)

"""Attention as real exporters write it fuses and keeps onnxruntime's numbers.

torch.nn.MultiheadAttention (batch- and sequence-first; no mask, a key padding mask, a
causal mask, both), torch.nn.TransformerEncoder (post- and pre-norm; ReLU and GELU) and
Hugging Face BERT (eager and SDPA attention), each exported by torch.onnx's TorchScript
exporter (``legacy``; ``legacy17`` at opset 17, GELU spelled out with Erf) and by its
default one (``dynamo``), and attention as Hugging Face wrote it before transformers 5
(``masked-fill``: the scores' masked entries replaced), from tests/exports.py.  Each is compiled in dynamic mode
(symbolic batch and sequence; the TorchScript exports of torch.nn fix the sequence
length they were traced at) and static mode, run, and compared with onnxruntime; the
compile report counts one ``fused_attention`` per attention block, and the LayerNorm
and GELU fusions where the export spells them out.

The models run on the numpy backend (``cpu-avx2``), the one the Attention kernel is
written for.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import aircc
from exports import MODELS, exported, fixed_seq, inputs

TARGET = "cpu-avx2"

CASES = ["mha-bf-pad-dynamo", "mha-bf-causal-dynamo", "mha-sf-both-dynamo",
         "mha-bf-none-legacy", "mha-sf-pad-legacy", "mha-bf-both-legacy", "mha-sf-causal-legacy",
         "encoder-post-relu-pad-dynamo", "encoder-pre-gelu-none-dynamo",   # MHA without a mask
         "encoder-post-gelu-none-legacy17", "encoder-pre-relu-pad-legacy",
         "bert-eager-dynamo", "bert-sdpa-dynamo", "bert-eager-legacy", "bert-sdpa-legacy", "bert-eager-legacy17",
         "masked-fill-dynamo", "masked-fill-legacy"]


def _layers(name: str) -> int:
    return MODELS[name].blocks


def _input_shapes(name: str, mode: str, feeds: dict) -> dict | None:
    """Static: the feeds' shapes; dynamic: none given, or the batch symbolic and the
    sequence length an exporter fixed."""
    if mode == "static":
        return {k: list(v.shape) for k, v in feeds.items()}
    if fixed_seq(name) is None:
        return None
    seq_first = MODELS[name].kind == "mha" and not MODELS[name].options["batch_first"]
    return {k: ["B" if d == (1 if seq_first and k == "x" else 0) else n for d, n in enumerate(v.shape)]
            for k, v in feeds.items()}


def _expected_fusions(name: str, report: dict, ops: list[str]) -> None:
    """LayerNorm after a residual Add fuses where the Add has no other reader (post-norm,
    BERT: not pre-norm, whose sums the next residual reads); GELU fuses where the export
    spells it out (opset 17); at opset 20 it is one Gelu op already."""
    spec = MODELS[name]
    if spec.kind == "custom":
        assert report.stats["mask_fills_to_add"] == 1
    if spec.kind == "bert":
        assert report.stats["fused_add_layernorm"] == 1 + 2 * _layers(name)     # embeddings, 2 a layer
    elif spec.kind == "encoder":
        pre_norm = "-pre-" in name
        assert report.stats["fused_add_layernorm"] == (0 if pre_norm else 2 * _layers(name))
    gelu = spec.kind == "bert" or "-gelu-" in name
    if name.endswith("legacy17") and gelu:
        assert report.stats["fused_gelu"] == _layers(name)
    assert ops.count("Gelu") == (_layers(name) if gelu else 0)


@pytest.mark.parametrize("mode", ["dynamic", "static"])
@pytest.mark.parametrize("name", CASES)
def test_real_export_fuses_its_attention_and_matches_onnxruntime(name, mode, device):
    seq = fixed_seq(name) or 7
    feeds = inputs(name, 3, seq)
    path = exported(name)
    compiled = aircc.compile(path, mode=mode, input_shapes=_input_shapes(name, mode, feeds), target=TARGET)
    report, ops = compiled.report, [n.op for n in compiled.graph.nodes]
    assert report.stats["fused_attention"] == _layers(name) == ops.count("Attention")
    assert not {"Softmax", "SoftmaxMatMul", "IsNaN"} & set(ops)
    _expected_fusions(name, report, ops)
    masked = MODELS[name].kind == "bert" or MODELS[name].options.get("mask") != "none"
    assert all(len(n.inputs) == (4 if masked else 3) for n in compiled.graph.nodes if n.op == "Attention")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    runs = [feeds]
    if mode == "dynamic":              # the same model at another batch (and sequence length)
        runs.append(inputs(name, 1, fixed_seq(name) or 4, seed=1))
    with aircc.load(compiled, device=device) as model:
        for run in runs + runs[:1]:      # the third run of a dynamic model is a replay
            want = sess.run(None, run)[0]
            np.testing.assert_allclose(model.run(run)["y"], want, rtol=1e-4, atol=1e-4)


def test_a_sequence_length_the_export_fixed_is_not_taken_as_symbolic(device):
    """A TorchScript MultiheadAttention export with its sequence length left symbolic: its
    Reshape wants the traced length, which the probes at other lengths show, so the block
    stays unfused, and runs at the length it was traced at."""
    name = "mha-bf-none-legacy"
    feeds = inputs(name, 2, fixed_seq(name))
    compiled = aircc.compile(exported(name), mode="dynamic", target=TARGET)
    assert compiled.report.stats["fused_attention"] == 0
    want = ort.InferenceSession(exported(name), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with aircc.load(compiled, device=device) as model:
        np.testing.assert_allclose(model.run(feeds)["y"], want, rtol=1e-4, atol=1e-4)

"""onnxruntime's contrib ops through the whole pipeline, against onnxruntime.

- every small model of ``contrib_models`` (each contrib op, the attributes and optional
  inputs that matter) compiled static and dynamic for this machine's target, run, and
  compared with onnxruntime; no node is left on the fallback, and the compile report
  counts the nodes ``lower-contrib`` made ordinary ops;
- a small Hugging Face BERT and GPT-2 (random weights, from configs), exported by torch's
  TorchScript exporter at opset 14 and put through onnxruntime's transformer optimizer,
  compiled both ways: they keep onnxruntime's numbers with no node on the fallback, and
  BERT's attention runs as aircc's own.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import aircc
from contrib_models import CASES

MODES = ["static", "dynamic"]


def _reference(model, feeds: dict) -> dict:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _compile_and_compare(source, feeds: dict, want: dict, mode: str, device, target=None, rtol=1e-4, atol=2e-5):
    shapes = {k: list(v.shape) for k, v in feeds.items()} if mode == "static" else None
    compiled = aircc.compile(source, mode=mode, input_shapes=shapes, target=target)
    assert compiled.report.fallback_nodes == []
    with aircc.load(compiled, device=device) as m:
        got = m.run(feeds)
    assert set(got) == set(want)
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=rtol, atol=atol, err_msg=name)
    return compiled


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(CASES))
def test_contrib_op_matches_onnxruntime(name, mode, device):
    case = CASES[name]()
    compiled = _compile_and_compare(case.model, case.feeds, _reference(case.reference, case.feeds), mode, device)
    assert compiled.report.stats["lowered_contrib_ops"] == case.lowered
    assert {n.op for n in compiled.graph.nodes if n.domain == "com.microsoft"} <= set(case.stays)


def test_group_query_attention_with_the_total_length_a_run_time_input(device):
    """The present's length follows total_sequence_length's value: a dynamic model reads it
    at run time; a static compile names it as what it cannot know."""
    case = CASES["group-query-attention"]()
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    total = next(i for i in m.graph.initializer if i.name == "total")
    feeds = dict(case.feeds, total=onnx.numpy_helper.to_array(total))
    m.graph.initializer.remove(total)
    m.graph.input.append(onnx.helper.make_tensor_value_info("total", onnx.TensorProto.INT32, []))
    _compile_and_compare(m, feeds, _reference(m, feeds), "dynamic", device)
    with pytest.raises(aircc.errors.CompileOptionError, match="present_k"):
        aircc.compile(m, mode="static", input_shapes={k: list(v.shape) for k, v in feeds.items()})


# ------------------------------------------------------------------ the optimizer's output
SMALL = dict(vocab_size=200, num_hidden_layers=2, num_attention_heads=4)


def _export(kind: str, path: str) -> None:
    import torch
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    torch.manual_seed(0)
    if kind == "bert":
        net = BertModel(BertConfig(**SMALL, hidden_size=64, intermediate_size=128, max_position_embeddings=64,
                                   attn_implementation="eager"))
    else:
        net = GPT2Model(GPT2Config(vocab_size=200, n_layer=2, n_head=4, n_embd=64, n_positions=64,
                                   attn_implementation="eager", use_cache=False))

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net.eval()

        def forward(self, input_ids, attention_mask):
            return self.net(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state

    ids = torch.ones(2, 7, dtype=torch.int64)
    names = ["input_ids", "attention_mask"]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(Wrapped(), (ids, ids), path, input_names=names, output_names=["y"], opset_version=14,
                          dynamic_axes={n: {0: "B", 1: "S"} for n in names}, dynamo=False)


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def optimized(request, tmp_path_factory):
    """(model kind, the optimizer's output) of a small Hugging Face model."""
    from onnxruntime.transformers.optimizer import optimize_model

    d = tmp_path_factory.mktemp("optimizer")
    raw, out = os.path.join(d, "raw.onnx"), os.path.join(d, "optimized.onnx")
    _export(request.param, raw)
    logging.disable(logging.WARNING)
    try:
        optimize_model(raw, model_type=request.param, num_heads=4, hidden_size=64).save_model_to_file(out)
    finally:
        logging.disable(logging.NOTSET)
    return request.param, out


@pytest.mark.parametrize("mode, target", [("static", None), ("dynamic", None), ("dynamic", "cpu-avx2")])
def test_optimizer_output_compiles_and_matches_onnxruntime(optimized, mode, target, device):
    """On this machine's target (oneDNN's where it runs) and on the numpy backend's."""
    kind, path = optimized
    rng = np.random.default_rng(1)
    mask = np.ones((3, 6), np.int64)
    mask[1, 4:] = 0
    feeds = {"input_ids": rng.integers(0, 200, (3, 6)).astype(np.int64), "attention_mask": mask}
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    contrib = {n.op_type for n in onnx.load(path).graph.node if n.domain == "com.microsoft"}
    if kind == "bert":
        assert {"Attention", "SkipLayerNormalization", "EmbedLayerNormalization", "BiasGelu"} <= contrib
    else:
        assert {"SkipLayerNormalization", "FastGelu"} <= contrib
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    compiled = _compile_and_compare(path, feeds, want, mode, device, target)
    ops = [(n.domain, n.op) for n in compiled.graph.nodes]
    assert not {"SkipLayerNormalization", "BiasGelu", "FastGelu", "Attention"} & {o for d, o in ops
                                                                                  if d == "com.microsoft"}
    assert compiled.report.stats["lowered_contrib_ops"] > 0
    if kind == "bert":          # both layers' attention aircc's own, over one mask
        assert ops.count(("aircc", "Attention")) == 2 and ops.count(("aircc", "AttentionMask")) == 1

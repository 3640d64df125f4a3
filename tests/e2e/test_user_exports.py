"""Models as users write them in torch, exported and compiled, keep onnxruntime's numbers.

From tests/user_models.py, each exported by torch.onnx's TorchScript exporter (``legacy``)
and by its default one (``dynamo``) with dynamic batch and sequence axes:

* ``decoder``: a GPT-like causal decoder, its mask ``torch.triu`` of a bool tensor used
  with ``masked_fill`` (Range, Trilu, Where on bool, Gather of embeddings);
* ``masks``: ``torch.where`` on float and int64 tensors under bool masks from comparisons,
  ``logical_and`` / ``logical_or`` / ``logical_not`` / ``logical_xor``, ``any`` / ``all``
  (both exporters cast the mask to int64 and reduce that: ReduceMax / ReduceMin / ReduceSum),
  an int ``masked_fill`` of int64, a bool output;
* ``indices``: int64 arithmetic on ``torch.arange`` (Range) and on the input, signed
  ``//`` and ``%`` (Div, Mod, the floor correction), ``clamp`` (Clip) and ``cumsum`` of
  int64, ``minimum`` / ``maximum`` / ``abs`` / ``sign`` of int64, ``argmax``, and gathers
  (``index_select``, ``gather``, an embedding lookup) at computed indices.

Dynamic mode compiles each export once and runs it at three (batch, sequence) shapes;
static mode compiles it for one.  Every output must match onnxruntime in dtype, shape and
value, and no node may run on the fallback kernel; the decoder's attention fuses, mask included.

The reference runs with onnxruntime's basic graph optimizations only: its extended ones
(onnxruntime 1.32) break the TorchScript export of ``indices`` (a Gather of
``Range(s - 1, -1, -1)`` comes out empty), which runs correctly unoptimised and in onnx's
reference evaluator.
"""
from __future__ import annotations

import aircc
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from user_models import EXPORTERS, LAYERS, MODELS, exported, inputs

SHAPES = [(1, 7), (2, 16), (3, 33)]
STATIC = (2, 16)
CASES = [(name, exporter) for name in MODELS for exporter in EXPORTERS]


@pytest.fixture(scope="module")
def session():
    """``session(name, exporter)``: the export's path and its onnxruntime session (once each)."""
    cache: dict = {}

    def get(name: str, exporter: str):
        if (name, exporter) not in cache:
            path = exported(name, exporter)
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            cache[name, exporter] = path, ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        return cache[name, exporter]

    return get


def _check(model, sess, name: str, batch: int, seq: int) -> None:
    feeds = inputs(name, batch, seq, seed=batch * 100 + seq)
    wants = sess.run(None, feeds)
    got = model.run(feeds)
    assert sorted(got) == sorted(MODELS[name][2])
    for out, want in zip(sess.get_outputs(), wants):
        have = got[out.name]
        assert have.dtype == want.dtype and have.shape == want.shape, (out.name, have.dtype, have.shape)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} {out.name}")
        else:                                   # int64 and bool: exactly
            np.testing.assert_array_equal(have, want, err_msg=f"{name} {out.name}")


def _ops(path: str) -> set[str]:
    return {n.op_type for n in onnx.load(path).graph.node}


#: What each export must contain for the model to test what it claims to.
EXPECTED_OPS = {"decoder": {"Range", "Trilu", "Where", "Gather", "Softmax"},
                "masks": {"Where", "And", "Or", "Not", "Xor", "ReduceSum", "Greater", "Less"},
                "indices": {"Range", "Mod", "Div", "Clip", "CumSum", "Gather", "GatherElements", "ArgMax",
                            "Abs", "Sign", "Min", "Max"}}


@pytest.mark.parametrize("name, exporter", CASES)
def test_dynamic_export_matches_onnxruntime_at_every_shape(name, exporter, session, device):
    path, sess = session(name, exporter)
    assert EXPECTED_OPS[name] <= _ops(path)
    compiled = aircc.compile(path, mode="dynamic")
    assert compiled.report.fallback_nodes == []
    if name == "decoder":               # each layer's triu mask fill folds into its attention
        ops = [n.op for n in compiled.graph.nodes]
        assert compiled.report.stats["fused_attention"] == LAYERS == ops.count("Attention")
        assert compiled.report.stats["mask_fills_to_add"] == LAYERS and "Softmax" not in ops
    with aircc.load(compiled, device=device) as model:
        for batch, seq in SHAPES:
            _check(model, sess, name, batch, seq)


@pytest.mark.parametrize("name, exporter", CASES)
def test_static_export_matches_onnxruntime(name, exporter, session, device):
    path, sess = session(name, exporter)
    shapes = {k: list(v.shape) for k, v in inputs(name, *STATIC).items()}
    compiled = aircc.compile(path, mode="static", input_shapes=shapes)
    assert compiled.report.fallback_nodes == []
    assert compiled.report.mode == "static"
    with aircc.load(compiled, device=device) as model:
        _check(model, sess, name, *STATIC)


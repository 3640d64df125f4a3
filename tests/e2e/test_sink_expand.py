"""sink-expand: an Expand moves past the elementwise ops reading it and goes away where its
readers broadcast anyway; what the graph computes does not change (against onnxruntime,
static and dynamic)."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import aircc
from graphs import const, model, tensor


def _mask_graph(extra_output: str | None = None):
    """The exporter's extended mask, Where(Equal(Expand(m), 0), -1e4, ConstantOfShape) + ext,
    used as a Softmax mask (fused into SoftmaxMatMul); target shape built at run time."""
    nodes = [helper.make_node("Unsqueeze", ["mask", "ax12"], ["m4"]),
             helper.make_node("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "mf"], ["inv"]),
             helper.make_node("Mul", ["inv", "neg"], ["ext1"]),
             helper.make_node("Shape", ["mask"], ["shp"]),
             helper.make_node("Gather", ["shp", "i0"], ["b"], axis=0),
             helper.make_node("Gather", ["shp", "i1"], ["s"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["bu"]),
             helper.make_node("Unsqueeze", ["s", "ax0"], ["su"]),
             helper.make_node("Concat", ["bu", "one_i", "su", "su"], ["target"], axis=0),
             helper.make_node("Expand", ["mf", "target"], ["expanded"]),
             helper.make_node("Equal", ["expanded", "zero"], ["cond"]),
             helper.make_node("ConstantOfShape", ["target"], ["zeros"],
                              value=numpy_helper.from_array(np.zeros(1, np.float32))),
             helper.make_node("Where", ["cond", "neg", "zeros"], ["ext2"]),
             helper.make_node("Add", ["ext2", "ext1"], ["full"]),
             helper.make_node("Add", ["scores", "full"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    inits = [const("ax12", np.array([1, 2], np.int64)), const("ax0", np.array([0], np.int64)),
             const("one", np.array(1.0, np.float32)), const("neg", np.array(-1e4, np.float32)),
             const("zero", np.array(0.0, np.float32)), const("i0", np.array(0, np.int64)),
             const("i1", np.array(1, np.int64)), const("one_i", np.array([1], np.int64))]
    outputs = [tensor("y", ["B", 2, "S", 4])]
    if extra_output:
        outputs.append(tensor(extra_output, ["B", 1, "S", "S"]))
    return model(nodes, [tensor("mask", ["B", "S"], TensorProto.INT64), tensor("scores", ["B", 2, "S", "S"]),
                         tensor("v", ["B", 2, "S", 4])], outputs, inits)


def _feeds(b=3, s=6):
    rng = np.random.default_rng(2)
    mask = np.ones((b, s), np.int64)
    mask[0, 4:] = 0
    return {"mask": mask, "scores": rng.standard_normal((b, 2, s, s)).astype(np.float32),
            "v": rng.standard_normal((b, 2, s, 4)).astype(np.float32)}


def _check(m, feeds, compiled, device):
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = aircc.load(compiled, device=device).run(feeds)
    for o, r in zip(m.graph.output, ref):
        np.testing.assert_allclose(got[o.name], r, rtol=1e-5, atol=1e-6, err_msg=o.name)


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_the_exporters_mask_is_computed_per_key_not_per_query_and_key(mode, device):
    m, feeds = _mask_graph(), _feeds()
    shapes = {k: list(v.shape) for k, v in feeds.items()} if mode == "static" else None
    compiled = aircc.compile(m, mode=mode, input_shapes=shapes)
    ops = [n.op for n in compiled.graph.nodes]
    assert "Expand" not in ops and "ConstantOfShape" not in ops
    assert compiled.report.stats["sunk_expands"] >= 2 and compiled.report.stats["dropped_expands"] >= 1
    sm = next(n for n in compiled.graph.nodes if n.op == "SoftmaxMatMul")
    assert compiled.graph.types[sm.inputs[2]].shape[1:3] == (1, 1)        # [B, 1, 1, S]
    _check(m, feeds, compiled, device)


def test_an_expand_whose_result_is_needed_in_full_stays(device):
    """The expanded mask is also a graph output: the Expand moves after the elementwise ops
    (they run on the small tensor) but still makes the full [B, 1, S, S] output."""
    m, feeds = _mask_graph(extra_output="ext2"), _feeds()
    compiled = aircc.compile(m, mode="dynamic")
    assert [n.op for n in compiled.graph.nodes].count("Expand") == 1
    assert compiled.report.stats["sunk_expands"] >= 1
    _check(m, feeds, compiled, device)


def test_expand_dropped_when_the_other_operand_is_full_and_kept_when_it_would_grow(device):
    nodes = [helper.make_node("Expand", ["row", "shape"], ["e"]),
             helper.make_node("Add", ["e", "x"], ["y"]),                   # x is [2, 3, 4]: drop
             helper.make_node("Expand", ["row", "shape"], ["e2"]),
             helper.make_node("Mul", ["e2", "col"], ["z"])]                # col [3, 1]: sink
    m = model(nodes, [tensor("row", [1, 4]), tensor("x", [2, 3, 4]), tensor("col", [3, 1])],
              [tensor("y", [2, 3, 4]), tensor("z", [2, 3, 4])],
              [const("shape", np.array([2, 3, 4], np.int64))])
    rng = np.random.default_rng(5)
    feeds = {"row": rng.standard_normal((1, 4)).astype(np.float32),
             "x": rng.standard_normal((2, 3, 4)).astype(np.float32),
             "col": rng.standard_normal((3, 1)).astype(np.float32)}
    compiled = aircc.compile(m, mode="static")
    assert compiled.report.stats["dropped_expands"] == 1 and compiled.report.stats["sunk_expands"] == 1
    ops = [(n.op, n.outputs[:1]) for n in compiled.graph.nodes]
    assert ("Expand", ["z"]) in ops                         # the Mul runs on [3, 4], then expands
    _check(m, feeds, compiled, device)

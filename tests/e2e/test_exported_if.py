"""If as exporters write it, in both modes.

* A branch reads initializers of the enclosing graph (a Pad's ``pads``, an Unsqueeze's
  ``axes``): shape inference inside the branch sees their values, so the branch's shapes
  are as static as the model's (they used to be symbols, and the tiling of a convolution
  in the branch crashed in static mode).
* "Squeeze this dim if it is 1", as torch exports ``x.squeeze(d)`` on a traced shape: an If
  on ``Shape(x)[d] == 1``.  With the input shapes fixed, the condition is known at
  compile time: the live branch is inlined and the dead one, which does not type with
  these shapes, is never planned (it used to fail: "cannot squeeze axis 2 of size 2"),
  also when the Ifs are chained.
* A model that switches sub-networks on an input's value (a sample rate): static mode
  works when both branches make the same shapes; when they do not, static mode is refused
  naming the If and the input its condition depends on (it used to blame the input shapes,
  though they were fixed), and auto mode compiles it dynamic.
* A branch that cannot run with the shapes given: static mode plans the other branch and
  makes this one a task that fails the run naming why, as dynamic mode's InferShape and
  onnxruntime do when it is taken; the next run works.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import aircc
from aircc.errors import CompileOptionError, ShapeInferenceError
from graphs import const, model, tensor

F = TensorProto.FLOAT


def _ort(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _body(name, nodes, out, inits=()):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, F, None)], list(inits))


def outer_scope_model():
    """If(c): each branch pads x with the model's ``pads``, convolves with its ``w``,
    unsqueezes with its ``axes`` and scales by a constant of its own."""
    def branch(name, k):
        return _body(name, [helper.make_node("Pad", ["x", "pads"], [f"{name}_p"]),
                            helper.make_node("Conv", [f"{name}_p", "w"], [f"{name}_c"]),
                            helper.make_node("Unsqueeze", [f"{name}_c", "axes"], [f"{name}_u"]),
                            helper.make_node("Mul", [f"{name}_u", f"k_{name}"], [f"{name}_y"])],
                     f"{name}_y", [numpy_helper.from_array(np.float32(k), f"k_{name}")])
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    return model([helper.make_node("If", ["c"], ["y"], then_branch=branch("then", 2.0),
                                   else_branch=branch("else", -1.0))],
                 [tensor("x", ["N", 3, 8, 8]), tensor("c", [], TensorProto.BOOL)],
                 [tensor("y", ["N", 1, 4, 8, 8])],
                 [const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
                  const("axes", np.array([1], np.int64)), const("w", w)], opset=13)


@pytest.mark.parametrize("target", ["cpu-avx2", "native"])
@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_branch_reads_the_enclosing_graphs_initializers(mode, target, device):
    m = outer_scope_model()
    compiled = aircc.compile(m, mode=mode, target=target,
                             input_shapes={"x": [2, 3, 8, 8], "c": []} if mode == "static" else None)
    if mode == "dynamic":       # typed through the branch: only the batch is unknown
        then = next(r for n in compiled.graph.walk() for r in n.regions if r.meta["attribute"] == "then_branch")
        assert then.types["then_c"].shape[1:] == (4, 8, 8)
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with aircc.load(compiled, device=device) as loaded:
        for c in (True, False):
            feeds = {"x": x, "c": np.array(c)}
            np.testing.assert_allclose(loaded.run(feeds)["y"], _ort(m, feeds)[0], rtol=1e-5, atol=1e-5)


def squeeze_if_model(times: int = 2):
    """Conv, then ``times`` x "squeeze dim 2 if it is 1" (If on Shape/Gather/Equal), then Relu."""
    nodes, src = [helper.make_node("Conv", ["x", "w"], ["c0"])], "c0"
    for k in range(times):
        then = _body(f"then{k}", [helper.make_node("Squeeze", [src, "axis2"], [f"sq{k}"])], f"sq{k}")
        other = _body(f"else{k}", [helper.make_node("Identity", [src], [f"id{k}"])], f"id{k}")
        nodes += [helper.make_node("Shape", [src], [f"shape{k}"]),
                  helper.make_node("Gather", [f"shape{k}", "two"], [f"dim{k}"], axis=0),
                  helper.make_node("Equal", [f"dim{k}", "one"], [f"is_one{k}"]),
                  helper.make_node("If", [f"is_one{k}"], [f"c{k + 1}"], then_branch=then, else_branch=other)]
        src = f"c{k + 1}"
    nodes.append(helper.make_node("Relu", [src], ["y"]))
    w = np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(nodes, "squeezes", [tensor("x", ["N", 3, "H", "W"])],
                              [tensor("y", None)],      # no shape declared, as exporters often do
                              [const("w", w), const("two", np.array(2, np.int64)),
                               const("one", np.array(1, np.int64)), const("axis2", np.array([2], np.int64))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("hw", [(3, 5), (4, 3), (3, 3)], ids=["squeeze-once", "none", "twice"])
def test_squeeze_if_one_compiles_static_at_every_shape(hw, device):
    m = squeeze_if_model()
    x = np.random.default_rng(3).standard_normal((2, 3, *hw)).astype(np.float32)
    want = _ort(m, {"x": x})[0]
    static = aircc.compile(m, mode="static", input_shapes={"x": list(x.shape)})
    assert "If" not in [n.op for n in static.graph.walk()]     # the dead branches never planned
    dynamic = aircc.compile(m, mode="dynamic")
    for compiled in (static, dynamic):
        with aircc.load(compiled, device=device) as loaded:
            got = loaded.run({"x": x})["y"]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def sample_rate_model(else_shape):
    """``y = mean over the last axis of reshape(x, s16 if sr == 16000 else s8)``."""
    then = _body("then", [helper.make_node("Reshape", ["x", "s16"], ["t"]),
                          helper.make_node("ReduceMean", ["t"], ["tm"], axes=[2], keepdims=0)], "tm")
    other = _body("else", [helper.make_node("Reshape", ["x", "s8"], ["e"]),
                           helper.make_node("ReduceMean", ["e"], ["em"], axes=[2], keepdims=0)], "em")
    graph = helper.make_graph(
        [helper.make_node("Equal", ["sr", "k16"], ["is16"]),
         helper.make_node("If", ["is16"], ["y"], then_branch=then, else_branch=other)], "vad",
        [tensor("x", [1, 512]), tensor("sr", [], TensorProto.INT64)], [tensor("y", None)],
        [const("k16", np.array(16000, np.int64)), const("s16", np.array([1, 4, 128], np.int64)),
         const("s8", np.array(else_shape, np.int64))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _feeds(sr):
    return {"x": np.random.default_rng(sr).random((1, 512), np.float32), "sr": np.array(sr, np.int64)}


@pytest.mark.parametrize("mode", ["static", "auto", "dynamic"])
def test_branches_on_an_input_value_with_the_same_shapes(mode, device):
    m = sample_rate_model([1, 4, 128])
    compiled = aircc.compile(m, mode=mode)
    assert compiled.report.mode == ("dynamic" if mode == "dynamic" else "static")
    with aircc.load(compiled, device=device) as loaded:
        for sr in (16000, 8000):
            np.testing.assert_allclose(loaded.run(_feeds(sr))["y"], _ort(m, _feeds(sr))[0], rtol=1e-6)


def test_branches_on_an_input_value_with_other_shapes_name_the_if(device):
    m = sample_rate_model([1, 2, 256])
    with pytest.raises(CompileOptionError) as e:
        aircc.compile(m, mode="static")
    msg = str(e.value)
    assert "the branches of If node 'If_1' make different shapes" in msg and "'sr'" in msg
    assert "--input-shape" not in msg and "--mode dynamic" in msg
    compiled = aircc.compile(m, mode="auto")
    assert compiled.report.mode == "dynamic"
    with aircc.load(compiled, device=device) as loaded:
        for sr in (16000, 8000):
            got, want = loaded.run(_feeds(sr))["y"], _ort(m, _feeds(sr))[0]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("mode", ["static", "auto", "dynamic"])
def test_a_branch_that_cannot_run_with_these_shapes(mode, device):
    m = sample_rate_model([1, 3, -1])            # 512 samples do not split into 3 rows
    compiled = aircc.compile(m, mode=mode)
    assert compiled.report.mode == ("dynamic" if mode == "dynamic" else "static")
    if mode != "dynamic":                        # the dead branch is one failing task
        assert [n.op for n in compiled.graph.nodes].count("BranchFail") == 1
    ref = ReferenceEvaluator(m)
    with aircc.load(compiled, device=device) as loaded:
        np.testing.assert_allclose(loaded.run(_feeds(16000))["y"], ref.run(None, _feeds(16000))[0], rtol=1e-6)
        with pytest.raises(ShapeInferenceError, match=r"node 'Reshape_0' \(Reshape\): cannot reshape"):
            loaded.run(_feeds(8000))
        np.testing.assert_allclose(loaded.run(_feeds(16000))["y"], ref.run(None, _feeds(16000))[0], rtol=1e-6)


def test_a_branch_reads_an_outer_values_shape_in_static_mode(device):
    """A branch's ConstantOfShape(Shape(state)) of an input of the enclosing graph folds
    (silero-vad's LSTM state): the branch's shapes are all static."""
    body = _body("then", [helper.make_node("Shape", ["state"], ["s"]),
                          helper.make_node("ConstantOfShape", ["s"], ["z"],
                                           value=numpy_helper.from_array(np.array([1.0], np.float32))),
                          helper.make_node("Add", ["state", "z"], ["t"])], "t")
    other = _body("else", [helper.make_node("Neg", ["state"], ["e"])], "e")
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=other)],
              [tensor("state", [2, 1, 4]), tensor("c", [], TensorProto.BOOL)], [tensor("y", [2, 1, 4])])
    compiled = aircc.compile(m, mode="static")
    feeds = {"state": np.arange(8, dtype=np.float32).reshape(2, 1, 4), "c": np.array(True)}
    with aircc.load(compiled, device=device) as loaded:
        np.testing.assert_allclose(loaded.run(feeds)["y"], _ort(m, feeds)[0])


def test_static_mode_blames_an_input_only_when_its_shape_is_open():
    m = sample_rate_model([1, 4, 128])
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "T"
    with pytest.raises(CompileOptionError, match="input 'x' has shape \\[1, 'T'\\]; fix it with --input-shape"):
        aircc.compile(m, mode="static")


@pytest.mark.parametrize("target", ["cpu-avx2", "native"])
def test_a_scalar_input_reshaped_and_gathered_reads_each_runs_value(target, device):
    """silero-vad's torch.export: ``Gather(Reshape(sr, [1]), 0) == 16000`` picks the branch.
    The bound Gather of one index used to keep a copy of the element it read at load
    (a numpy scalar, not a view): every run compared the first run's garbage."""
    m = model([helper.make_node("Reshape", ["sr", "shape"], ["r"]),
               helper.make_node("Gather", ["r", "idx"], ["g"], axis=0),
               helper.make_node("Add", ["g", "one"], ["y"])],
              [tensor("sr", [], TensorProto.INT64)], [tensor("y", [], TensorProto.INT64)],
              [const("shape", np.array([1], np.int64)), const("idx", np.array(0, np.int64)),
               const("one", np.array(1, np.int64))], opset=18)
    with aircc.load(aircc.compile(m, mode="static", target=target), device=device) as loaded:
        for sr in (16000, 8000):
            assert int(loaded.run({"sr": np.array(sr, np.int64)})["y"]) == sr + 1


def test_static_mode_names_a_fallback_kernel_that_leaves_a_shape_open():
    m = model([helper.make_node("NonZero", ["x"], ["y"])], [tensor("x", [3, 4])],
              [tensor("y", [2, "n"], TensorProto.INT64)])
    with pytest.raises(CompileOptionError) as e:
        aircc.compile(m, mode="static")
    assert "node 'NonZero_0' (NonZero) runs on the fallback kernel" in str(e.value)
    assert "values only known at run time (it depends on 'x')" in str(e.value)

"""Each pass: what it changes, that the IR stays valid, and that numbers do not change."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from aircc.compiler.context import CompileContext
from aircc.compiler.frontend.onnx_import import import_onnx
from aircc.compiler.ir.graph import Graph, Node, device_node
from aircc.compiler.ir.verifier import verify
from aircc.compiler.passes.eliminate_dead_code import eliminate_dead_code
from aircc.compiler.passes.fold_constants import fold_constants
from aircc.compiler.passes.infer_shapes import infer_shapes
from aircc.compiler.passes.base import compile_pass
from aircc.compiler.passes.pipeline import PASSES, get_pass, run_pipeline
from aircc.compiler.passes.remove_identity import remove_identity
from aircc.errors import PassError, ShapeInferenceError, UnsupportedOpError
from testdata import LIGHT_MODELS, light_path
from graphs import const, diamond, model, run_ir, tensor


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_infer_shapes_agrees_with_onnx_shape_inference(name):
    proto = onnx.load(light_path(name))
    inferred = onnx.shape_inference.infer_shapes(proto)
    expected = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
                for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    g = run_pipeline(import_onnx(proto), ["infer-shapes", "fold-constants", "infer-shapes"])
    compared = 0
    for value, dims in expected.items():
        if value in g.types and dims and all(dims):
            assert list(g.types[value].shape) == dims, value
            compared += 1
    assert compared >= len(g.nodes) // 2


def test_infer_shapes_reports_incompatible_shapes_with_node_name():
    g = Graph(inputs=["x", "y"], outputs=["z"])
    from aircc.compiler.ir.graph import TensorType
    g.types.update(x=TensorType("float32", (2, 3)), y=TensorType("float32", (4, 3)))
    g.nodes = [Node("Add", ["x", "y"], ["z"], name="add", version=17)]
    with pytest.raises(ShapeInferenceError, match="add"):
        infer_shapes(g)


def test_unknown_op_is_refused_with_node_op_domain_and_opset():
    g = Graph(inputs=["x"], outputs=["y"])
    from aircc.compiler.ir.graph import TensorType
    g.types["x"] = TensorType("float32", (2,))
    g.nodes = [Node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example", version=3)]
    with pytest.raises(UnsupportedOpError) as e:
        infer_shapes(g)
    assert "fancy" in str(e.value) and "FancyOp" in str(e.value)
    assert "com.example" in str(e.value) and "opset 3" in str(e.value)


@pytest.mark.parametrize("name", ["bvlc_alexnet", "squeezenet", "densenet121"])
def test_fold_constants_turns_constantofshape_into_weights(name):
    g = infer_shapes(import_onnx(light_path(name)))
    before = len(g.nodes)
    assert any(n.op == "ConstantOfShape" for n in g.nodes)
    ctx = CompileContext()
    fold_constants(g, ctx)
    verify(g)
    assert not any(n.op in ("ConstantOfShape", "Unsqueeze") for n in g.nodes)
    assert ctx.stats["folded_nodes"] >= before - len(g.nodes) > 0
    conv = next(n for n in g.nodes if n.op == "Conv")
    w = g.constants[conv.inputs[1]]
    assert w.ndim == 4 and w.dtype == np.float32
    np.testing.assert_array_equal(w, np.full(w.shape, w.flat[0]))


def test_fold_constants_keeps_numbers():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = model([helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", 1, [3], [1, 2, 3])),
               helper.make_node("Mul", ["c", "c"], ["c2"]),
               helper.make_node("Shape", ["x"], ["s"]),
               helper.make_node("Reshape", ["x", "s"], ["xr"]),
               helper.make_node("Add", ["xr", "c2"], ["y"])],
              [tensor("x", [2, 3])], [tensor("y", [2, 3])])
    g = infer_shapes(import_onnx(m))
    expected = run_ir(g, {"x": x})["y"]
    fold_constants(g)
    verify(g)
    assert [n.op for n in g.nodes] == ["Reshape", "Add"]   # Constant, Mul and Shape folded
    np.testing.assert_array_equal(g.constants["c2"], [1, 4, 9])
    np.testing.assert_array_equal(run_ir(g, {"x": x})["y"], expected)


def test_fold_constants_reports_a_kernel_that_fails_on_its_constants():
    """A Gather whose constant indices are out of range fails the compile naming the node,
    not with the kernel's IndexError."""
    m = model([helper.make_node("Gather", ["data", "idx"], ["g"], axis=0, name="pick"),
               helper.make_node("Add", ["x", "g"], ["y"])],
              [tensor("x", [1, 3])], [tensor("y", [1, 3])],
              [const("data", np.zeros((2, 3), np.float32)), const("idx", np.array([5], np.int64))])
    g = infer_shapes(import_onnx(m))
    with pytest.raises(ShapeInferenceError, match="node 'pick' \\(Gather\\): constant folding "
                                                  "failed: IndexError: index 5 is out of bounds"):
        fold_constants(g)


def test_dce_removes_dead_nodes_and_constants_but_keeps_sync_ops():
    m = model([helper.make_node("Relu", ["x"], ["y"]),
               helper.make_node("Mul", ["x", "k"], ["dead"]),
               helper.make_node("Tanh", ["dead"], ["dead2"])],
              [tensor("x", [4])], [tensor("y", [4])], [const("k", np.ones(4, np.float32))])
    g = infer_shapes(import_onnx(m))
    g.nodes.append(device_node("EventRecord", [], [], {"event": 0}, "rec"))
    g.nodes.append(device_node("MemcpyD2H", ["y"], [], {"binding": 0}, "d2h"))
    ctx = CompileContext()
    eliminate_dead_code(g, ctx)
    verify(g)
    assert [n.op for n in g.nodes] == ["Relu", "EventRecord", "MemcpyD2H"]
    assert "k" not in g.constants and "dead" not in g.types
    assert ctx.stats["dead_nodes"] == 2


def test_remove_identity_and_inference_dropout_keeps_output_names():
    m = model([helper.make_node("Relu", ["x"], ["a"]),
               helper.make_node("Identity", ["a"], ["b"]),
               helper.make_node("Dropout", ["b"], ["c"]),
               helper.make_node("Tanh", ["c"], ["d"]),
               helper.make_node("Identity", ["d"], ["out"]),
               helper.make_node("Identity", ["x"], ["copy"])],
              [tensor("x", [3])], [tensor("out", [3]), tensor("copy", [3])])
    g = infer_shapes(import_onnx(m))
    x = np.array([-1, 0.5, 2], np.float32)
    expected = run_ir(g, {"x": x})
    remove_identity(g)
    verify(g)
    assert [n.op for n in g.nodes] == ["Relu", "Tanh", "Identity"]   # input->output copy stays
    assert g.outputs == ["out", "copy"]
    assert g.nodes[1].outputs == ["out"]
    for k, v in run_ir(g, {"x": x}).items():
        np.testing.assert_array_equal(v, expected[k])


def test_dropout_with_used_mask_stays():
    m = model([helper.make_node("Dropout", ["x"], ["y", "mask"])],
              [tensor("x", [3])], [tensor("y", [3]), tensor("mask", [3], onnx.TensorProto.BOOL)])
    g = infer_shapes(import_onnx(m))
    remove_identity(g)
    assert [n.op for n in g.nodes] == ["Dropout"]


def test_pipeline_by_names_verifies_after_each_pass_and_rejects_unknown_names():
    g = import_onnx(diamond())
    run_pipeline(g, ["infer-shapes", "fold-constants", "dce"])
    assert set(PASSES) >= {"infer-shapes", "fold-constants", "dce", "remove-identity"}
    with pytest.raises(PassError, match="known passes"):
        get_pass("no-such-pass")

    def breaks_ir(graph, ctx):
        graph.outputs.append("ghost")
        return graph

    compile_pass("break")(breaks_ir)
    try:
        from aircc.errors import VerificationError
        with pytest.raises(VerificationError, match="ghost"):
            run_pipeline(import_onnx(diamond()), ["infer-shapes", "break"])
    finally:
        del PASSES["break"]

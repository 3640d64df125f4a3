"""The IR: import, printer, verifier, and the compile driver that runs them."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from aircc.compiler.frontend.onnx_import import import_onnx
from aircc.compiler.ir.graph import Graph, Node, TensorType, device_node
from aircc.compiler.ir.printer import print_graph
from aircc.compiler.ir.verifier import verify
from aircc.compiler.passes.infer_shapes import infer_shapes
from aircc.compiler.passes.pipeline import run_pipeline
from aircc.errors import CompileOptionError, ModelImportError, VerificationError
from aircc.ops import all_definitions
from graphs import diamond, model, tensor
from testdata import light_path


def test_import_keeps_weights_listed_as_inputs_as_constants():
    g = import_onnx(light_path("bvlc_alexnet"))
    assert g.inputs == ["data_0"]
    assert "conv1_w_0__SHAPE" in g.constants
    assert g.types["data_0"] == TensorType("float32", (1, 3, 224, 224))


def test_import_symbolic_dims_and_input_shape_override():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", ["batch", 8])], [tensor("y", ["batch", 8])])
    assert import_onnx(m).types["x"].shape == ("batch", 8)
    assert import_onnx(m, {"x": [3, 8]}).types["x"].shape == (3, 8)
    with pytest.raises(CompileOptionError, match="--input-shape for 'x' has rank 1, the model says rank 2"):
        import_onnx(m, {"x": [3]})
    with pytest.raises(CompileOptionError, match=r"unknown inputs \['nope'\]; the model's inputs are \['x'\]"):
        import_onnx(m, {"nope": [1]})


def test_import_rejects_unreadable_and_invalid_models(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not a model")
    with pytest.raises(ModelImportError):
        import_onnx(str(bad))
    with pytest.raises(ModelImportError, match="not found"):
        import_onnx(str(tmp_path / "missing.onnx"))
    m = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])])
    m.graph.node[0].input[0] = "undefined_value"
    with pytest.raises(ModelImportError, match="checker"):
        import_onnx(m)


def test_import_refuses_opsets_aircc_does_not_support_and_graphs_without_outputs():
    from aircc.ops.catalog import supported_opsets

    first, last = supported_opsets()
    assert first == 1 and last == onnx.defs.onnx_opset_version()
    assert all(d.since <= last for d in all_definitions() if not d.domain)
    relu = ([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1])], [tensor("y", [1])])
    assert import_onnx(model(*relu, opset=last)).opsets[""] == last
    with pytest.raises(ModelImportError, match=f"opset {last + 1} of the default domain is newer "
                                               f"than aircc supports \\(1 to {last},"):
        import_onnx(model(*relu, opset=last + 1))
    empty = helper.make_model(helper.make_graph([], "g", [], []), ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelImportError, match="no outputs"):
        import_onnx(empty)


def test_printer_shows_types_attrs_and_quotes_names():
    g = run_pipeline(import_onnx(light_path("zfnet512")))
    text = print_graph(g)
    assert text.startswith('graph @main(%"gpu_0/data_0": float32[1,3,224,224])')
    assert "Conv(" in text and "kernel_shape=[7,7]" in text
    assert "dense<sha1:" in text          # big weights print as a digest
    # every node appears once, in order
    assert text.count(" = ") >= len(g.nodes)
    assert [line.split("= ")[1].split("(")[0] for line in text.splitlines()
            if line.strip().startswith("%") and "= " in line][: 3] == [n.op for n in g.nodes[:3]]


def test_printer_symbols_and_small_constants_inline():
    g = Graph(inputs=["x"], outputs=["y"], types={"x": TensorType("float32", ("N", 2))})
    g.constants["k"] = np.array([1.0, 2.0], np.float32)
    g.nodes.append(Node("Mul", ["x", "k"], ["y"], name="m", version=17))
    infer_shapes(g)
    text = print_graph(g)
    assert "%x: float32[?N,2]" in text
    assert "const %k: float32[2] = dense[1.0,2.0]" in text
    assert '%y: float32[?N,2] = Mul(%x, %k) {name="m", v=17}' in text


def _tiny() -> Graph:
    g = Graph(inputs=["x"], outputs=["z"], types={"x": TensorType("float32", (2,))})
    g.nodes = [Node("Relu", ["x"], ["y"], name="a", version=17),
               Node("Relu", ["y"], ["z"], name="b", version=17)]
    return infer_shapes(g)


def test_verifier_accepts_valid_graph():
    verify(_tiny())
    verify(infer_shapes(import_onnx(diamond())))


@pytest.mark.parametrize("breakage, message", [
    (lambda g: g.nodes.reverse(), "before it is defined"),
    (lambda g: setattr(g.nodes[1], "outputs", ["y"]), "more than once"),
    (lambda g: setattr(g.nodes[1], "name", "a"), "used twice"),
    (lambda g: g.outputs.append("ghost"), "not defined"),
    (lambda g: g.types.pop("y"), "no type"),
    (lambda g: g.constants.__setitem__("x", np.zeros(1)), "more than once"),
    (lambda g: g.nodes[0].meta.__setitem__("stream", 0), "has no stream"),
])
def test_verifier_rejects(breakage, message):
    g = _tiny()
    breakage(g)
    with pytest.raises(VerificationError, match=message):
        verify(g)


def test_verifier_rejects_wait_before_record():
    g = _tiny()
    for n in g.nodes:
        n.meta["stream"] = 0
    g.nodes.insert(0, device_node("EventWait", [], [], {"event": 0}, "w", stream=1))
    g.nodes.append(device_node("EventRecord", [], [], {"event": 0}, "r", stream=0))
    with pytest.raises(VerificationError, match="before it is recorded"):
        verify(g)


def test_verifier_checks_nested_regions_with_captures():
    g = _tiny()
    body = Graph(name="body", outputs=["w"])
    body.nodes = [Node("Relu", ["y"], ["w"], name="inner", version=17)]   # captures y
    body.types["w"] = TensorType("float32", (2,))
    g.nodes[1].regions.append(body)
    verify(g)
    body.nodes[0].inputs = ["z"]   # z is defined after the node holding the region
    with pytest.raises(VerificationError, match="before it is defined"):
        verify(g)


@pytest.mark.parametrize("name", ["inception_v1", "shufflenet"])
def test_print_parse_print_round_trips(name):
    from aircc.compiler.ir.parser import parse_graph
    from aircc.compiler.schedule.events import insert_events
    from aircc.compiler.schedule.memcpy import insert_memcpy
    from aircc.compiler.schedule.streams import assign_streams

    for g in (import_onnx(light_path(name)),
              insert_events(assign_streams(insert_memcpy(run_pipeline(import_onnx(light_path(name))))))):
        text = print_graph(g)
        again = parse_graph(text, g.constants)
        verify(again, require_types=False)
        assert print_graph(again) == text
        assert [n.meta.get("stream") for n in again.nodes] == [n.meta.get("stream") for n in g.nodes]


def test_regions_print_and_parse_with_the_attribute_they_came_from():
    from aircc.compiler.ir.parser import parse_graph
    from graphs import tensor as vi

    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Relu", ["h_in"], ["h_out"])], "loop_body",
                             [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL),
                              vi("h_in", [2])], [vi("c_out", [], TensorProto.BOOL), vi("h_out", [2])])
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)], "g",
        [vi("n", [], TensorProto.INT64), vi("x", [2])], [vi("y", [2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    g = import_onnx(m)
    text = print_graph(g)
    assert "graph @loop_body(" in text and ") as body {" in text
    again = parse_graph(text, g.constants)
    assert again.nodes[0].regions[0].meta["attribute"] == "body"
    assert print_graph(again) == text


def test_parser_reports_errors_and_needs_resources_for_digests():
    from aircc.compiler.ir.parser import parse_graph
    from aircc.errors import IRParseError

    g = Graph(inputs=["x"], outputs=["x"], types={"x": TensorType("float32", (2,))})
    g.constants["w"] = np.zeros(100, np.float32)
    text = print_graph(g)
    with pytest.raises(IRParseError, match="resources"):
        parse_graph(text)
    np.testing.assert_array_equal(parse_graph(text, {"w": g.constants["w"]}).constants["w"], 0)
    with pytest.raises(IRParseError, match="closing brace"):
        parse_graph(text.rsplit("}", 1)[0], {"w": g.constants["w"]})
    with pytest.raises(IRParseError, match="unexpected character"):
        parse_graph(text.replace("float32[2]", "float32[2]$"), {"w": g.constants["w"]})


def test_compile_pauses_the_cyclic_gc_and_restores_it(monkeypatch):
    import gc

    from aircc.compiler import stages
    from aircc.compiler.driver import CompileOptions, compile_model, cyclic_gc_paused

    seen = []
    real_import = stages.import_onnx

    def spy(source, shapes):
        seen.append(gc.isenabled())
        return real_import(source, shapes)

    monkeypatch.setattr(stages, "import_onnx", spy)
    was = gc.isenabled()
    try:
        gc.enable()
        compile_model(model([helper.make_node("Relu", ["x"], ["y"])],
                            [tensor("x", [1, 4])], [tensor("y", [1, 4])]), CompileOptions())
        assert seen == [False] and gc.isenabled()
        gc.disable()                        # a caller's choice to keep it off stays
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        gc.enable()
        with pytest.raises(RuntimeError):   # restored when the compile fails too
            with cyclic_gc_paused():
                raise RuntimeError("boom")
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()

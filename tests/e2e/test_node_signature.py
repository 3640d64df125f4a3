"""A node's attributes and inputs are checked against its op at load (formats/node_signature.py):
an attribute of the wrong type (a LayerNormalization's epsilon of 'bogus' used to raise
ValueError in the middle of a run), inputs emptied, a node writing its own input or a value
another node writes, more dims than kernels take, streams no node uses: each is a
ModelFormatError naming the node and the field, in static and dynamic files alike."""
from __future__ import annotations

import copy

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from aircc.errors import AirccError, ModelFormatError
from aircc.formats import OmFile
from graphs import const, model, tensor
from test_om_contract import forge


def _net() -> onnx.ModelProto:
    """x[N, 6] -> MatMul (6x4) -> LayerNormalization -> Relu."""
    rng = np.random.default_rng(3)
    return model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                  helper.make_node("LayerNormalization", ["m", "g", "b"], ["n"], name="ln",
                                   axis=-1, epsilon=1e-5),
                  helper.make_node("Relu", ["n"], ["y"], name="relu")],
                 [tensor("x", ["N", 6])], [tensor("y", ["N", 4])],
                 [const("w", rng.standard_normal((6, 4)).astype(np.float32)),
                  const("g", np.ones(4, np.float32)), const("b", np.zeros(4, np.float32))])


@pytest.fixture(scope="module")
def dynamic_om() -> OmFile:
    return aircc.compile(_net(), mode="dynamic").om


@pytest.fixture(scope="module")
def static_om() -> OmFile:
    return aircc.compile(_net(), input_shapes={"x": [2, 6]}, mode="static").om


def _node(om: OmFile, name: str) -> tuple[str, dict, dict]:
    """(path of the node in its section, the node, the copy's sections) for a mutated copy."""
    sections = copy.deepcopy(om.sections)
    if om.mode == "dynamic":
        i, node = next((i, n) for i, n in enumerate(sections["exec_graph"]["nodes"]) if n["name"] == name)
        return f"nodes[{i}]", node, sections
    s, i, node = next((s, i, t) for s, tl in enumerate(sections["tasks"]["lists"])
                      for i, t in enumerate(tl) if t.get("node") == name)
    return f"lists[{s}][{i}]", node, sections


def _refused(om: OmFile, sections: dict, *fragments: str) -> str:
    with pytest.raises(ModelFormatError) as e:
        aircc.load(forge(OmFile(om.mode, sections, om.weights)))
    for f in fragments:
        assert f in str(e.value), str(e.value)
    return str(e.value)


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_an_attribute_of_the_wrong_type_is_refused_at_load(mode, dynamic_om, static_om):
    """The reported case (epsilon 'bogus') and other wrong types, each named with its node."""
    om = dynamic_om if mode == "dynamic" else static_om
    section = "exec_graph" if mode == "dynamic" else "tasks"
    for name, attr, value, kind in [("ln", "epsilon", "bogus", "a number"),
                                    ("ln", "axis", 1.5, "an int"),
                                    ("ln", "axis", [1], "an int"),
                                    ("mm", "fused_activation", {"op": {}, "attrs": "Tanh"}, "{'op': str"),
                                    ("relu", "channels_last", "yes", "an int"),
                                    ("relu", "extra", {"a": 1}, "a number, a str, an array")]:
        where, node, sections = _node(om, name)
        node["attrs"][attr] = value
        _refused(om, sections, f"section '{section}': {where}.attrs.{attr} of node '{name}' must be "
                               f"{kind}")


def test_a_missing_required_attribute_is_refused(dynamic_om):
    where, node, sections = _node(dynamic_om, "relu")
    node["op"], node["attrs"] = "Cast", {}
    _refused(dynamic_om, sections, f"{where}.attrs of node 'relu' lack 'to', which Cast")


def test_node_inputs_emptied_or_too_many_are_refused(dynamic_om, static_om):
    where, node, sections = _node(dynamic_om, "mm")
    node["inputs"] = []
    _refused(dynamic_om, sections, f"{where}.inputs of node 'mm' are 0, but MatMul (opset 13) takes 2")
    where, node, sections = _node(dynamic_om, "ln")
    node["inputs"][1] = ""
    _refused(dynamic_om, sections, f"{where}.inputs[1] of node 'ln' is empty, but "
                                   f"LayerNormalization needs it")
    where, node, sections = _node(static_om, "relu")
    node["inputs"] = node["inputs"] * 3
    _refused(static_om, sections, f"{where}.inputs of node 'relu' are 3, but Relu (opset 14) takes 1")


def test_node_inputs_reordered_run_to_an_aircc_error_naming_the_node(dynamic_om, tmp_path):
    """Reordered inputs keep the op's arity, so the file loads; the run then fails with
    aircc's shape error for that node, and the unmutated file matches onnxruntime."""
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    path = str(tmp_path / "net.onnx")
    onnx.save(_net(), path)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with aircc.load(forge(dynamic_om)) as m:
        np.testing.assert_allclose(m.run({"x": x})["y"], ref, rtol=1e-5, atol=1e-5)
    _, node, sections = _node(dynamic_om, "mm")
    node["inputs"].reverse()
    with aircc.load(forge(OmFile(dynamic_om.mode, sections, dynamic_om.weights))) as m:
        with pytest.raises(AirccError, match="mm"):
            m.run({"x": x})


def test_a_node_writing_its_input_or_anothers_value_is_refused(dynamic_om):
    """The dynamic path's version of overlapping operands: values are blocks the runtime
    allocates per name, so a name written twice, or written by its own reader, would alias."""
    where, node, sections = _node(dynamic_om, "relu")
    node["outputs"] = [node["inputs"][0]]
    _refused(dynamic_om, sections, f"{where}.outputs[0] of node 'relu' is value", "which is also its input")
    where, node, sections = _node(dynamic_om, "relu")
    mm = next(n for n in sections["exec_graph"]["nodes"] if n["name"] == "mm")
    node["outputs"] = list(mm["outputs"])
    _refused(dynamic_om, sections, f"{where}.outputs[0] of node 'relu'", "writes too")
    where, node, sections = _node(dynamic_om, "relu")
    node["outputs"] = ["w"]
    _refused(dynamic_om, sections, "which is given (a model input, a weight or a body's input)")


def test_more_dims_than_kernels_take_are_refused(dynamic_om, static_om):
    sections = copy.deepcopy(dynamic_om.sections)
    v = sections["exec_graph"]["values"]
    name = next(iter(v))
    v[name]["shape"] = [1] * 13
    _refused(dynamic_om, sections, f"values['{name}'].shape has 13 dims; a tensor has at most 12")
    where, node, sections = _node(static_om, "relu")
    node["outputs"][0]["shape"] = [1] * 13
    _refused(static_om, sections, f"{where}.outputs[0].shape has 13 dims")


def test_streams_no_node_runs_on_are_refused(dynamic_om):
    """Each stream is a worker thread: a file declaring 256 streams for one would start 256."""
    sections = copy.deepcopy(dynamic_om.sections)
    sections["exec_graph"]["streams"] = 256
    _refused(dynamic_om, sections, "section 'exec_graph': streams is 256, but no node runs on stream 1")

"""The importer takes onnxruntime's contrib ops of the default domain (the ones the onnx
checker refuses: LayerNormalization before opset 17, SimplifiedLayerNormalization,
ThresholdedRelu before 10, MeanVarianceNormalization before 9) and nothing else the checker
refuses; the model given is left as it was."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import aircc
from aircc.compiler.frontend.onnx_import import import_onnx
from aircc.errors import ModelImportError, UnsupportedOpError
from graphs import const, tensor


def _model(nodes, opset: int, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [tensor("x", [2, 3, 4])], [tensor("y", [2, 3, 4])], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


SCALE = const("s", np.array([1.0, 0.5, 2.0, 1.0], np.float32))


def _norms(opset: int = 14) -> onnx.ModelProto:
    return _model([helper.make_node("LayerNormalization", ["x", "s"], ["n"], epsilon=1e-3),
                   helper.make_node("SimplifiedLayerNormalization", ["n", "s"], ["r"]),
                   helper.make_node("ThresholdedRelu", ["r"], ["y"], alpha=0.1)], opset, [SCALE])


def test_onnxruntime_default_domain_ops_import_and_the_model_stays_as_it_was():
    m = _norms(9)
    before = m.SerializeToString()
    graph = import_onnx(m)
    assert m.SerializeToString() == before
    assert [(n.op, n.domain, n.version) for n in graph.nodes] == [
        ("LayerNormalization", "", 9), ("SimplifiedLayerNormalization", "", 9), ("ThresholdedRelu", "", 9)]
    compiled = aircc.compile(m, mode="dynamic")
    assert compiled.report.fallback_nodes == []
    assert [(n.op, n.version) for n in compiled.graph.nodes if n.op == "LayerNormalization"] == [
        ("LayerNormalization", 17)]                               # lower-contrib: opset 17's


def test_the_checker_still_checks_everything_else():
    bad = helper.make_node("NoSuchOp", ["x"], ["z"])
    for nodes, opset, what in (
            ([helper.make_node("LayerNormalization", ["x", "s"], ["n"]), bad], 14, "NoSuchOp"),
            ([helper.make_node("ThresholdedRelu", ["x"], ["y"]), helper.make_node("Relu", ["nowhere"], ["z"])], 9,
             "nowhere"),                                           # an input nothing makes
            ([helper.make_node("Gelu", ["x"], ["y"])], 17, "Gelu")):   # an op of a later opset
        m = _model(nodes, opset, [SCALE])
        before = m.SerializeToString()
        with pytest.raises(ModelImportError, match="checker") as e:
            import_onnx(m)
        assert what in str(e.value)
        assert m.SerializeToString() == before


def test_onnxruntime_ops_only_at_their_opsets():
    """ThresholdedRelu at opset 10 is ONNX's (checked as such); an old MeanVarianceNormalization
    passes the checker and is refused by name, since aircc has no kernel of that version."""
    m = _model([helper.make_node("ThresholdedRelu", ["x", "x"], ["y"])], 10)
    with pytest.raises(ModelImportError, match="checker"):
        import_onnx(m)
    m = _model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], across_channels=0)], 8)
    with pytest.raises(UnsupportedOpError, match="MeanVarianceNormalization"):
        aircc.compile(m, mode="dynamic")

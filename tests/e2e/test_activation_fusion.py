"""Activations fused into the convolution or matrix product before them, where the target's
kernel runs them as part of its epilogue (the oneDNN backend's, as post-ops): the same
numbers as onnxruntime, and nothing fused for a backend that does not run them."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from graphs import const, model, tensor
from testdata import numpy_target

rng = np.random.default_rng(0)
CLIP = [const("lo", np.array(0.0, np.float32)), const("hi", np.array(6.0, np.float32))]


def conv_then(op: str, **attrs):
    w = const("w", rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.3)
    b = const("b", rng.standard_normal(16).astype(np.float32))
    inputs = ["c", "lo", "hi"] if op == "Clip" else ["c"]
    return model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                  helper.make_node(op, inputs, ["y"], **attrs)],
                 [tensor("x", [2, 8, 12, 12])], [tensor("y", [2, 16, 12, 12])],
                 [w, b] + (CLIP if op == "Clip" else []), opset=20)


def matmul_then(op: str, **attrs):
    w = const("w", rng.standard_normal((64, 96)).astype(np.float32) * 0.2)
    return model([helper.make_node("MatMul", ["x", "w"], ["m"]),
                  helper.make_node(op, ["m"], ["y"], **attrs)],
                 [tensor("x", [4, 32, 64])], [tensor("y", [4, 32, 96])], [w], opset=20)


CASES = [("Clip", conv_then("Clip")), ("HardSwish", conv_then("HardSwish")),
         ("Sigmoid", conv_then("Sigmoid")), ("LeakyRelu", conv_then("LeakyRelu", alpha=0.2)),
         ("Gelu", matmul_then("Gelu")), ("Tanh", matmul_then("Tanh")),
         ("HardSigmoid", matmul_then("HardSigmoid", alpha=0.25, beta=0.4))]


@pytest.mark.parametrize("op,proto", CASES, ids=[c[0] for c in CASES])
def test_an_activation_fuses_into_a_dnnl_kernel_and_matches_onnxruntime(op, proto, device):
    x = rng.standard_normal([d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim])
    feeds = {"x": x.astype(np.float32)}
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    fused = aircc.compile(proto, target="dnnl-avx2")
    producer = next(n for n in fused.graph.nodes if n.op in ("Conv", "MatMul"))
    assert producer.attrs["fused_activation"]["op"] == op
    assert not any(n.op == op for n in fused.graph.nodes)
    plain = aircc.compile(proto, target=numpy_target())
    assert any(n.op == op for n in plain.graph.nodes)
    for compiled in (fused, plain):
        with aircc.load(compiled, device=device) as m:
            np.testing.assert_allclose(m.run(feeds)["y"], want, rtol=1e-4, atol=2e-5)


def test_a_fused_activation_aircc_does_not_know_is_refused_by_name(device):
    """A file whose fused_activation is not one of aircc's is refused when it loads (static)
    or when the node's shape is inferred (dynamic): the error names it."""
    import copy

    from test_om_contract import forge
    from aircc.errors import ModelFormatError, ShapeInferenceError
    from aircc.formats import OmFile

    proto = conv_then("HardSwish")
    for mode in ("static", "dynamic"):
        om = aircc.compile(proto, target="dnnl-avx2", mode=mode).om
        sections = copy.deepcopy(om.sections)
        nodes = (sections["exec_graph"]["nodes"] if mode == "dynamic"
                 else [t for tl in sections["tasks"]["lists"] for t in tl if t["kind"] == "kernel"])
        node = next(n for n in nodes if "fused_activation" in n["attrs"])
        node["attrs"]["fused_activation"] = {"op": "Swish", "attrs": {}}
        forged = forge(OmFile(om.mode, sections, om.weights))
        error = ModelFormatError if mode == "static" else ShapeInferenceError
        with pytest.raises(error, match="fused_activation .*Swish.* is not one of Clip"):
            with aircc.load(forged, device=device) as m:
                m.run({"x": np.zeros((2, 8, 12, 12), np.float32)})

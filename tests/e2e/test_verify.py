"""``aircc verify`` / ``aircc.verify`` / ``aircc compile --verify``: a model against
onnxruntime (or onnx's ReferenceEvaluator) in both modes, and the first diverging node
found when a kernel is broken on purpose (the ``corrupt`` fault, or a patched kernel)."""
from __future__ import annotations

import json
import sys

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import aircc
from aircc import faults
from aircc.cli.aircc_cmd import main as aircc_cli
from aircc.ops import kernel_backend, resolve_target
from aircc.verification.inputs import make_feeds, model_inputs
from testdata import SAMPLES

MLP = f"{SAMPLES}/mlp.onnx"
#: The chain's nodes in order, and the ops they are.
CHAIN = [("conv1", "Conv"), ("pool1", "MaxPool"), ("conv2", "Conv"), ("relu2", "Relu"),
         ("mul1", "Mul"), ("sig1", "Sigmoid"), ("add1", "Add"), ("tanh1", "Tanh")]


@pytest.fixture(autouse=True)
def _no_faults(no_faults_left):
    yield


def _write(model: onnx.ModelProto, path) -> str:
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return str(path)


def conv_net(path) -> str:
    """A small conv net: Conv, BatchNormalization, Relu, MaxPool, Conv, GlobalAveragePool,
    Flatten, Gemm, Softmax; batch symbolic."""
    rng = np.random.default_rng(1)
    w = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.3  # noqa: E731
    inits = [nh.from_array(a, n) for n, a in [
        ("W1", w(8, 3, 3, 3)), ("B1", w(8)), ("g", np.abs(w(8)) + 0.5), ("b", w(8)),
        ("mean", w(8)), ("var", np.abs(w(8)) + 0.5), ("W2", w(16, 8, 3, 3)), ("B2", w(16)),
        ("Wf", w(16, 10)), ("Bf", w(10))]]
    nodes = [h.make_node("Conv", ["x", "W1", "B1"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c1", "g", "b", "mean", "var"], ["bn"], "bn1"),
             h.make_node("Relu", ["bn"], ["r1"], "relu1"),
             h.make_node("MaxPool", ["r1"], ["p1"], "pool1", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "W2", "B2"], ["c2"], "conv2", pads=[1, 1, 1, 1]),
             h.make_node("GlobalAveragePool", ["c2"], ["gap"], "gap1"),
             h.make_node("Flatten", ["gap"], ["f"], "flat1"),
             h.make_node("Gemm", ["f", "Wf", "Bf"], ["logits"], "fc1"),
             h.make_node("Softmax", ["logits"], ["probs"], "softmax1", axis=1)]
    g = h.make_graph(nodes, "convnet", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 16, 16])],
                     [h.make_tensor_value_info("probs", T.FLOAT, ["N", 10])], inits)
    return _write(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def chain_net(path) -> str:
    """Eight nodes in a line (:data:`CHAIN`): the compiler fuses relu2 into conv2's kernel
    and mul1 .. tanh1 into one elementwise chain named mul1/chain."""
    rng = np.random.default_rng(2)
    inits = [nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W1"),
             nh.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "W2"),
             nh.from_array(np.float32([0.5]), "k"), nh.from_array(np.float32([0.25]), "c")]
    ins = {"conv1": ["x", "W1"], "pool1": ["v0"], "conv2": ["v1", "W2"], "relu2": ["v2"],
           "mul1": ["v3", "k"], "sig1": ["v4"], "add1": ["v5", "c"], "tanh1": ["v6"]}
    attrs = {"conv1": {"pads": [1, 1, 1, 1]}, "conv2": {"pads": [1, 1, 1, 1]},
             "pool1": {"kernel_shape": [2, 2], "strides": [2, 2]}}
    nodes = [h.make_node(op, ins[name], ["y" if k == len(CHAIN) - 1 else f"v{k}"], name,
                         **attrs.get(name, {})) for k, (name, op) in enumerate(CHAIN)]
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 4, 4])], inits)
    return _write(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def reference_errors(model: str, feeds: dict, mode: str) -> dict[str, float]:
    """Max abs error of each output of aircc (``mode``) against onnxruntime, worked out here."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    shapes = {k: list(v.shape) for k, v in feeds.items()} if mode == "static" else None
    with aircc.load(aircc.compile(model, mode=mode, input_shapes=shapes)) as m:
        got = m.run(feeds)
    return {k: float(np.abs(got[k].astype(np.float64) - want[k]).max()) for k in want}


def run_cli(*args: str):
    return CliRunner().invoke(aircc_cli, list(args))


# ------------------------------------------------------------------ good models pass
def test_mlp_passes_in_both_modes_with_the_errors_onnxruntime_gives():
    report = aircc.verify(MLP, seed=7)
    assert report.passed and [m.mode for m in report.modes] == ["static", "dynamic"]
    assert report.reference.startswith("onnxruntime") and "ORT_ENABLE_BASIC" in report.reference
    assert [(f.name, f.shape, f.source) for f in report.inputs] == [("input", [1, 784], "generated")]
    feeds, _ = make_feeds(model_inputs(onnx.load(MLP)), {}, 7)
    for mode in report.modes:
        assert mode.status == "pass" and mode.bisection is None
        (probs,) = mode.outputs
        assert probs.name == "probs" and probs.shape == [1, 10] and probs.passed
        assert probs.max_abs == pytest.approx(reference_errors(MLP, feeds, mode.mode)["probs"],
                                              abs=1e-12)
        assert (probs.tolerance.rtol, probs.tolerance.atol) == (1e-3, 1e-4)


def test_conv_net_passes_on_the_command_line(tmp_path):
    model = conv_net(tmp_path / "convnet.onnx")
    r = run_cli("verify", model, "--input-shape", "x:2,3,16,16", "--json", str(tmp_path / "v.json"))
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[-1].startswith("PASS: static 1/1 outputs agree; dynamic 1/1 outputs agree")
    assert "input      x: float32[2, 3, 16, 16] (generated, seed 0)" in lines
    assert sum(line.strip().startswith("probs: float32[2, 10]") for line in lines) == 2
    data = json.loads((tmp_path / "v.json").read_text())
    assert data["passed"] and [m["status"] for m in data["modes"]] == ["pass", "pass"]
    feeds, _ = make_feeds(model_inputs(onnx.load(model)), {}, 0, {"x": [2, 3, 16, 16]})
    for m in data["modes"]:
        assert m["outputs"][0]["max_abs"] == pytest.approx(
            reference_errors(model, feeds, m["mode"])["probs"], abs=1e-12)


def test_default_symbolic_sizes_batch_one_others_eight():
    x = h.make_tensor_value_info("ids", T.INT64, ["batch", "seq"])
    mask = h.make_tensor_value_info("mask", T.BOOL, ["batch", "seq"])
    g = h.make_graph([], "g", [x, mask], [])
    feeds, infos = make_feeds(model_inputs(h.make_model(g)), {}, 3)
    assert feeds["ids"].shape == (1, 8) and feeds["mask"].shape == (1, 8)
    assert feeds["ids"].min() >= 0 and feeds["ids"].max() < 10 and feeds["mask"].dtype == bool
    given, _ = make_feeds(model_inputs(h.make_model(g)), {"ids": np.zeros((2, 5), np.int64)}, 3)
    assert given["mask"].shape == (2, 5)          # the symbols take the given feed's sizes


# ------------------------------------------------------------------ a broken kernel is named
@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_corrupted_node_in_the_middle_is_the_first_divergence(tmp_path, mode):
    model = chain_net(tmp_path / "chain.onnx")
    faults.inject("corrupt", node="pool1", times=0, value=50.0)
    report = aircc.verify(model, modes=(mode,))
    assert not report.passed
    result = report.mode(mode)
    assert result.status == "fail" and not result.outputs[0].passed
    b = result.bisection
    assert b.status == "found" and b.exposure == "every value"
    c = b.culprit
    assert (c.node, c.op, c.domain) == ("pool1", "MaxPool", "")
    assert c.kernel == "pool1" and c.backend in ("dnnl", "numpy") and c.fused_into is None
    assert [(i.name, i.shape, i.source, i.agrees) for i in c.inputs] == \
        [("v0", [1, 4, 8, 8], "node 'conv1'", True)]
    (out,) = c.outputs
    assert out.name == "v1" and out.mismatched >= 1 and out.max_abs == pytest.approx(50.0, rel=1e-3)


def test_the_command_line_names_the_node_and_exits_1(tmp_path):
    model = chain_net(tmp_path / "chain.onnx")
    faults.inject("corrupt", node="pool1", times=0, value=50.0)
    out = tmp_path / "v.json"
    r = run_cli("verify", model, "--json", str(out))
    assert r.exit_code == 1, r.output
    assert "first divergence node 'pool1' (MaxPool)" in r.output.splitlines()[-1]
    assert r.output.splitlines()[-1].startswith("FAIL: static 0/1 outputs agree")
    data = json.loads(out.read_text())
    assert not data["passed"]
    for m in data["modes"]:
        culprit = m["bisection"]["culprit"]
        assert (culprit["node"], culprit["op"]) == ("pool1", "MaxPool")
        assert culprit["outputs"][0]["max_abs"] == pytest.approx(50.0, rel=1e-3)
        assert m["outputs"][0]["mismatched"] >= 1 and not m["outputs"][0]["passed"]
    r = run_cli("verify", model, "--no-bisect", "--mode", "static")
    assert r.exit_code == 1 and "first divergence" not in r.output


@pytest.mark.parametrize("node, op, kernel, with_it", [
    ("conv2", "Conv", "conv2", ["conv2", "relu2"]),                      # Relu as an epilogue
    ("mul1", "Mul", "mul1/chain", ["mul1", "sig1", "add1", "tanh1"])])    # an elementwise chain
def test_a_node_fused_into_a_bigger_kernel_is_named_with_its_kernel(tmp_path, node, op, kernel,
                                                                      with_it):
    """A fault names a kernel by its first node; exposing every value undoes the fusion, so
    the first diverging ONNX node is that node, and the report says which kernel runs it
    in the model as compiled."""
    model = chain_net(tmp_path / "chain.onnx")
    compiled = aircc.compile(model, mode="static")
    assert kernel in [n.name for n in compiled.graph.nodes]          # fused as the test says
    assert not set(with_it[1:]) & {n.name for n in compiled.graph.nodes}
    faults.inject("corrupt", node=node, times=0, value=50.0)
    c = aircc.verify(model, modes=("static",)).mode("static").bisection.culprit
    assert (c.node, c.op) == (node, op)
    assert (c.fused_into, c.fused_nodes) == (kernel, with_it)


def test_a_fault_only_the_fused_kernel_has_names_that_kernel(tmp_path, monkeypatch):
    """A broken ElementwiseChain kernel: with every value exposed no chain is made and no
    node diverges, so the kernels' own outputs are exposed and the chain is named."""
    model = chain_net(tmp_path / "chain.onnx")
    backend = kernel_backend(resolve_target(None).backend)
    impl = backend.impl("ElementwiseChain", 1, "aircc")
    right = impl.kernel

    def wrong(ins, outs, attrs, tiling, ws):
        right(ins, outs, attrs, tiling, ws)
        outs[0][...] *= 1.5
    monkeypatch.setattr(impl, "kernel", wrong)
    monkeypatch.setattr(impl, "prepare", None)
    report = aircc.verify(model)
    for mode in report.modes:
        b = mode.bisection
        assert mode.status == "fail" and b.status == "found" and b.exposure == "kernel outputs"
        c = b.culprit
        assert (c.node, c.op, c.domain) == ("mul1/chain", "ElementwiseChain", "aircc")
        assert c.fused_nodes == ["mul1", "sig1", "add1", "tanh1"]
        assert sorted((i.name, i.source, i.agrees) for i in c.inputs) == \
            [("c", "initializer", None), ("k", "initializer", None), ("v3", "node 'relu2'", True)]


# ------------------------------------------------------------------ inputs
def test_seeded_inputs_are_reproducible_and_given_inputs_used_as_given(tmp_path):
    a, _ = make_feeds(model_inputs(onnx.load(MLP)), {}, 11)
    b, _ = make_feeds(model_inputs(onnx.load(MLP)), {}, 11)
    c, _ = make_feeds(model_inputs(onnx.load(MLP)), {}, 12)
    np.testing.assert_array_equal(a["input"], b["input"])
    assert not np.array_equal(a["input"], c["input"])
    figures = []
    for seed in ("11", "11"):
        out = tmp_path / f"s{len(figures)}.json"
        r = run_cli("verify", MLP, "--seed", seed, "--mode", "dynamic", "--json", str(out))
        assert r.exit_code == 0, r.output
        figures.append(json.loads(out.read_text())["modes"][0]["outputs"][0]["max_abs"])
    assert figures[0] == figures[1] == pytest.approx(
        reference_errors(MLP, a, "dynamic")["probs"], abs=1e-12)
    x = np.random.default_rng(5).uniform(-3, 3, (3, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "given.json"
    r = run_cli("verify", MLP, "--input", f"input={tmp_path / 'x.npy'}", "--json", str(out))
    assert r.exit_code == 0, r.output
    assert "input      input: float32[3, 784] (given)" in r.output
    data = json.loads(out.read_text())
    assert data["inputs"] == [{"name": "input", "dtype": "float32", "shape": [3, 784],
                               "source": "given"}]
    assert data["modes"][0]["outputs"][0]["max_abs"] == pytest.approx(
        reference_errors(MLP, {"input": x}, "static")["probs"], abs=1e-12)


def test_a_wrong_feed_name_is_an_input_error(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 784), np.float32))
    r = run_cli("verify", MLP, "--input", f"bogus={tmp_path / 'x.npy'}")
    assert r.exit_code == 4
    assert "error: [145200]" in r.output and "bogus" in r.output and "'input'" in r.output
    with pytest.raises(aircc.InputError, match="no input 'bogus'"):
        aircc.verify(MLP, {"bogus": np.zeros((1, 784), np.float32)})


def test_a_sequence_input_makes_static_not_applicable():
    seq = h.make_tensor_sequence_value_info("seq", T.FLOAT, [2, 3])
    g = h.make_graph([h.make_node("ConcatFromSequence", ["seq"], ["y"], "cat", axis=0)], "seq",
                     [seq], [h.make_tensor_value_info("y", T.FLOAT, [None, 3])])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(aircc.InputError, match="'seq' is a sequence"):
        aircc.verify(model)
    parts = [np.full((2, 3), k, np.float32) for k in range(3)]
    report = aircc.verify(model, {"seq": parts})
    static, dynamic = report.modes
    assert static.status == "not applicable" and "sequence" in static.reason
    assert dynamic.status == "pass" and dynamic.outputs[0].shape == [6, 3]
    assert report.passed
    with pytest.raises(aircc.errors.CompileOptionError, match="--mode static"):
        aircc.verify(model, {"seq": parts}, modes=("static",))     # asked for alone: an error


# ------------------------------------------------------------------ the reference
def test_without_onnxruntime_the_reference_evaluator_is_used(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)      # import fails
    report = aircc.verify(MLP)
    assert report.passed and report.reference.startswith("onnx ")
    assert "ReferenceEvaluator" in report.reference and "not installed" in report.reference
    model = chain_net(tmp_path / "chain.onnx")
    faults.inject("corrupt", node="pool1", times=0, value=50.0)
    r = run_cli("verify", model, "--mode", "dynamic")
    assert r.exit_code == 1
    assert "ReferenceEvaluator" in r.output and "node 'pool1' (MaxPool)" in r.output


# ------------------------------------------------------------------ compile --verify, faults
def test_compile_verify_writes_the_om_and_exits_1_on_a_mismatch(tmp_path):
    om = tmp_path / "mlp.om"
    r = run_cli("compile", MLP, "-o", str(om), "--input-shape", "input:2,784", "--verify")
    assert r.exit_code == 0, r.output
    assert "input      input: float32[2, 784] (generated, seed 0)" in r.output
    assert r.output.splitlines()[-1].startswith("PASS: static 1/1 outputs agree")
    assert "dynamic" not in r.output.splitlines()[-1]
    om.unlink()
    faults.inject("corrupt", node="fc2", times=0)
    r = run_cli("compile", MLP, "-o", str(om), "--mode", "dynamic", "--verify")
    assert r.exit_code == 1, r.output
    assert om.exists() and "first divergence node 'fc2'" in r.output.splitlines()[-1]
    r = run_cli("compile", MLP, "--emit", "ir", "--verify")
    assert r.exit_code == 2 and "--verify" in r.output


def test_the_corrupt_fault_parses_and_perturbs_the_first_element():
    (f,) = faults.parse("corrupt@node=mul1,value=2.5,times=0")
    assert (f.kind, f.node, f.value, f.times) == (faults.FaultKind.CORRUPT, "mul1", 2.5, 0)
    with pytest.raises(ValueError, match="value must be a finite number"):
        faults.parse("corrupt@value=inf")
    a, i, b = np.zeros((2, 2), np.float16), np.zeros(3, np.int32), np.zeros(2, bool)
    strided, bf = np.zeros((4, 4), np.float32).T[::2], np.zeros(2, ml_dtypes.bfloat16)
    f.corrupt([a, None, i, b, strided, bf])
    assert a.tolist() == [[2.5, 0], [0, 0]] and i.tolist() == [2, 0, 0]
    assert b.tolist() == [True, False] and strided[0, 0] == 2.5 and strided.sum() == 2.5
    assert bf.astype(np.float32).tolist() == [2.5, 0]


def test_a_corrupted_run_recorded_for_replay_replays_without_the_fault(tmp_path):
    """A dynamic model replays the launches of its first run for inputs of the same shapes:
    the fault fires in each run it is armed for (once), and not after it is cleared."""
    model = chain_net(tmp_path / "chain.onnx")
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    with aircc.load(aircc.compile(model, mode="dynamic")) as m:
        faults.inject("corrupt", node="mul1", times=0, value=2.0)   # its chain writes y
        first, replayed = m.run({"x": x})["y"], m.run({"x": x})["y"]
        faults.clear()
        clean = m.run({"x": x})["y"]
        assert m.run_stats().replays == 2
    assert first.reshape(-1)[0] == pytest.approx(clean.reshape(-1)[0] + 2.0, rel=1e-6)
    np.testing.assert_array_equal(first, replayed)
    np.testing.assert_array_equal(first.reshape(-1)[1:], clean.reshape(-1)[1:])

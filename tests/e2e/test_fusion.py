"""Compile-time folding and fusion: fold-batchnorm, fuse-epilogues."""
from __future__ import annotations

import numpy as np
from onnx import helper

import aircc
from aircc.compiler.context import CompileContext
from aircc.compiler.frontend.onnx_import import import_onnx
from aircc.compiler.ir.verifier import verify
from aircc.compiler.passes.fold_batchnorm import fold_batchnorm
from aircc.compiler.passes.fuse_epilogues import fuse_epilogues
from aircc.compiler.passes.pipeline import run_pipeline
from graphs import const, model, run_ir, tensor

BASE = ["fold-constants", "infer-shapes", "fold-constants", "remove-identity", "dce", "infer-shapes"]


def _conv_block(extra_reader: bool = False):
    rng = np.random.default_rng(0)
    inits = [const("W", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             const("B", rng.standard_normal(4).astype(np.float32)),
             const("g", rng.random(4).astype(np.float32) + 0.5), const("be", rng.standard_normal(4).astype(np.float32)),
             const("mu", rng.standard_normal(4).astype(np.float32)), const("var", rng.random(4).astype(np.float32) + 0.1),
             const("W2", rng.standard_normal((4, 3, 1, 1)).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["bn"], name="bn"),
             helper.make_node("Conv", ["x", "W2"], ["side"], name="side_conv"),
             helper.make_node("Add", ["bn", "side"], ["sum"], name="add"),
             helper.make_node("Relu", ["sum"], ["y"], name="relu")]
    outputs = [tensor("y", [1, 4, 6, 6])]
    if extra_reader:
        outputs.append(tensor("bn", [1, 4, 6, 6]))
    return model(nodes, [tensor("x", [1, 3, 6, 6])], outputs, inits)


def test_fold_batchnorm_and_fuse_add_relu_keep_the_numbers():
    g = run_pipeline(import_onnx(_conv_block()), BASE)
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)
    expected = run_ir(g, {"x": x})["y"]
    ctx = CompileContext()
    fold_batchnorm(g, ctx)
    verify(g)
    assert [n.op for n in g.nodes] == ["Conv", "Conv", "Add", "Relu"]
    fuse_epilogues(g, ctx)
    verify(g)
    ops = [(n.op, n.attrs.get("fused_add", 0), n.attrs.get("fused_relu", 0)) for n in g.nodes]
    assert ops == [("Conv", 0, 0), ("Conv", 1, 1)]        # conv + BN + Add + Relu: one launch
    assert g.nodes[-1].outputs == ["y"]
    np.testing.assert_allclose(run_ir(g, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)
    assert ctx.stats["fused_conv_batchnorm"] == 1 and ctx.stats["fused_epilogues"] == 2


def test_no_fusion_when_the_intermediate_is_read_elsewhere():
    g = run_pipeline(import_onnx(_conv_block(extra_reader=True)), BASE)
    fold_batchnorm(g)
    fuse_epilogues(g)
    verify(g)
    conv = g.node("conv")
    assert conv.outputs == ["bn"]                  # BN still folds: the conv now makes 'bn'
    assert not conv.attrs.get("fused_add")         # but 'bn' is read elsewhere: no Add fused in
    side = g.node("side_conv")                     # the other reader of the Add fuses instead
    assert side.attrs.get("fused_add") and side.attrs.get("fused_relu") and "bn" in side.inputs


def test_matmul_bias_fuses_but_a_broadcasting_add_does_not():
    rng = np.random.default_rng(2)
    m = model([helper.make_node("MatMul", ["x", "W"], ["h"]),
               helper.make_node("Add", ["h", "b"], ["y"]),
               helper.make_node("MatMul", ["x", "W"], ["h2"]),
               helper.make_node("Add", ["h2", "big"], ["z"])],
              [tensor("x", [2, 4])], [tensor("y", [2, 3]), tensor("z", [5, 2, 3])],
              [const("W", rng.standard_normal((4, 3)).astype(np.float32)),
               const("b", rng.standard_normal(3).astype(np.float32)),
               const("big", rng.standard_normal((5, 2, 3)).astype(np.float32))])
    g = run_pipeline(import_onnx(m), BASE)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    expected = run_ir(g, {"x": x})
    fuse_epilogues(g)
    verify(g)
    assert [n.op for n in g.nodes] == ["MatMul", "MatMul", "Add"]
    got = run_ir(g, {"x": x})
    for k in expected:
        np.testing.assert_allclose(got[k], expected[k], rtol=1e-6)


def test_attention_scores_scale_and_mask_fuse_into_the_matmul():
    """MatMul -> Div by sqrt(d) -> Add(mask, broadcast) -> Softmax: one MatMul launch
    with fused_scale and fused_add, then the Softmax; a Div of a constant by the
    product, or by a tensor, is not a scale and stays."""
    import onnxruntime as ort

    rng = np.random.default_rng(4)
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]),
             helper.make_node("Div", ["s", "d"], ["sd"]),
             helper.make_node("Add", ["sd", "mask"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["q", "k"], ["s2"]),
             helper.make_node("Div", ["d", "s2"], ["inv"]),
             helper.make_node("MatMul", ["q", "k"], ["s3"]),
             helper.make_node("Mul", ["s3", "two"], ["y3"])]
    m = model(nodes, [tensor("q", ["B", 2, 5, 4]), tensor("k", ["B", 2, 4, 5]),
                      tensor("mask", ["B", 1, 1, 5])],
              [tensor("p", ["B", 2, 5, 5]), tensor("inv", ["B", 2, 5, 5]),
               tensor("y3", ["B", 2, 5, 5])],
              [const("d", np.array(2.0, np.float32)), const("two", np.array([2.0], np.float32))])
    feeds = {"q": rng.standard_normal((3, 2, 5, 4)).astype(np.float32),
             "k": rng.standard_normal((3, 2, 4, 5)).astype(np.float32),
             "mask": np.where(rng.random((3, 1, 1, 5)) < 0.3, -10000.0, 0.0).astype(np.float32)}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    g = run_pipeline(import_onnx(m), BASE)
    fuse_epilogues(g)
    verify(g)
    assert [n.op for n in g.nodes] == ["MatMul", "Softmax", "MatMul", "Div", "MatMul"]
    first, third = g.nodes[0], g.nodes[4]
    assert first.attrs["fused_scale"] == 0.5 and first.attrs["fused_add"] == 1
    assert third.attrs["fused_scale"] == 2.0 and "fused_add" not in third.attrs
    for mode in ("dynamic", "static"):
        compiled = aircc.compile(m, mode=mode, input_shapes={"q": [3, 2, 5, 4], "k": [3, 2, 4, 5],
                                                           "mask": [3, 1, 1, 5]})
        got = aircc.load(compiled).run(feeds)
        for name, r in zip(("p", "inv", "y3"), ref):
            np.testing.assert_allclose(got[name], r, rtol=1e-5, atol=1e-6)


def test_mask_add_fuses_into_the_softmax_after_it():
    """Add(scores, mask) -> Softmax: one launch, the shift folded into the smaller operand.
    Checked against onnxruntime with a row that the mask wipes out entirely (its sum
    underflows against the tensor's shift: redone exactly), a mask bigger than the
    scores (the result has the sum's shape), a Softmax along another axis, and an Add
    read elsewhere (stays)."""
    import onnxruntime as ort

    rng = np.random.default_rng(8)
    nodes = [helper.make_node("Add", ["s", "mask"], ["a"]),
             helper.make_node("Softmax", ["a"], ["p"], axis=-1),
             helper.make_node("Add", ["small", "s"], ["a2"]),
             helper.make_node("Softmax", ["a2"], ["p2"], axis=1),
             helper.make_node("Add", ["s", "mask"], ["a3"]),
             helper.make_node("Softmax", ["a3"], ["p3"]),
             helper.make_node("Neg", ["a3"], ["n3"]),
             helper.make_node("Add", ["row", "s"], ["a4"]),
             helper.make_node("Softmax", ["a4"], ["p4"])]
    m = model(nodes, [tensor("s", ["B", 2, 5, 6]), tensor("mask", ["B", 1, 1, 6]),
                      tensor("small", [1, 6]), tensor("row", [3, "B", 2, 5, 6])],
              [tensor("p", ["B", 2, 5, 6]), tensor("p2", ["B", 2, 5, 6]), tensor("p3", ["B", 2, 5, 6]),
               tensor("n3", ["B", 2, 5, 6]), tensor("p4", [3, "B", 2, 5, 6])], [])
    mask = np.where(rng.random((3, 1, 1, 6)) < 0.3, -10000.0, 0.0).astype(np.float32)
    mask[1] = -1e30                       # every key of sample 1 masked: those rows underflow
    feeds = {"s": (rng.standard_normal((3, 2, 5, 6)) * 4).astype(np.float32), "mask": mask,
             "small": rng.standard_normal((1, 6)).astype(np.float32),
             "row": rng.standard_normal((3, 3, 2, 5, 6)).astype(np.float32)}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert np.isfinite(ref[0]).all()
    shapes = {k: list(v.shape) for k, v in feeds.items()}
    for mode in ("dynamic", "static"):
        compiled = aircc.compile(m, mode=mode, input_shapes=shapes)
        assert compiled.report.stats["fused_add_softmax"] == 3
        ops = [n.op for n in compiled.graph.nodes]
        assert ops.count("Add") == 1 and ops.count("Softmax") == 4
        got = aircc.load(compiled).run(feeds)
        for name, r in zip(("p", "p2", "p3", "n3", "p4"), ref):
            np.testing.assert_allclose(got[name], r, rtol=1e-5, atol=1e-7, err_msg=f"{mode} {name}")


def test_attention_scale_moves_into_the_query_weights():
    """(x @ Wq + bq) seen through Reshape/Transpose, @ K^T, / 2: the 1/2 goes into Wq and
    bq at compile time (a copy of Wq, since another MatMul reads it too, which keeps the
    original) and the scores need no scaling pass; a MatMul of graph inputs keeps its
    scale.  Static and dynamic results match onnxruntime."""
    import onnxruntime as ort

    rng = np.random.default_rng(9)
    nodes = [helper.make_node("MatMul", ["x", "Wq"], ["q0"]),
             helper.make_node("Add", ["q0", "bq"], ["q1"]),
             helper.make_node("Reshape", ["q1", "hs"], ["q2"]),
             helper.make_node("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Div", ["s", "d"], ["sd"]),
             helper.make_node("Softmax", ["sd"], ["p"]),
             helper.make_node("MatMul", ["x", "Wq"], ["other"]),
             helper.make_node("MatMul", ["kt", "kt2"], ["s2"]),
             helper.make_node("Mul", ["s2", "d"], ["y2"])]
    m = model(nodes, [tensor("x", ["B", 5, 8]), tensor("kt", ["B", 2, 4, 5]),
                      tensor("kt2", ["B", 2, 5, 3])],
              [tensor("p", ["B", 2, 5, 5]), tensor("other", ["B", 5, 8]), tensor("y2", ["B", 2, 4, 3])],
              [const("Wq", rng.standard_normal((8, 8)).astype(np.float32)),
               const("bq", rng.standard_normal(8).astype(np.float32)),
               const("hs", np.array([0, 0, 2, 4], np.int64)), const("d", np.array(2.0, np.float32))])
    feeds = {"x": rng.standard_normal((3, 5, 8)).astype(np.float32),
             "kt": rng.standard_normal((3, 2, 4, 5)).astype(np.float32),
             "kt2": rng.standard_normal((3, 2, 5, 3)).astype(np.float32)}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    shapes = {k: list(v.shape) for k, v in feeds.items()}
    for mode in ("dynamic", "static"):
        compiled = aircc.compile(m, mode=mode, input_shapes=shapes)
        assert compiled.report.stats["pushed_matmul_scales"] == 1
        scaled = [n for n in compiled.graph.nodes if n.op == "MatMul" and "fused_scale" in n.attrs]
        assert len(scaled) == 1 and scaled[0].attrs["fused_scale"] == 2.0
        got = aircc.load(compiled).run(feeds)
        for name, r in zip(("p", "other", "y2"), ref):
            np.testing.assert_allclose(got[name], r, rtol=1e-5, atol=1e-6, err_msg=f"{mode} {name}")


def test_residual_add_fuses_into_the_layernorm_after_it():
    """Add(x, h) -> LayerNormalization: one launch, also when the operands' dims are
    different symbols (after a Reshape in dynamic mode); an Add read elsewhere stays."""
    import onnxruntime as ort

    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Add", ["h", "x"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "g", "b"], ["y"], axis=-1, epsilon=1e-5),
             helper.make_node("Add", ["x", "bias"], ["s2"]),
             helper.make_node("LayerNormalization", ["s2", "g"], ["y2"], axis=-1),
             helper.make_node("Add", ["x", "h"], ["s3"]),
             helper.make_node("LayerNormalization", ["s3", "g"], ["y3"], axis=-1),
             helper.make_node("Relu", ["s3"], ["r3"]),
             # through a Reshape: in dynamic mode its dims are fresh symbols, unlike x's
             helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Reshape", ["h", "shp"], ["hr"]),
             helper.make_node("Add", ["hr", "x"], ["s4"]),
             helper.make_node("LayerNormalization", ["s4", "g", "b"], ["y4"], axis=-1)]
    m = model(nodes, [tensor("x", ["B", 5, 8]), tensor("h", ["B", 5, 8])],
              [tensor("y", ["B", 5, 8]), tensor("y2", ["B", 5, 8]), tensor("y3", ["B", 5, 8]),
               tensor("r3", ["B", 5, 8]), tensor("y4", ["B", 5, 8])],
              [const("g", rng.random(8).astype(np.float32) + 0.5),
               const("b", rng.standard_normal(8).astype(np.float32)),
               const("bias", rng.standard_normal(8).astype(np.float32))])
    m.opset_import[0].version = 17
    feeds = {"x": rng.standard_normal((2, 5, 8)).astype(np.float32),
             "h": rng.standard_normal((2, 5, 8)).astype(np.float32)}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for mode in ("dynamic", "static"):
        compiled = aircc.compile(m, mode=mode, input_shapes={"x": [2, 5, 8], "h": [2, 5, 8]})
        ops = [n.op for n in compiled.graph.nodes if n.op in ("Add", "LayerNormalization")]
        assert ops.count("Add") == 1 and compiled.report.stats["fused_add_layernorm"] == 3
        got = aircc.load(compiled).run(feeds)
        for name, r in zip(("y", "y2", "y3", "r3", "y4"), ref):
            np.testing.assert_allclose(got[name], r, rtol=1e-5, atol=1e-5)


def test_batchnorm_scale_moves_into_the_next_convs_weights():
    """BN + Relu -> Conv becomes Add(t/s) + Relu -> Conv(W*s) when every scale s > 0
    (a padded 3x3 keeps its zero pads), and Max(x, -t/s) -> Conv(W*s, bias + W*s @ t/s)
    before an unpadded 1x1 unless the shift is far beyond the BN's running std; a
    negative scale keeps the BN."""
    import onnxruntime as ort

    rng = np.random.default_rng(6)
    c = 6

    def bn_params(prefix, sign=1.0):
        gamma = sign * (rng.random(c).astype(np.float32) + 0.5)
        return [const(f"{prefix}g", gamma), const(f"{prefix}b", rng.standard_normal(c).astype(np.float32)),
                const(f"{prefix}m", rng.standard_normal(c).astype(np.float32)),
                const(f"{prefix}v", rng.random(c).astype(np.float32) + 0.5)]

    wide = bn_params("w")
    wide[2] = const("wm", np.full(c, 2.0, np.float32))           # |shift| ~ 2 > 64 * 0.01
    wide[3] = const("wv", np.full(c, 1e-4, np.float32))
    inits = bn_params("p") + bn_params("n", -1.0) + bn_params("q") + wide + [
        const("W", rng.standard_normal((4, c, 3, 3)).astype(np.float32)),
        const("W2", rng.standard_normal((4, c, 1, 1)).astype(np.float32)),
        const("W3", rng.standard_normal((4, c, 1, 1)).astype(np.float32)),
        const("B3", rng.standard_normal(4).astype(np.float32))]
    nodes = [helper.make_node("BatchNormalization", ["x", "pg", "pb", "pm", "pv"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "W"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["x", "ng", "nb", "nm", "nv"], ["a2"]),
             helper.make_node("Relu", ["a2"], ["r2"]),
             helper.make_node("Conv", ["r2", "W2"], ["y2"]),
             # 1x1: relu(x + c) = max(x, -c) + c, and W @ c joins the bias
             helper.make_node("BatchNormalization", ["x", "qg", "qb", "qm", "qv"], ["a3"]),
             helper.make_node("Relu", ["a3"], ["r3"]),
             helper.make_node("Conv", ["r3", "W3", "B3"], ["y3"]),
             # the same with a shift far beyond the running std: the shift stays
             helper.make_node("BatchNormalization", ["x50", "wg", "wb", "wm", "wv"], ["a4"]),
             helper.make_node("Relu", ["a4"], ["r4"]),
             helper.make_node("Conv", ["r4", "W3"], ["y4"])]
    m = model(nodes, [tensor("x", [2, c, 5, 5]), tensor("x50", [2, c, 5, 5])],
              [tensor(n, [2, 4, 5, 5]) for n in ("y", "y2", "y3", "y4")], inits)
    compiled = aircc.compile(m)
    assert compiled.report.stats["pushed_bn_scales"] == 3
    ops = [n.op for n in compiled.graph.nodes]
    assert ops.count("BatchNormalization") == 1 and ops.count("ElementwiseChain") == 2
    assert ops.count("Max") == 1
    feeds = {"x": rng.standard_normal((2, c, 5, 5)).astype(np.float32),
             "x50": (2 + 0.01 * rng.standard_normal((2, c, 5, 5))).astype(np.float32)}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = aircc.load(compiled).run(feeds)
    for k, name in enumerate(("y", "y2", "y3", "y4")):
        np.testing.assert_allclose(got[name], ref[k], rtol=1e-4, atol=1e-4, err_msg=name)


def test_compile_report_counts_fusions_and_fewer_host_kernels_in_dynamic_mode():
    from testdata import light_path

    r = aircc.compile(light_path("resnet50")).report
    assert r.stats["fused_conv_batchnorm"] == 53 and r.stats["fused_epilogues"] > 40
    assert r.kernels < 80                       # 176 before folding and fusion
    m = _conv_block()
    plain = aircc.compile(m, mode="dynamic", passes=BASE)
    fused = aircc.compile(m, mode="dynamic")
    assert fused.report.host.host_kernels < plain.report.host.host_kernels


def test_per_channel_mul_add_fold_into_conv_and_batchnorm_and_bn_takes_relu():
    rng = np.random.default_rng(3)
    chan = lambda: rng.random((1, 4, 1, 1)).astype(np.float32) + 0.5   # noqa: E731
    inits = [const("W", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             const("s1", chan()), const("b1", chan()), const("s2", chan()), const("b2", chan()),
             const("g", rng.random(4).astype(np.float32) + 0.5), const("be", rng.standard_normal(4).astype(np.float32)),
             const("mu", rng.standard_normal(4).astype(np.float32)), const("var", rng.random(4).astype(np.float32) + 0.1),
             const("k", np.array(2.0, np.float32))]
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c", "s1"], ["c1"]), helper.make_node("Add", ["c1", "b1"], ["c2"]),
             helper.make_node("Mul", ["k", "c2"], ["c3"]),                       # a scalar, first operand
             helper.make_node("Relu", ["c3"], ["r"]),
             helper.make_node("BatchNormalization", ["r", "g", "be", "mu", "var"], ["n"]),
             helper.make_node("Mul", ["n", "s2"], ["n1"]), helper.make_node("Add", ["n1", "b2"], ["n2"]),
             helper.make_node("Relu", ["n2"], ["y"])]
    m = model(nodes, [tensor("x", [1, 3, 5, 5])], [tensor("y", [1, 4, 5, 5])], inits)
    g = run_pipeline(import_onnx(m), BASE)
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    expected = run_ir(g, {"x": x})["y"]
    ctx = CompileContext()
    fold_batchnorm(g, ctx)
    fuse_epilogues(g, ctx)
    verify(g)
    assert [(n.op, n.attrs.get("fused_relu", 0)) for n in g.nodes] == [("Conv", 1), ("BatchNormalization", 1)]
    assert ctx.stats["folded_channel_affine"] == 5
    np.testing.assert_allclose(run_ir(g, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_elementwise_chain_fuses_gelu_and_keeps_the_numbers():
    from aircc.compiler.passes.fuse_elementwise import fuse_elementwise

    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["h", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["g"]),
             helper.make_node("Sub", ["one", "g"], ["y"]),                  # running value on the right
             helper.make_node("Tanh", ["y"], ["z"])]
    rng = np.random.default_rng(4)
    m = model(nodes, [tensor("x", ["n", 8])], [tensor("z", ["n", 8]), tensor("g", ["n", 8])],
              [const("W", rng.standard_normal((8, 8)).astype(np.float32)),
               const("sqrt2", np.array(1.4142135, np.float32)), const("one", np.array(1.0, np.float32)),
               const("half", np.array(0.5, np.float32))])
    g = run_pipeline(import_onnx(m, {"x": [3, 8]}), BASE)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    expected = run_ir(g, {"x": x})
    fuse_elementwise(g)
    verify(g)
    # 'g' is a graph output, so the chain stops there and a second chain starts after it
    assert [n.op for n in g.nodes] == ["MatMul", "ElementwiseChain", "ElementwiseChain"]
    assert len(g.nodes[1].attrs["steps"]) == 5 and g.nodes[2].attrs["steps"][0] == ["Sub", "one", 1]
    got = run_ir(g, {"x": x})
    for k in expected:
        np.testing.assert_allclose(got[k], expected[k], rtol=1e-6, atol=1e-7)


def test_gelu_forms_fuse_into_one_gelu_node():
    """The three ways exporters spell x * 0.5 * (1 + erf(x / sqrt(2))) each become one
    Gelu node; a near miss (0.4 instead of 0.5) and a GELU whose Erf is also a graph
    output stay as they are.  Checked against onnxruntime in both modes."""
    import onnxruntime as ort

    def gelu(x, out, form, half="half"):
        d, e, a, m = (f"{out}_{s}" for s in "dean")
        scale = (helper.make_node("Mul", ["rsqrt2", x], [d]) if form == 2
                 else helper.make_node("Div", [x, "sqrt2"], [d]))
        nodes = [scale, helper.make_node("Erf", [d], [e]), helper.make_node("Add", ["one", e], [a])]
        if form == 0:      # (x * a) * 0.5
            nodes += [helper.make_node("Mul", [x, a], [m]), helper.make_node("Mul", [m, half], [out])]
        elif form == 1:    # (a * 0.5) * x
            nodes += [helper.make_node("Mul", [a, half], [m]), helper.make_node("Mul", [x, m], [out])]
        else:              # (x * 0.5) * a
            nodes += [helper.make_node("Mul", [x, half], [m]), helper.make_node("Mul", [m, a], [out])]
        return nodes

    rng = np.random.default_rng(11)
    nodes = (gelu("x", "g0", 0) + gelu("x", "g1", 1) + gelu("x", "g2", 2)
             + gelu("x", "g3", 0, half="nearly") + gelu("x", "g4", 1))
    m = model(nodes, [tensor("x", ["B", 16])],
              [tensor(f"g{i}", ["B", 16]) for i in range(5)] + [tensor("g4_e", ["B", 16])],
              [const("sqrt2", np.array(np.sqrt(2), np.float32)),
               const("rsqrt2", np.array(1 / np.sqrt(2), np.float32)),
               const("one", np.array(1.0, np.float32)), const("half", np.array(0.5, np.float32)),
               const("nearly", np.array(0.4, np.float32))])
    x = (rng.standard_normal((3, 16)) * 3).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for mode in ("static", "dynamic"):
        compiled = aircc.compile(m, mode=mode, input_shapes={"x": [3, 16]})
        assert compiled.report.stats["fused_gelu"] == 3
        ops = [n.op for n in compiled.graph.nodes]
        assert ops.count("Gelu") == 3 and ops.count("Erf") + ops.count("ElementwiseChain") >= 2
        got = aircc.load(compiled).run({"x": x})
        for i, r in enumerate(ref[:5]):
            np.testing.assert_allclose(got[f"g{i}"], r, rtol=1e-5, atol=1e-6, err_msg=f"{mode} g{i}")


def test_attention_transposes_fold_into_the_matmuls():
    """Transpose(Q) @ K^T and Transpose(P @ V): the head transposes that keep the last
    axis last become strided views of the MatMul (perm_a / perm_b / perm_y); K^T, which
    moves the last axis, and a Transpose read elsewhere stay.  Against onnxruntime."""
    import onnxruntime as ort

    nodes = [helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["qt", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("Transpose", ["v"], ["vt"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["p", "vt"], ["o"]),
             helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
             helper.make_node("Relu", ["ot"], ["y"]),
             helper.make_node("Transpose", ["v"], ["shared"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["p", "shared"], ["o2"]),
             helper.make_node("Neg", ["shared"], ["n2"])]
    shape = ["B", 6, 2, 4]
    m = model(nodes, [tensor("q", shape), tensor("k", shape), tensor("v", shape)],
              [tensor("y", shape), tensor("o2", ["B", 2, 6, 4]), tensor("n2", ["B", 2, 6, 4])])
    rng = np.random.default_rng(12)
    feeds = {n: rng.standard_normal((3, 6, 2, 4)).astype(np.float32) for n in "qkv"}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for mode in ("static", "dynamic"):
        compiled = aircc.compile(m, mode=mode, input_shapes={n: [3, 6, 2, 4] for n in "qkv"})
        assert compiled.report.stats["fused_matmul_transposes"] == 3
        mms = {n.outputs[0]: n.attrs for n in compiled.graph.nodes if n.op == "MatMul"}
        assert mms["s"].get("perm_a") == [0, 2, 1, 3] and "perm_b" not in mms["s"]
        assert mms["ot"] == {"perm_b": [0, 2, 1, 3], "perm_y": [0, 2, 1, 3]}
        assert [n.op for n in compiled.graph.nodes].count("Transpose") == 2
        got = aircc.load(compiled).run(feeds)
        for name, r in zip(("y", "o2", "n2"), ref):
            np.testing.assert_allclose(got[name], r, rtol=1e-5, atol=1e-6, err_msg=f"{mode} {name}")


def test_softmax_and_the_matmul_after_it_become_one_kernel():
    """softmax(S + mask) @ V with the normalisation deferred to the product, against
    onnxruntime: a mask per key (scaling V's rows), the same expanded over the queries
    (taken as its first row), a mask per query and key (added first), no mask, scores whose exponentials overflow (shifted, once), a sample
    whose every key is masked (its sums underflow: the exact way), small and large
    tensors, V through a head transpose (perm_b / perm_y carry over).  A Softmax read
    elsewhere stays."""
    import onnxruntime as ort

    nodes = [helper.make_node("Add", ["s", "keymask"], ["a"]),
             helper.make_node("Softmax", ["a"], ["p"], axis=-1),
             helper.make_node("Transpose", ["v"], ["vt"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["p", "vt"], ["o"]),
             helper.make_node("Transpose", ["o"], ["y1"], perm=[0, 2, 1, 3]),
             helper.make_node("Add", ["s", "causal"], ["a2"]),
             helper.make_node("Softmax", ["a2"], ["p2"], axis=3),
             helper.make_node("MatMul", ["p2", "vt2"], ["y2"]),
             helper.make_node("Mul", ["s", "big"], ["s3"]),
             helper.make_node("Softmax", ["s3"], ["p3"]),
             helper.make_node("MatMul", ["p3", "vt2"], ["y3"]),
             helper.make_node("Softmax", ["s"], ["p4"]),
             helper.make_node("MatMul", ["p4", "vt2"], ["y4"]),
             helper.make_node("Add", ["s", "wide"], ["a5"]),     # a key mask expanded over queries
             helper.make_node("Softmax", ["a5"], ["p5"], axis=-1),
             helper.make_node("MatMul", ["p5", "vt2"], ["y5"])]
    rng = np.random.default_rng(13)
    for b, h, n in ((3, 2, 5), (3, 2, 48)):
        m = model(nodes, [tensor("s", [b, h, n, n]), tensor("keymask", [b, 1, 1, n]),
                          tensor("causal", [n, n]), tensor("v", [b, n, h, 4]), tensor("vt2", [b, h, n, 4]),
                          tensor("wide", [b, 1, n, n])],
                  [tensor("y1", [b, n, h, 4]), tensor("y2", [b, h, n, 4]), tensor("y3", [b, h, n, 4]),
                   tensor("y4", [b, h, n, 4]), tensor("p4", [b, h, n, n]), tensor("y5", [b, h, n, 4])],
                  [const("big", np.array(40.0, np.float32))])
        keymask = np.where(rng.random((b, 1, 1, n)) < 0.3, -10000.0, 0.0).astype(np.float32)
        keymask[1] = -10000.0                   # every key of sample 1 masked
        feeds = {"s": (rng.standard_normal((b, h, n, n)) * 2).astype(np.float32), "keymask": keymask,
                 "causal": np.triu(np.full((n, n), -1e9, np.float32), 1),
                 "v": rng.standard_normal((b, n, h, 4)).astype(np.float32),
                 "vt2": rng.standard_normal((b, h, n, 4)).astype(np.float32),
                 "wide": np.ascontiguousarray(np.broadcast_to(keymask, (b, 1, n, n)))}
        ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        for mode in ("static", "dynamic"):
            compiled = aircc.compile(m, mode=mode, input_shapes={k: list(v.shape) for k, v in feeds.items()})
            assert compiled.report.stats["fused_softmax_matmul"] == 4
            fused = [nd for nd in compiled.graph.nodes if nd.op == "SoftmaxMatMul"]
            assert fused[0].attrs == {"perm_b": [0, 2, 1, 3], "perm_y": [0, 2, 1, 3]}
            assert [nd.op for nd in compiled.graph.nodes].count("Softmax") == 1
            got = aircc.load(compiled).run(feeds)
            for name, r in zip(("y1", "y2", "y3", "y4", "p4", "y5"), ref):
                np.testing.assert_allclose(got[name], r, rtol=2e-5, atol=2e-6, err_msg=f"{mode} {n} {name}")

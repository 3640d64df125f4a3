"""Kernel tests, onnxruntime's contrib ops (activations, normalisations, products, position
ops): our shape rule, tiling and kernel against onnxruntime (see ``contrib_reference`` for
the ops only its CUDA kernels run).  The attention ops: ``test_contrib_attention_kernels``."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from contrib_models import t5_bias_nodes
from contrib_reference import MS, close, constant, infer_ms, node, ort_run, ours
from kernel_harness import T, check, ints, rand

ORT = dict(engine="ort", domain=MS, opset=17)


# ------------------------------------------------------------------ activations
@pytest.mark.parametrize("shape", [(2, 3, 8), (5,)])
def test_gelus(shape):
    x = rand(*shape, lo=-4, hi=4)
    bias = rand(shape[-1])
    check("Gelu", [x], **ORT)
    check("FastGelu", [x], **ORT)
    check("FastGelu", [x, bias], **ORT)
    check("BiasGelu", [x, bias], **ORT)
    check("QuickGelu", [x], **ORT)
    check("QuickGelu", [x], {"alpha": 1.25}, **ORT)


def test_bias_add_and_bias_split_gelu():
    x, bias, skip = rand(2, 6, 8), rand(8), rand(2, 6, 8)
    close(ours("BiasAdd", [x, bias, skip]), ort_run([node("Add", ["x0", "x1"], ["t"]),
                                                     node("Add", ["t", "x2"], ["y0"])], [x, bias, skip]))
    want = ort_run([node("Add", ["x0", "x1"], ["t"]), node("Split", ["t"], ["l", "r"], axis=-1, num_outputs=2),
                    node("Gelu", ["r"], ["g"], domain=MS), node("Mul", ["l", "g"], ["y0"])], [x, bias], opset=18)
    close(ours("BiasSplitGelu", [x, bias]), want)
    with pytest.raises(ShapeInferenceError, match="even"):
        infer_ms("BiasSplitGelu", [T((2, 3, 5)), T((5,))])


# ------------------------------------------------------------------ normalisations
@pytest.mark.parametrize("skip_shape", [(2, 5, 16), (1, 5, 16), (5, 16)])
@pytest.mark.parametrize("beta, bias", [(True, True), (False, False), (True, False)])
def test_skip_layer_normalization(skip_shape, beta, bias):
    x = rand(2, 5, 16)
    inputs = [x, rand(*skip_shape), rand(16), rand(16) if beta else None, rand(16) if bias else None]
    check("SkipLayerNormalization", inputs, {"epsilon": 1e-5}, n_out=4, **ORT)
    check("SkipLayerNormalization", inputs, n_out=1, **ORT)


@pytest.mark.parametrize("bias", [True, False])
def test_skip_simplified_layer_normalization(bias):
    inputs = [rand(2, 5, 16), rand(2, 5, 16), rand(16), rand(16) if bias else None]
    check("SkipSimplifiedLayerNormalization", inputs, {"epsilon": 1e-6}, n_out=4, **ORT)
    check("SkipSimplifiedLayerNormalization", [rand(6, 8), rand(6, 8), rand(8)], **ORT)


@pytest.mark.parametrize("axis", [-1, 1])
def test_default_domain_contrib_norms(axis):
    """onnxruntime's LayerNormalization before opset 17 and its SimplifiedLayerNormalization,
    both in the default domain."""
    x = rand(2, 3, 8)
    scale = rand(*x.shape[axis:])
    check("LayerNormalization", [x, scale, rand(*x.shape[axis:])], {"axis": axis, "epsilon": 1e-3},
          n_out=3, opset=14, engine="ort")
    check("SimplifiedLayerNormalization", [x, scale], {"axis": axis}, n_out=2, opset=17, engine="ort")


@pytest.mark.parametrize("segments, mask, positions", [(True, True, False), (False, False, False),
                                                        (True, False, True), (False, True, True)])
def test_embed_layer_normalization(segments, mask, positions):
    b, s, h = 2, 5, 16
    ids = ints(b, s, lo=0, hi=30, dtype=np.int32)
    seg = ints(b, s, lo=0, hi=2, dtype=np.int32) if segments else None
    m = np.array([[1, 1, 0, 1, 1], [1, 2, 1, 0, 0]], np.int32) if mask else None
    pos = ints(1, s, lo=0, hi=8, dtype=np.int32) if positions else None
    inputs = [ids, seg, rand(30, h), rand(8, h), rand(2, h) if segments else None, rand(h), rand(h), m, pos]
    check("EmbedLayerNormalization", inputs, {"epsilon": 1e-5}, n_out=3, **ORT)


def _group_norm_reference(x, gamma, beta, groups, silu, last, skip=None, bias=None):
    """GroupNorm in ops onnxruntime's CPU kernels have: (Transposes,) GroupNormalization-21."""
    nodes, value, inputs = [], "x0", [x, gamma, beta]
    if skip is not None:
        inputs += [skip[:, None, None, :] if skip.ndim == 2 else skip, bias]
        nodes += [node("Add", ["x0", "x3"], ["s0"]), node("Add", ["s0", "x4"], ["s"])]
        value = "s"
    if last:
        nodes.append(node("Transpose", [value], ["first"], perm=[0, 3, 1, 2]))
    nodes.append(node("GroupNormalization", ["first" if last else value, "x1", "x2"], ["g"], num_groups=groups,
                      epsilon=1e-5))
    out = "g"
    if silu:
        nodes += [node("Sigmoid", ["g"], ["sg"]), node("Mul", ["g", "sg"], ["silu"])]
        out = "silu"
    nodes.append(node("Transpose", [out], ["y0"], perm=[0, 2, 3, 1]) if last else node("Identity", [out], ["y0"]))
    if skip is not None:
        nodes.append(node("Identity", [value], ["y1"]))
    return ort_run(nodes, inputs, n_out=2 if skip is not None else 1, opset=21)


@pytest.mark.parametrize("last", [1, 0])
@pytest.mark.parametrize("silu", [0, 1])
def test_group_norm(last, silu):
    x = rand(2, 4, 3, 8) if last else rand(2, 8, 4, 3)
    gamma, beta = rand(8), rand(8)
    attrs = {"groups": 4, "activation": silu, "channels_last": last, "epsilon": 1e-5}
    close(ours("GroupNorm", [x, gamma, beta], attrs), _group_norm_reference(x, gamma, beta, 4, silu, last))


@pytest.mark.parametrize("skip_shape", [(2, 4, 3, 8), (2, 1, 1, 8), (2, 8)])
def test_skip_group_norm(skip_shape):
    x, gamma, beta, skip, bias = rand(2, 4, 3, 8), rand(8), rand(8), rand(*skip_shape), rand(8)
    got = ours("SkipGroupNorm", [x, gamma, beta, skip, bias], {"groups": 2, "activation": 1}, n_out=2)
    close(got, _group_norm_reference(x, gamma, beta, 2, 1, 1, skip, bias))


# ------------------------------------------------------------------ products
@pytest.mark.parametrize("trans", [(0, 0, 0, 0), (1, 0, 0, 1), (0, 1, 1, 0), (1, 1, 1, 1)])
def test_fused_matmul(trans):
    ta, tb, tba, tbb = trans
    attrs = {"transA": ta, "transB": tb, "transBatchA": tba, "transBatchB": tbb, "alpha": 0.5}
    a, b = rand(3, 2, 4, 5), rand(3, 2, 5, 6)
    for name, flags in (("a", (tba, ta)), ("b", (tbb, tb))):
        perm = [1, 2, 0, 3] if flags[0] else [0, 1, 2, 3]      # the axes the product reads
        if flags[1]:
            perm[2], perm[3] = perm[3], perm[2]
        stored = np.ascontiguousarray((a if name == "a" else b).transpose(np.argsort(perm)))
        a, b = (stored, b) if name == "a" else (a, stored)
    check("FusedMatMul", [a, b], attrs, **ORT)
    check("FusedMatMul", [rand(4, 5), rand(6, 5)], {"transB": 1}, **ORT)


@pytest.mark.parametrize("act, params", [("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.2}),
                                         ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4}),
                                         ("Tanh", {}), ("Sigmoid", {})])
def test_fused_gemm(act, params):
    attrs = {"transB": 1, "alpha": 0.7, "beta": 0.5, "activation": act, **params}
    check("FusedGemm", [rand(3, 4), rand(5, 4), rand(5)], attrs, **ORT)
    with pytest.raises(ShapeInferenceError, match="FusedGemm takes"):
        infer_ms("FusedGemm", [T((3, 4)), T((4, 5))])


def test_gemm_fast_gelu():
    x, w, bias = rand(2, 3, 8), rand(8, 6), rand(6)
    want = ort_run([node("MatMul", ["x0", "x1"], ["m"]), node("FastGelu", ["m", "x2"], ["y0"], domain=MS)],
                   [x, w, bias])
    close(ours("GemmFastGelu", [x, w, bias]), want)


@pytest.mark.parametrize("act, params", [("Relu", None), ("Tanh", None), ("Sigmoid", None),
                                         ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.5]), ("HardSigmoid", [0.2, 0.5])])
@pytest.mark.parametrize("z", [False, True])
def test_fused_conv(act, params, z):
    x, w, b = rand(2, 3, 7, 6), rand(4, 3, 3, 3), rand(4)
    attrs = {"activation": act, "pads": [1, 1, 1, 1], "strides": [2, 1]}
    if params:
        attrs["activation_params"] = params
    zz = rand(2, 4, 4, 6) if z else None
    check("FusedConv", [x, w, b, zz], attrs, rtol=1e-4, atol=1e-5, **ORT)


@pytest.mark.parametrize("group, bias", [(1, True), (2, False)])
def test_nhwc_conv(group, bias):
    x, w = rand(2, 6, 5, 4), rand(6, 3, 3, 4 // group)
    b = rand(6) if bias else None
    attrs = {"group": group, "pads": [1, 0, 1, 0], "dilations": [1, 2]}
    nodes = [node("Transpose", ["x0"], ["xf"], perm=[0, 3, 1, 2]), node("Transpose", ["x1"], ["wf"], perm=[0, 3, 1, 2]),
             node("Conv", ["xf", "wf"] + (["x2"] if bias else []), ["yf"], **attrs),
             node("Transpose", ["yf"], ["y0"], perm=[0, 2, 3, 1])]
    close(ours("NhwcConv", [x, w, b], attrs), ort_run(nodes, [x, w, b]), rtol=1e-4)


# ------------------------------------------------------------------ position ops
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["3d", "4d", "partial"])
@pytest.mark.parametrize("offset", [False, True])
def test_rotary_embedding(interleaved, layout, offset):
    b, s, h, d = 2, 3, 2, 8
    rotary = 4 if layout == "partial" else d
    x = rand(b, h, s, d) if layout == "4d" else rand(b, s, h * d)
    pos = np.array([2], np.int64) if offset else ints(b, s, lo=0, hi=10)
    attrs = {"interleaved": interleaved}
    if layout == "partial":
        attrs.update(num_heads=h, rotary_embedding_dim=rotary)
    check("RotaryEmbedding", [x, pos, rand(10, rotary // 2), rand(10, rotary // 2)], attrs, **ORT)


def _t5_bias_reference(table, q, k, max_distance, bidirectional):
    nodes, inits = t5_bias_nodes("x0", "q", "k", "y0", table.shape[0], max_distance, bool(bidirectional))
    consts = [constant(n, a) for n, a in {**inits, "q": np.array(q, np.int64), "k": np.array(k, np.int64)}.items()]
    return ort_run(consts + nodes, [table])


@pytest.mark.parametrize("bidirectional", [0, 1])
def test_relative_position_bias(bidirectional):
    table, q, k = rand(32, 3), 5, 40
    got = ours("RelativePositionBias", [table, np.array(q, np.int64), np.array(k, np.int64)],
               {"max_distance": 128, "is_bidirectional": bidirectional})
    close(got, _t5_bias_reference(table, q, k, 128, bidirectional))
    (t,) = infer_ms("RelativePositionBias", [T((32, 3)), T((), "int64"), T((), "int64")], {"max_distance": 8})
    assert t.shape[:2] == (1, 3) and all(isinstance(d, str) for d in t.shape[2:])


def test_float16():
    """float16 inputs are computed in float32 and rounded once, as onnxruntime does."""
    h = lambda *s: rand(*s).astype(np.float16)      # noqa: E731
    fp16 = dict(ORT, rtol=2e-3, atol=2e-3)
    check("SkipLayerNormalization", [h(2, 3, 8), h(2, 3, 8), h(8), h(8), h(8)], n_out=4, **fp16)
    check("SkipSimplifiedLayerNormalization", [h(2, 3, 8), h(2, 3, 8), h(8)], **fp16)
    check("RotaryEmbedding", [h(2, 3, 16), ints(2, 3, lo=0, hi=6), h(6, 8), h(6, 8)], **fp16)
    check("SimplifiedLayerNormalization", [h(2, 3, 8), h(8)], opset=17, engine="ort", rtol=2e-3, atol=2e-3)


def test_thresholded_relu_before_opset_10():
    """onnxruntime's (default domain, opsets 1 to 9)."""
    check("ThresholdedRelu", [rand(2, 3, 4, lo=-2, hi=2)], {"alpha": 0.5}, opset=9, engine="ort")
    check("ThresholdedRelu", [rand(2, 3, 4, lo=-2, hi=2)], opset=7, engine="ort")

"""The oneDNN binding (``aircc.executor.kernels.dnnl``): every primitive against numpy or
onnx's ReferenceEvaluator, on NCHW and NHWC data, through descriptors, bound memories
and :class:`Bound` executables."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import ml_dtypes
import numpy as np
import pytest
from aircc.executor.kernels.dnnl import library, ops
from aircc.executor.kernels.dnnl.attr import Attr, Binary, Eltwise, Sum
from aircc.executor.kernels.dnnl.enums import Arg, post_op_arg
from aircc.executor.kernels.dnnl.memory import Memory, MemoryDesc, md_of
from kernel_harness import one_node_model, rand, reference

pytestmark = pytest.mark.skipif(not library.available(),
                                reason=f"oneDNN unavailable: {library.unavailable_reason()}")

F32 = np.float32
LAYOUTS = ["nchw", "nhwc"]


def onnx_ref(op, inputs, attrs=None, opset=17):
    model, _ = one_node_model(op, inputs, attrs or {}, opset, 1)
    return reference(model, inputs, "onnx")[0]


def stored(a: np.ndarray, layout: str) -> np.ndarray:
    """``a`` (logical N, C, spatial...) copied into memory laid out as ``layout``: channels
    last for ``nhwc``; the view keeps the logical dims."""
    if layout == "nchw":
        return a.copy()
    last = (0, *range(2, a.ndim), 1)
    return np.ascontiguousarray(a.transpose(last)).transpose(np.argsort(last))


def empty(shape, layout: str, dtype=F32) -> np.ndarray:
    return stored(np.full(shape, np.nan, dtype), layout)


def md(shape, tag="any", dtype=F32):
    return MemoryDesc.from_tag(shape, dtype, tag)


def with_weights(pd, w: np.ndarray) -> np.ndarray:
    """ONNX-layout weights reordered into the layout ``pd`` wants (a flat buffer)."""
    want = pd.weights_md()
    out = np.empty(want.size // w.itemsize, w.dtype)
    ops.reorder(md_of(w), want).bind({Arg.src: w, Arg.dst: out})()
    return out


# ---------------------------------------------------------------- library
def test_library_loads_the_pinned_version_with_one_stream_per_thread():
    assert library.version().startswith("3.2.")
    assert library.lib().path.name.startswith("libdnnl.so")
    assert library.effective_isa() != "default"
    mine, other = library.stream().value, []
    t = threading.Thread(target=lambda: other.append(library.stream().value))
    t.start(), t.join()
    assert mine and other[0] and other[0] != mine and library.stream().value == mine


def test_set_threads_is_per_calling_thread():
    seen, before = [], library.max_threads()
    t = threading.Thread(target=lambda: (library.set_threads(1),
                                         seen.append(library.max_threads())))
    t.start(), t.join()
    assert seen == [1] and library.max_threads() == before
    with library.using_threads(1):
        assert library.max_threads() == 1
    assert library.max_threads() == before
    with pytest.raises(ValueError):
        library.set_threads(0)


def test_errors_name_the_call_the_status_and_the_request():
    with pytest.raises(library.DnnlUnimplemented) as info:     # no f64 matmul in oneDNN 3.2
        ops.matmul(md((4, 4), "ab", np.float64), md((4, 4), "ab", np.float64),
                   md((4, 4), "ab", np.float64))
    assert isinstance(info.value, library.DnnlError)
    assert "dnnl_matmul_primitive_desc_create" in str(info.value)
    assert "dnnl_unimplemented" in str(info.value) and "4x4 f64" in str(info.value)
    with pytest.raises(library.DnnlError) as info:              # K does not match
        ops.matmul(md((4, 5), "ab"), md((4, 4), "ab"), md((4, 4), "ab"))
    assert not isinstance(info.value, library.DnnlUnimplemented)
    assert info.value.call == "dnnl_matmul_primitive_desc_create"
    with pytest.raises(ValueError, match="int64"):
        md((2,), "a", np.int64)


# ---------------------------------------------------------------- memory
def test_md_of_views_and_bytes():
    x = np.zeros((2, 3, 4, 5), F32)
    assert md_of(x) == md(x.shape, "nchw")
    assert md_of(stored(x, "nhwc")) == md(x.shape, "nhwc")
    view = md_of(x.transpose(0, 2, 1, 3))
    assert view.strides == (60, 5, 20, 1) and view.size == x.nbytes and view.is_plain
    with pytest.raises(ValueError, match="non-negative"):
        md_of(x[..., ::-1])


def test_memory_binds_arrays_and_raw_pointers():
    x = rand(3, 4)
    m = Memory.of(x)
    assert m.ptr == x.ctypes.data and np.array_equal(m.array(), x)
    y = rand(3, 4)
    m.bind(y)
    assert m.ptr == y.ctypes.data
    raw = Memory(md((3, 4), "ab"), y.ctypes.data)
    assert np.array_equal(raw.array(), y)
    with pytest.raises(ValueError, match="cannot hold"):
        Memory.of(np.zeros(3, F32), md((3, 4), "ab"))


# ---------------------------------------------------------------- reorder
@pytest.mark.parametrize("src,dst", [("nchw", "nhwc"), ("nhwc", "nchw")])
def test_reorder_between_layouts(src, dst):
    x = rand(2, 5, 3, 4)
    out = empty(x.shape, dst)
    ops.reorder(md(x.shape, src), md(x.shape, dst)).bind(
        {Arg.src: stored(x, src), Arg.dst: out})()
    assert np.array_equal(out, x) and md_of(out) == md(x.shape, dst)


def test_reorder_into_a_blocked_layout_and_back():
    w = rand(32, 16, 3, 3)
    pd = ops.convolution(md((1, 16, 8, 8), "nhwc"), md(w.shape), md((1, 32, 6, 6), "nhwc"))
    blocked, want = with_weights(pd, w), pd.weights_md()
    assert want.inner_blocks and want.size >= w.nbytes and not want.is_plain
    assert not np.array_equal(blocked[:w.size], w.ravel())
    back = np.empty_like(w)
    ops.reorder(pd.weights_md(), md_of(w)).bind({Arg.src: blocked, Arg.dst: back})()
    assert np.array_equal(back, w)


# ---------------------------------------------------------------- convolution
CONVS = {   # name: (N, C, H, W, O, kernel, attrs)
    "bias": (2, 4, 9, 9, 8, 3, {"pads": [1, 1, 1, 1]}),
    "strided_asymmetric": (1, 4, 9, 8, 6, 3, {"strides": [2, 2], "pads": [0, 1, 1, 2]}),
    "dilated": (1, 3, 11, 11, 4, 3, {"dilations": [2, 2], "pads": [2, 1, 2, 1]}),
    "grouped": (1, 8, 7, 7, 12, 3, {"group": 2, "pads": [1, 1, 1, 1]}),
    "depthwise": (2, 16, 8, 8, 16, 3, {"group": 16, "pads": [1, 1, 1, 1]}),
    "depthwise_x2": (1, 8, 6, 6, 16, 5, {"group": 8, "pads": [2, 2, 2, 2]}),
    "pointwise": (1, 32, 5, 5, 16, 1, {}),
}


def conv_case(name, layout, post_ops=(), residual=None, attr=None, wtag="any", **kw):
    n, c, h, w_, o, k, attrs = CONVS[name]
    g = attrs.get("group", 1)
    x, w, b = rand(n, c, h, w_), rand(o, c // g, k, k), rand(o)
    want = onnx_ref("Conv", [x, w, b], attrs)
    pads = attrs.get("pads", [0, 0, 0, 0])
    wdims = ops.conv_weights_dims(o, c, (k, k), g)
    pd = ops.convolution(md(x.shape, layout), md(wdims, wtag), md(want.shape, layout),
                         md((o,), "a"), strides=attrs.get("strides"), pads_begin=pads[:2],
                         pads_end=pads[2:], dilations=attrs.get("dilations"),
                         attr=attr if attr is not None else list(post_ops), **kw)
    weights = with_weights(pd, w.reshape(wdims)) if wtag == "any" else w.reshape(wdims)
    y = stored(residual, layout) if residual is not None else empty(want.shape, layout)
    return pd, {Arg.src: stored(x, layout), Arg.weights: weights, Arg.bias: b, Arg.dst: y}, want


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(CONVS))
def test_convolution(name, layout):
    pd, args, want = conv_case(name, layout)
    pd.bind(args)()
    np.testing.assert_allclose(args[Arg.dst], want, rtol=1e-4, atol=1e-5)
    assert not pd.is_reference, pd.impl
    pd, args, want = conv_case(name, layout, wtag="goihw" if "group" in CONVS[name][-1]
                               else "oihw", alg="auto")       # ONNX's weights as they are
    pd.bind(args)()
    np.testing.assert_allclose(args[Arg.dst], want, rtol=1e-4, atol=1e-5)
    # the trap: NHWC data with plain weights gets the reference kernel (NCHW: im2col GEMM)
    assert pd.is_reference == (layout == "nhwc"), pd.impl


@pytest.mark.parametrize("layout", LAYOUTS)
def test_convolution_post_ops(layout):
    for name, post_op, fn in [("bias", Eltwise("relu"), lambda y: np.maximum(y, 0)),
                              ("grouped", Eltwise("clip", 0.0, 0.5), lambda y: np.clip(y, 0, .5))]:
        pd, args, want = conv_case(name, layout, [post_op])
        pd.bind(args)()
        np.testing.assert_allclose(args[Arg.dst], fn(want), rtol=1e-4, atol=1e-5)
    residual = rand(2, 8, 9, 9)          # dst holds the addend: y = relu(conv + residual)
    pd, args, want = conv_case("bias", layout, [Sum(), Eltwise("relu")], residual=residual)
    pd.bind(args)()
    np.testing.assert_allclose(args[Arg.dst], np.maximum(want + residual, 0), rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_convolution_binary_add_of_a_residual(layout):
    shape = onnx_ref("Conv", [rand(2, 4, 9, 9), rand(8, 4, 3, 3)], {"pads": [1] * 4}).shape
    residual = rand(*shape)
    pd, args, want = conv_case("bias", layout, [Binary("add", md(shape, layout))])
    args[post_op_arg(0)] = stored(residual, layout)
    pd.bind(args)()
    np.testing.assert_allclose(args[Arg.dst], want + residual, rtol=1e-4, atol=1e-5)
    # the trap: a full-size binary post-op on NCHW falls back to the reference kernel
    assert pd.is_reference == (layout == "nchw"), pd.impl


def test_scratchpad_given_by_the_caller():
    pd, args, want = conv_case("bias", "nchw", attr=Attr(scratchpad="user"))
    assert pd.scratchpad_size > 0 and pd.scratchpad_md().size == pd.scratchpad_size
    with pytest.raises(library.DnnlError, match="missing arguments scratchpad"):
        pd.bind(args)
    pad = np.full(pd.scratchpad_size, 255, np.uint8)
    pd.bind({**args, Arg.scratchpad: pad})()
    np.testing.assert_allclose(args[Arg.dst], want, rtol=1e-4, atol=1e-5)
    assert (pad != 255).any()             # the primitive worked in the caller's buffer


def test_winograd_is_not_implemented_for_f32_here():
    with pytest.raises(library.DnnlUnimplemented):
        conv_case("bias", "nhwc", alg="winograd")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("group,strides,pads,out_pad", [(1, 2, [1, 1, 1, 1], 1),
                                                      (2, 1, [0, 1, 1, 0], 0)])
def test_deconvolution(layout, group, strides, pads, out_pad):
    x, w, b = rand(1, 4, 5, 6), rand(4, 6 // group, 3, 3), rand(6)
    attrs = {"strides": [strides] * 2, "pads": pads, "group": group,
             "output_padding": [out_pad] * 2}
    model, _ = one_node_model("ConvTranspose", [x, w, b], attrs, 17, 1)
    want = reference(model, [x, w, b], "ort")[0]     # onnx's reference lacks groups here
    wdims = ops.conv_weights_dims(6, 4, (3, 3), group)
    pd = ops.deconvolution(md(x.shape, layout), md(wdims), md(want.shape, layout),
                           md((6,), "a"), strides=[strides] * 2, pads_begin=pads[:2],
                           pads_end=[p - out_pad for p in pads[2:]])
    onnx_w = md_of(w).reshape((group, 4 // group, 6 // group, 3, 3)).permute_axes(
        [0, 2, 1, 3, 4]) if group > 1 else md((6, 4, 3, 3), "iohw")
    weights = np.empty(pd.weights_md().size // 4, F32)
    ops.reorder(onnx_w, pd.weights_md()).bind({Arg.src: w, Arg.dst: weights})()
    y = empty(want.shape, layout)
    pd.bind({Arg.src: stored(x, layout), Arg.weights: weights, Arg.bias: b, Arg.dst: y})()
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- matmul, inner product
@pytest.mark.parametrize("a,b", [((2, 3, 4, 5), (2, 3, 5, 6)), ((2, 1, 4, 5), (1, 3, 5, 6)),
                                 ((7, 9), (9, 3))])
def test_matmul_batched_and_broadcast_with_bias(a, b):
    x, w = rand(*a), rand(*b)
    want = np.matmul(x, w)
    bias = rand(*([1] * (want.ndim - 1)), want.shape[-1])
    y = np.empty(want.shape, F32)
    pd = ops.matmul(md_of(x), md_of(w), md_of(y), md_of(bias), attr=[Eltwise("relu")])
    pd.bind({Arg.src: x, Arg.weights: w, Arg.bias: bias, Arg.dst: y})()
    np.testing.assert_allclose(y, np.maximum(want + bias, 0), rtol=1e-5, atol=1e-5)


def test_matmul_on_strided_attention_heads():
    b, s, h, d = 2, 6, 3, 4
    qkv = rand(b, s, 3, h, d)                     # one projection holds q, k and v
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))     # (b, h, s, d) views
    kt = k.transpose(0, 1, 3, 2)
    scores = np.empty((b, h, s, s), F32)
    mask = rand(1, 1, 1, s)
    pd = ops.matmul(md_of(q), md_of(kt), md_of(scores), md_of(mask))
    pd.bind({Arg.src: q, Arg.weights: kt, Arg.bias: mask, Arg.dst: scores})()
    np.testing.assert_allclose(scores, q @ kt + mask, rtol=1e-5, atol=1e-5)
    out = np.full((b, s, h, d), np.nan, F32)     # heads written back interleaved
    heads = out.transpose(0, 2, 1, 3)
    ops.matmul(md_of(scores), md_of(v), md_of(heads)).bind(
        {Arg.src: scores, Arg.weights: v, Arg.dst: heads})()
    np.testing.assert_allclose(out, (scores @ v).transpose(0, 2, 1, 3), rtol=1e-5, atol=1e-5)


def test_inner_product():
    x, w, bias = rand(5, 12), rand(7, 12), rand(7)
    y = np.empty((5, 7), F32)
    pd = ops.inner_product(md_of(x), md((7, 12)), md_of(y), md_of(bias))
    pd.bind({Arg.src: x, Arg.weights: with_weights(pd, w), Arg.bias: bias, Arg.dst: y})()
    np.testing.assert_allclose(y, x @ w.T + bias, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- pooling, resampling
POOLS = [("max", "MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 1, 2]}),
         ("max", "MaxPool", {"kernel_shape": [2, 3], "dilations": [2, 1]}),
         ("avg_include", "AveragePool", {"kernel_shape": [3, 3], "pads": [1, 0, 1, 2],
                                         "count_include_pad": 1}),
         ("avg_exclude", "AveragePool", {"kernel_shape": [3, 2], "strides": [2, 1],
                                         "pads": [1, 1, 0, 1]})]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("alg,op,attrs", POOLS)
def test_pooling(layout, alg, op, attrs):
    x = rand(2, 5, 9, 8)
    want = onnx_ref(op, [x], attrs)
    pads = attrs.get("pads", [0] * 4)
    y = empty(want.shape, layout)
    ops.pooling(md(x.shape, layout), md_of(y), alg, kernel=attrs["kernel_shape"],
                strides=attrs.get("strides"), pads_begin=pads[:2], pads_end=pads[2:],
                dilations=attrs.get("dilations")).bind({Arg.src: stored(x, layout), Arg.dst: y})()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("alg,mode", [("nearest", {"mode": "nearest",
                                                   "nearest_mode": "round_prefer_ceil"}),
                                      ("linear", {"mode": "linear"})])
def test_resampling(layout, alg, mode):
    x = rand(1, 3, 4, 5)
    scales = np.array([1, 1, 2, 3], F32)
    want = onnx_ref("Resize", [x, None, scales], {"coordinate_transformation_mode": "half_pixel",
                                                  **mode}, opset=13)
    y = empty(want.shape, layout)
    ops.resampling(md(x.shape, layout), md_of(y), alg).bind(
        {Arg.src: stored(x, layout), Arg.dst: y})()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- softmax, normalization
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(layout, axis, log):
    x = rand(2, 3, 4, 5) * 4
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    want = e / e.sum(axis=axis, keepdims=True)
    y = empty(x.shape, layout)
    ops.softmax(md(x.shape, layout), md_of(y), axis, log=log).bind(
        {Arg.src: stored(x, layout), Arg.dst: y})()
    # log: x - max - log(sum) cancels, so the error is absolute, a few ulp of the inputs
    np.testing.assert_allclose(y, np.log(want) if log else want, rtol=1e-5,
                               atol=2e-5 if log else 1e-6)


def test_layer_norm_with_scale_and_shift():
    x, scale, shift = rand(2, 5, 16) * 3 + 1, rand(16), rand(16)
    want = onnx_ref("LayerNormalization", [x, scale, shift], {"epsilon": 1e-5})
    y = np.empty_like(x)
    pd = ops.layer_norm(md_of(x), md_of(y), epsilon=1e-5)
    pd.bind({Arg.src: x, Arg.scale: scale, Arg.shift: shift, Arg.dst: y})()
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_batch_norm_inference(layout):
    x, scale, shift, mean, var = rand(2, 4, 3, 5), rand(4), rand(4), rand(4), rand(4, lo=0.5)
    want = onnx_ref("BatchNormalization", [x, scale, shift, mean, var], {"epsilon": 1e-3},
                    opset=15)
    y = empty(x.shape, layout)
    ops.batch_norm(md(x.shape, layout), md_of(y), epsilon=1e-3, relu=True).bind(
        {Arg.src: stored(x, layout), Arg.mean: mean, Arg.variance: var, Arg.scale: scale,
         Arg.shift: shift, Arg.dst: y})()
    np.testing.assert_allclose(y, np.maximum(want, 0), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- eltwise, binary
def sigmoid(x):
    return 1 / (1 + np.exp(-x))


ELTWISE = {  # alg: (alpha, beta, numpy)
    "relu": (0.1, 0, lambda x: np.where(x > 0, x, 0.1 * x)),
    "clip": (-0.5, 0.5, lambda x: np.clip(x, -0.5, 0.5)),
    "clip_v2": (-0.5, 0.5, lambda x: np.clip(x, -0.5, 0.5)),
    "hardswish": (1 / 6, 0.5, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    "logistic": (0, 0, sigmoid),
    "tanh": (0, 0, np.tanh),
    "gelu_erf": (0, 0, lambda x: onnx_ref("Gelu", [x], opset=20)),
    "gelu_tanh": (0, 0, lambda x: onnx_ref("Gelu", [x], {"approximate": "tanh"}, opset=20)),
    "swish": (1.5, 0, lambda x: x * sigmoid(1.5 * x)),
    "elu": (0.7, 0, lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1))),
    "linear": (2.0, -1.0, lambda x: 2 * x - 1),
    "exp": (0, 0, np.exp),
    "abs": (0, 0, np.abs),
    "soft_relu": (1.0, 0, lambda x: np.log1p(np.exp(x))),
    "hardsigmoid": (0.2, 0.5, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
}


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("alg", sorted(ELTWISE))
def test_eltwise_alone_and_as_a_post_op(alg, fused):
    alpha, beta, fn = ELTWISE[alg]
    x = rand(3, 4, 5) * 3
    y = np.empty_like(x)
    if fused:      # x @ identity, then the post-op
        eye = np.eye(5, dtype=F32)[None]
        ops.matmul(md_of(x), md_of(eye), md_of(y), attr=[Eltwise(alg, alpha, beta)]).bind(
            {Arg.src: x, Arg.weights: eye, Arg.dst: y})()
    else:
        ops.eltwise(md_of(x), md_of(y), alg, alpha, beta).bind({Arg.src: x, Arg.dst: y})()
    np.testing.assert_allclose(y, fn(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("alg,fn", [("add", np.add), ("mul", np.multiply), ("sub", np.subtract),
                                    ("div", np.divide), ("max", np.maximum), ("min", np.minimum)])
@pytest.mark.parametrize("shape1", [(1, 3, 1, 1), (1, 1, 1, 5), (2, 1, 4, 1), (2, 3, 4, 5),
                                    (1, 1, 1, 1)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_binary_broadcasting(alg, fn, shape1, layout):
    a, b = rand(2, 3, 4, 5), rand(*shape1, lo=0.5)
    y = empty(a.shape, layout)
    ops.binary(md(a.shape, layout), md_of(b), md_of(y), alg).bind(
        {Arg.src_0: stored(a, layout), Arg.src_1: b, Arg.dst: y})()
    np.testing.assert_allclose(y, fn(a, b), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- concat, sum, reduction
def test_concat_sum_and_reduction():
    a, b = rand(2, 3, 4), rand(2, 5, 4)
    pd = ops.concat([md_of(a), md_of(b)], 1)
    y = np.empty((2, 8, 4), F32)
    pd.bind({Arg.multiple_src: a, Arg.multiple_src + 1: b, Arg.dst: y})()
    assert pd.dst_md().dims == (2, 8, 4) and np.array_equal(y, np.concatenate([a, b], 1))
    c = rand(2, 3, 4)
    s = np.empty_like(a)
    ops.sum_n([md_of(a), md_of(c)], [2.0, -1.0], md_of(s)).bind(
        {Arg.multiple_src: a, Arg.multiple_src + 1: c, Arg.dst: s})()
    np.testing.assert_allclose(s, 2 * a - c, rtol=1e-6, atol=1e-7)
    r = np.empty((2, 1, 4), F32)
    ops.reduction(md_of(a), md_of(r), "mean").bind({Arg.src: a, Arg.dst: r})()
    np.testing.assert_allclose(r, a.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- low precision
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_conv_and_matmul(dtype):
    dt = np.dtype(np.float16) if dtype == "float16" else np.dtype(ml_dtypes.bfloat16)
    x, w = rand(1, 16, 6, 6), rand(16, 16, 3, 3)
    want = onnx_ref("Conv", [x, w], {"pads": [1] * 4})
    try:
        pd = ops.convolution(md(x.shape, "nhwc", dt), md(w.shape, "any", dt),
                             md(want.shape, "nhwc", dt), pads_begin=(1, 1), pads_end=(1, 1))
        mm = ops.matmul(md((8, 16), "ab", dt), md((16, 8), "ab", dt), md((8, 8), "ab", dt))
    except library.DnnlUnimplemented:      # float16 needs AVX512-FP16 (not on Zen 4)
        assert dtype == "float16" and "fp16" not in library.effective_isa()
        return
    y = empty(want.shape, "nhwc", dt)
    pd.bind({Arg.src: stored(x.astype(dt), "nhwc"), Arg.weights: with_weights(pd, w.astype(dt)),
             Arg.dst: y})()
    np.testing.assert_allclose(y.astype(F32), want, rtol=0.05, atol=0.1)
    a, b, out = rand(8, 16).astype(dt), rand(16, 8).astype(dt), np.empty((8, 8), dt)
    mm.bind({Arg.src: a, Arg.weights: b, Arg.dst: out})()
    np.testing.assert_allclose(out.astype(F32), a.astype(F32) @ b.astype(F32), rtol=0.02,
                               atol=0.05)


# ---------------------------------------------------------------- Bound
def test_bound_checks_arguments_rebinds_and_runs_on_any_thread():
    x = rand(4, 8)
    y = np.empty_like(x)
    pd = ops.eltwise(md_of(x), md_of(y), "relu")
    with pytest.raises(library.DnnlError, match="does not take: weights"):
        pd.bind({Arg.src: x, Arg.dst: y, Arg.weights: x})
    with pytest.raises(library.DnnlError, match="the primitive wants"):
        pd.bind({Arg.src: np.asfortranarray(x), Arg.dst: y})
    bound = pd.bind({Arg.src: x, Arg.dst: y}, threads=1)
    t = threading.Thread(target=bound)
    t.start(), t.join()
    assert np.array_equal(y, np.maximum(x, 0))
    x2 = rand(4, 8)
    bound.rebind(Arg.src, x2)
    bound()
    assert np.array_equal(y, np.maximum(x2, 0)) and "eltwise" in repr(bound)


TEAM_OF_ONE = """
import os, threading, numpy as np
from aircc.executor.kernels.dnnl import library, ops
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.memory import MemoryDesc

def conv():
    md = lambda shape, tag="any": MemoryDesc.from_tag(shape, np.float32, tag)
    return ops.convolution(md((1, 64, 56, 56), "nhwc"), md((64, 64, 3, 3)),
                           md((1, 64, 56, 56), "nhwc"), pads_begin=(1, 1), pads_end=(1, 1))

def args(pd):
    x = np.ones((1, 56, 56, 64), np.float32).transpose(0, 3, 1, 2)
    w = np.full(pd.weights_md().size // 4, 0.01, np.float32)
    return {Arg.src: x, Arg.weights: w, Arg.dst: np.empty_like(x)}

with library.using_threads(2):
    for_two = conv()
library.set_threads(1)
for_two.bind(args(for_two))      # made where the count is 1, as a loading thread does
seen = {}

def worker():
    library.set_threads(1)
    with library.using_threads(1):
        for_one = conv()
    run = for_one.bind(args(for_one), threads=1)
    before = len(os.listdir("/proc/self/task"))
    run()
    seen.update(made=getattr(for_one, "threads", None), other=getattr(for_two, "threads", None),
                new_threads=len(os.listdir("/proc/self/task")) - before)

t = threading.Thread(target=worker)
t.start(), t.join()
print(seen["made"], seen["other"], seen["new_threads"])
"""


def test_a_primitive_is_made_under_the_count_its_descriptor_was_made_for():
    """oneDNN's primitive cache keys a primitive on the OpenMP count in force when it is
    made: a two-thread descriptor bound where the count is one must not hand its
    two-thread primitive to a one-thread descriptor made later (which would form a team
    of two: a new libgomp thread)."""
    out = subprocess.run([sys.executable, "-c", TEAM_OF_ONE], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "2", "0"], out.stdout


@pytest.mark.parametrize("env,set_by", [({}, "aircc"), ({"OMP_WAIT_POLICY": "PASSIVE"}, "user")])
def test_the_spin_policy_is_set_before_libgomp_loads_unless_the_user_chose(env, set_by):
    code = ("import os; from aircc.executor.kernels.dnnl import library as L; L.lib(); "
            "print(L.spin_policy()['set_by'], os.environ.get('GOMP_SPINCOUNT'))")
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == [set_by, library.SPINCOUNT if set_by == "aircc" else "None"]

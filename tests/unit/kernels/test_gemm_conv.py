"""GEMM with accumulate, per-tap Conv on packed weights, pack-weights, the cube engine."""
from __future__ import annotations


import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from aircc.executor.kernels import blas
from aircc.executor.kernels.conv import choice as conv_choice
from aircc.ops import InferContext, TensorType, op_def, resolve_target
from graphs import tensor
from kernel_harness import BACKEND, TARGET
from onnx import helper
from onnx.reference import ReferenceEvaluator

RNG = np.random.default_rng(7)
CONV, CONV_DEF = BACKEND.impl("Conv", 11), op_def("Conv", 11)


def rand(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, size=shape).astype(dtype)


@pytest.fixture(params=["blas", "numpy"])
def gemm_impl(request, monkeypatch):
    """Run a test with numpy's CBLAS (when this numpy has one) and with the numpy fallback."""
    if request.param == "numpy":
        monkeypatch.setattr(blas, "_GEMM", {})
    return request.param


# ---------------------------------------------------------------- gemm
def test_numpy_cblas_is_found_here():
    """The PyPI numpy this project installs ships OpenBLAS with a CBLAS: it must be used."""
    assert blas.NATIVE and np.dtype(np.float32) in blas._GEMM


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_gemm_strided_transposed_and_accumulating(gemm_impl, dtype):
    big_a, big_b = rand(7, 12, dtype=dtype), rand(9, 20, dtype=dtype)
    a = big_a[1:6, 2:10]                 # (5, 8), row stride 12
    b = big_b[:8, 3:14]                  # (8, 11), row stride 20
    bt = np.ascontiguousarray(b.T).T     # (8, 11) transposed layout
    c0 = rand(5, 11, dtype=dtype)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    for rhs in (b, bt):
        c = c0.copy()
        blas.gemm(a, rhs, c, alpha=0.5, beta=2.0)
        expected = 0.5 * (a.astype(np.float64) @ rhs.astype(np.float64)) + 2.0 * c0
        np.testing.assert_allclose(c, expected, rtol=tol, atol=tol)
        c = np.full((5, 11), np.nan, dtype)
        blas.gemm(a, rhs, c)             # beta = 0 never reads c
        np.testing.assert_allclose(c, a.astype(np.float64) @ rhs, rtol=tol, atol=tol)
    out_big = np.zeros((5, 30), dtype)
    blas.gemm(a, b, out_big[:, 4:15])   # c itself row-strided; the rest untouched
    np.testing.assert_allclose(out_big[:, 4:15], a.astype(np.float64) @ b, rtol=tol, atol=tol)
    assert not out_big[:, :4].any() and not out_big[:, 15:].any()


def test_gemm_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="do not match"):
        blas.gemm(rand(3, 4), rand(5, 2), np.empty((3, 2), np.float32))


# ---------------------------------------------------------------- Conv on packed weights
def _reference_conv(x, w, b, attrs, extra=None, relu=False):
    names = ["x", "w"] + (["b"] if b is not None else [])
    node = helper.make_node("Conv", names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [tensor(n, list(a.shape)) for n, a in zip(names, (x, w, b))],
                              [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    feeds = dict(zip(names, (x, w, b)))
    y = ReferenceEvaluator(m).run(None, feeds)[0].astype(np.float64)
    if extra is not None:
        y = y + extra
    return np.maximum(y, 0) if relu else y


def _run_conv(x, w, b, attrs, extra=None):
    types = [TensorType.of(x), TensorType.of(w)] + ([TensorType.of(b)] if b is not None else [])
    (t,) = CONV_DEF.infer(InferContext(types, attrs, [None] * len(types), node="c", op="Conv"))
    tiling = CONV.tile(types, attrs, TARGET)
    y = np.full(t.shape, np.nan, np.float32)
    ins = [x, w, b] + ([extra] if extra is not None else [])
    CONV.kernel(ins, [y], attrs, tiling, np.empty(tiling["workspace"], np.uint8))
    return tiling, y


TAP_CASES = [
    # (x, W (ONNX layout), attrs)
    ((2, 16, 9, 9), (8, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 16, 12, 11), (8, 16, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 2]}),
    ((1, 32, 13, 12), (6, 16, 3, 3), {"group": 2, "dilations": [2, 2], "pads": [2, 1, 2, 1]}),
    ((1, 16, 10, 10), (4, 16, 5, 3), {"strides": [1, 2], "pads": [2, 1, 2, 1]}),
    ((1, 16, 8, 8), (4, 16, 2, 2), {}),                              # no padding
    ((2, 16, 8, 7), (4, 16, 3, 1), {"pads": [1, 0, 1, 0]}),          # no junk columns
]


@pytest.fixture(params=["taps", "stacked"])
def tap_mode(request, monkeypatch):
    """A GEMM per tap, or every tap's weights stacked in one GEMM wherever that mode can run
    (stride 1, one group), whatever the channel counts."""
    share = 0.0 if request.param == "taps" else 64.0
    monkeypatch.setattr(conv_choice, "STACKED_MAX_CHANNEL_SHARE", share)
    return request.param


@pytest.mark.parametrize("xs,wsh,attrs", TAP_CASES)
@pytest.mark.parametrize("epilogue", ["plain", "bias", "bias_add_relu", "add_relu"])
def test_conv_taps_on_packed_weights_match_the_reference(gemm_impl, tap_mode, xs, wsh, attrs, epilogue):
    x, w = rand(*xs), rand(*wsh)
    b = rand(wsh[0]) if "bias" in epilogue else None
    packed = np.ascontiguousarray(w.transpose(2, 3, 0, 1))
    pattrs = dict(attrs, kernel_shape=list(wsh[2:]), weight_layout="HWOI")
    ref = _reference_conv(x, w, b, attrs)
    extra = rand(*ref.shape) if "add" in epilogue else None
    relu = "relu" in epilogue
    if extra is not None:
        pattrs.update(fused_add=1)
    if relu:
        pattrs.update(fused_relu=1)
    tiling, y = _run_conv(x, packed, b, pattrs, extra)
    stride_one = all(s == 1 for s in attrs.get("strides", [1, 1]))
    can_stack = stride_one and attrs.get("group", 1) == 1
    assert tiling["mode"] == ("stacked" if tap_mode == "stacked" and can_stack else "taps")
    expected = _reference_conv(x, w, b, attrs, extra, relu)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,wsh,attrs", TAP_CASES[:1] + TAP_CASES[-1:])
def test_stacked_mode_bound_once_on_constant_weights_matches_the_reference(xs, wsh, attrs):
    """The bound form (weights stacked with the bias column once) on a workspace of NaN
    bytes, run twice: the sum of the taps' partial outputs reads no stale scratch."""
    x, w, b = rand(*xs), rand(*wsh), rand(wsh[0])
    packed = np.ascontiguousarray(w.transpose(2, 3, 0, 1))
    pattrs = dict(attrs, kernel_shape=list(wsh[2:]), weight_layout="HWOI", fused_relu=1)
    types = [TensorType.of(a) for a in (x, packed, b)]
    tiling = CONV.tile(types, pattrs, TARGET)
    assert tiling["mode"] == "stacked"
    y = np.full((xs[0], wsh[0], *tiling["out"]), np.nan, np.float32)
    bound = CONV.prepare([x, packed, b], [y], pattrs, tiling,
                         np.full(tiling["workspace"], 0xFF, np.uint8), [False, True, True])
    expected = _reference_conv(x, w, b, attrs, relu=True)
    for _ in range(2):
        assert bound() is None
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_stacked_mode_only_where_the_output_has_few_channels():
    """128 -> 32 channels at stride 1 stacks the taps; equal counts, strides and groups do not
    (80 -> 80 channels at 14 x 14: too few for the Winograd mode)."""
    attrs = {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3], "weight_layout": "HWOI"}

    def mode(w, **extra):
        xt = TensorType("float32", (1, w[3] * extra.get("group", 1), 14, 14))
        return CONV.tile([xt, TensorType("float32", w)], dict(attrs, **extra), TARGET)["mode"]
    assert mode((3, 3, 32, 128)) == "stacked"
    assert mode((3, 3, 80, 80)) == "taps"
    assert mode((3, 3, 32, 128), strides=[2, 2]) == "taps"
    assert mode((3, 3, 32, 64), group=2) == "taps"


@pytest.mark.parametrize("strides,pads", [([2, 2], [0, 0, 0, 0]), ([1, 1], [1, 1, 1, 1]),
                                          ([2, 1], [0, 1, 0, 0])])
def test_single_tap_convs_run_as_one_gemm_per_group(gemm_impl, strides, pads):
    x, w, b = rand(2, 8, 9, 10), rand(6, 4, 1, 1), rand(6)
    attrs = {"group": 2, "strides": strides, "pads": pads}
    extra = rand(*_reference_conv(x, w, b, attrs).shape)
    tiling, y = _run_conv(x, w, b, dict(attrs, fused_add=1, fused_relu=1), extra)
    assert tiling["mode"] == "taps"
    np.testing.assert_allclose(y, _reference_conv(x, w, b, attrs, extra, True), rtol=1e-4, atol=1e-4)


def test_pointwise_accumulates_onto_a_broadcast_residual(gemm_impl):
    x, w, b = rand(2, 8, 5, 5), rand(6, 8, 1, 1), rand(6)
    extra = rand(1, 6, 1, 5)
    tiling, y = _run_conv(x, w, b, {"fused_add": 1, "fused_relu": 1}, extra)
    assert tiling["mode"] == "pointwise"
    np.testing.assert_allclose(y, _reference_conv(x, w, b, {}, extra, True), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("with_bias,residual,relu", [(True, True, True), (False, False, False),
                                                     (True, False, True)])
def test_grouped_pointwise_is_one_batched_product(with_bias, residual, relu):
    x, w = rand(2, 12, 5, 6), rand(9, 4, 1, 1)
    b = rand(9) if with_bias else None
    attrs = {"group": 3}
    extra = rand(2, 9, 5, 6) if residual else None
    fused = dict(attrs, **({"fused_add": 1} if residual else {}), **({"fused_relu": 1} if relu else {}))
    tiling, y = _run_conv(x, w, b, fused, extra)
    assert tiling["mode"] == "pointwise" and tiling["g"] == 3
    np.testing.assert_allclose(y, _reference_conv(x, w, b, attrs, extra, relu), rtol=1e-4, atol=1e-4)


def test_packed_layout_shape_rule_and_refusals():
    attrs = {"weight_layout": "HWOI", "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    ctx = InferContext([TensorType("float32", ("N", 16, 8, 8)), TensorType("float32", (3, 3, 4, 16))],
                       attrs, [None, None], node="c", op="Conv")
    assert CONV_DEF.infer(ctx)[0].shape == ("N", 4, 8, 8)
    bad = InferContext([TensorType("float32", (1, 16, 8, 8)), TensorType("float32", (3, 3, 4, 16))],
                       dict(attrs, weight_layout="NC1HWC0"), [None, None], node="c", op="Conv")
    with pytest.raises(ShapeInferenceError, match="weight_layout 'NC1HWC0' is not supported"):
        CONV_DEF.infer(bad)
    depthwise = [TensorType("float32", (1, 4, 8, 8)), TensorType("float32", (3, 3, 4, 1))]
    with pytest.raises(ValueError, match=r"only read by the per-tap kernel \(2-D, not depthwise\)"):
        CONV.tile(depthwise, dict(attrs, group=4), TARGET)


# ---------------------------------------------------------------- pack-weights in the compiler


def test_the_backends_layout_rule_packs_what_pack_weights_packs_for_the_target():
    """The numpy backend's weight layout for Conv: packed per tap (64+ channels per group,
    few groups, several taps, an output wide and big enough, or unknown), ONNX's where the
    wide or Winograd mode takes the conv; the target's Winograd thresholds decide: 64 -> 64
    at 224 x 224 runs Winograd on AVX2 GEMMs, per tap on AVX-512's."""
    def layout(xs, ws, target=TARGET, **attrs):
        types = [TensorType("float32", xs), TensorType("float32", ws)]
        return BACKEND.weight_layout("Conv", types, dict({"pads": [1, 1, 1, 1]}, **attrs), target)
    assert layout((1, 64, 56, 56), (48, 64, 3, 3)) == "HWOI"        # 87 M multiply-adds: taps
    assert layout((1, 64, 14, 14), (48, 64, 3, 3)) == "OIHW"        # 5.4 M: wide
    assert layout((1, 32, 56, 56), (48, 32, 3, 3)) == "OIHW"        # too few channels
    assert layout((1, 512, 56, 56), (512, 64, 3, 3), group=8) == "OIHW"    # too many groups
    assert layout((1, 64, 56, 56), (64, 64, 1, 1), pads=[0, 0, 0, 0]) == "OIHW"   # one tap
    assert layout(("N", 64, "H", "W"), (48, 64, 3, 3)) == "HWOI"    # unknown shapes: per tap
    assert layout((1, 64, 224, 224), (64, 64, 3, 3)) == "OIHW"      # Winograd F(4x4, 3x3)
    assert layout((1, 64, 224, 224), (64, 64, 3, 3), resolve_target("cpu-avx512")) == "HWOI"


# ---------------------------------------------------------------- the cube engine


def test_gemm_ops_are_on_the_cube_engine():
    for name in ("Conv", "MatMul", "Gemm", "ConvTranspose"):
        assert op_def(name, 13).engine == "cube"
    assert op_def("Relu", 13).engine == "vector"

"""Conv's Winograd mode: the transforms, the tile choice, the kernel against a direct
float64 convolution, the bound (prepared) form, and compiled models against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.executor.kernels.conv import winograd
from aircc.ops import TensorType, resolve_target
from aircc.ops.machine import native_target
from kernel_harness import BACKEND, TARGET
from numpy.lib.stride_tricks import sliding_window_view

RNG = np.random.default_rng(11)
CONV = BACKEND.impl("Conv", 11)


def rand(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, size=shape).astype(dtype)


def direct(x, w, b, pads, extra=None, relu=False):
    """3x3 stride-1 convolution in float64: padded windows times the weights."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = sliding_window_view(xp, (3, 3), axis=(2, 3))          # N, C, Ho, Wo, 3, 3
    y = np.einsum("nchwij,mcij->nmhw", win, w.astype(np.float64))
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    if extra is not None:
        y += extra
    return np.maximum(y, 0) if relu else y


@pytest.mark.parametrize("m", [2, 4])
def test_one_tile_transform_is_the_correlation(m):
    """A^T [(G g G^T) * (B^T d B)] A is the 3x3 correlation of the (m+2)^2 tile d."""
    bt, g, at = winograd.matrices(m)
    d, k = RNG.standard_normal((m + 2, m + 2)), RNG.standard_normal((3, 3))
    got = at @ ((g @ k @ g.T) * (bt @ d @ bt.T)) @ at.T
    expected = np.einsum("hwij,ij->hw", sliding_window_view(d, (3, 3)), k)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_only_tiles_two_and_four_exist():
    with pytest.raises(ValueError, match=r"F\(3, 3\) is not implemented"):
        winograd.matrices(3)


@pytest.mark.parametrize("c,m,g,kernel,strides,dilations,out,dtype,tile", [
    (64, 64, 1, [3, 3], [1, 1], [1, 1], [56, 56], np.float32, 4),    # 196 4x4 tiles
    (512, 512, 1, [3, 3], [1, 1], [1, 1], [28, 28], np.float32, 4),
    (256, 256, 1, [3, 3], [1, 1], [1, 1], [14, 14], np.float32, 2),  # 16 4x4 tiles: too few
    (512, 512, 1, [3, 3], [1, 1], [1, 1], [12, 12], np.float64, 2),  # 36 2x2 tiles
    (512, 512, 1, [3, 3], [1, 1], [1, 1], [7, 7], np.float32, 0),    # 16: too few
    (64, 96, 1, [3, 3], [1, 1], [1, 1], [14, 14], np.float32, 0),    # too few channels for F2
    (32, 256, 1, [3, 3], [1, 1], [1, 1], [56, 56], np.float32, 0),   # too few inputs
    (256, 256, 1, [3, 3], [1, 1], [1, 1], [6, 6], np.float32, 0),    # 9 2x2 tiles
    (256, 256, 1, [3, 3], [2, 2], [1, 1], [28, 28], np.float32, 0),  # strided
    (256, 256, 1, [3, 3], [1, 1], [2, 2], [28, 28], np.float32, 0),  # dilated
    (256, 256, 2, [3, 3], [1, 1], [1, 1], [28, 28], np.float32, 0),  # grouped
    (256, 256, 1, [5, 5], [1, 1], [1, 1], [28, 28], np.float32, 0),  # not 3x3
    (256, 256, 1, [3, 3], [1, 1], [1, 1], [28, 28], np.float16, 0),  # half precision
])
def test_tile_choice(c, m, g, kernel, strides, dilations, out, dtype, tile):
    assert winograd.choose_tile(c, m, g, kernel, strides, dilations, out, dtype,
                                winograd.thresholds(TARGET.vector_class)) == tile
    assert winograd.choose_tile(c, m, g, kernel, strides, dilations, out, dtype,
                                winograd.THRESHOLDS["avx2"]) == tile   # what the tests run with


@pytest.mark.parametrize("c,m,out,tile", [
    (64, 64, [56, 56], 4),
    (512, 512, [28, 28], 4),
    (64, 64, [224, 224], 0),      # big planes: the transforms leave the caches
    (128, 128, [112, 112], 0),
    (256, 256, [14, 14], 2),
    (112, 224, [13, 13], 2),      # C M / (C + M) = 75
    (128, 128, [14, 14], 0),      # 64: too little GEMM work saved per element
    (512, 512, [7, 7], 0),        # 16 2x2 tiles
])
def test_tile_choice_against_avx512_gemms(c, m, out, tile):
    limits = winograd.THRESHOLDS["avx512"]
    assert winograd.choose_tile(c, m, 1, [3, 3], [1, 1], [1, 1], out, np.float32, limits) == tile


def test_thresholds_follow_the_target():
    """The compile target's vector class picks the thresholds (whatever BLAS this machine
    runs); the native target's is the class of numpy's OpenBLAS kernels here."""
    from aircc.executor.kernels.blas import core_name, vector_class

    assert vector_class("SkylakeX") == vector_class("cooperlake") == "avx512"
    assert vector_class("Haswell") == vector_class("unknown") == "avx2"
    assert isinstance(core_name(), str) and core_name()
    avx512 = resolve_target("cpu-avx512")
    assert winograd.thresholds(avx512.vector_class) is winograd.THRESHOLDS["avx512"]
    assert winograd.choose_tile(64, 64, 1, [3, 3], [1, 1], [1, 1], [224, 224], np.float32,
                                winograd.thresholds(avx512.vector_class)) == 0
    types = [TensorType("float32", (1, 64, 224, 224)), TensorType("float32", (64, 64, 3, 3))]
    assert CONV.tile(types, {"pads": [1, 1, 1, 1]}, avx512)["mode"] != "winograd"
    assert CONV.tile(types, {"pads": [1, 1, 1, 1]}, resolve_target("cpu-avx2"))["mode"] == "winograd"
    with pytest.raises(ValueError, match="'sse'.*known: avx2, avx512"):
        winograd.thresholds("sse")
    assert winograd.thresholds(native_target().vector_class) is winograd.THRESHOLDS[vector_class(core_name())]


CASES = [  # (x shape, M, pads, tile the shape gets)
    ((2, 64, 28, 28), 64, [1, 1, 1, 1], 4),
    ((1, 64, 27, 30), 72, [0, 1, 2, 1], 4),       # asymmetric pads, partial tiles
    ((1, 96, 26, 25), 64, [0, 0, 0, 0], 4),       # no padding
    ((2, 128, 14, 13), 128, [1, 1, 1, 1], 2),
    ((1, 96, 11, 11), 112, [1, 1, 1, 1], 2),       # 36 2x2 tiles, the last ones partial
]


@pytest.mark.parametrize("xs,m,pads,tile", CASES)
@pytest.mark.parametrize("bias,residual,relu", [(True, True, True), (False, False, False)])
def test_kernel_matches_a_direct_convolution(xs, m, pads, tile, bias, residual, relu):
    """On a workspace of NaN bytes and a NaN output: no stale byte is read.  F(4, 3)
    keeps float32 within 2e-5 of the largest output, F(2, 3) within 2e-6."""
    x, w = rand(*xs), rand(m, xs[1], 3, 3)
    b = rand(m) if bias else None
    attrs = {"pads": pads, **({"fused_add": 1} if residual else {}), **({"fused_relu": 1} if relu else {})}
    types = [TensorType.of(x), TensorType.of(w)] + ([TensorType.of(b)] if bias else [])
    tiling = CONV.tile(types, attrs, TARGET)
    assert tiling["mode"] == "winograd" and tiling["tile"] == tile
    reference = direct(x, w, b, pads)
    extra = rand(*reference.shape) if residual else None
    expected = direct(x, w, b, pads, extra, relu)
    y = np.full(expected.shape, np.nan, np.float32)
    ins = [x, w, b] + ([extra] if residual else [])
    CONV.kernel(ins, [y], attrs, tiling, np.full(tiling["workspace"], 0xFF, np.uint8))
    bound = 2e-5 if tile == 4 else 2e-6
    assert np.abs(y - expected).max() <= bound * np.abs(reference).max()


def test_float64_is_exact_to_rounding():
    x, w, b = rand(1, 64, 30, 30, dtype=np.float64), rand(64, 64, 3, 3, dtype=np.float64), rand(64, dtype=np.float64)
    tiling = CONV.tile([TensorType.of(a) for a in (x, w, b)], {"pads": [1, 1, 1, 1]}, TARGET)
    assert tiling["mode"] == "winograd"
    y = np.empty((1, 64, 30, 30))
    CONV.kernel([x, w, b], [y], {"pads": [1, 1, 1, 1]}, tiling, None)
    np.testing.assert_allclose(y, direct(x, w, b, [1, 1, 1, 1]), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("layout", ["OIHW", "HWOI"])
def test_bound_form_transforms_the_weights_once_in_either_layout(layout):
    """prepare() binds U = G g G^T made once; the result does not change when the weight
    buffer does afterwards (it is not read again), and two runs agree."""
    x, w, b = rand(1, 64, 24, 24), rand(80, 64, 3, 3), rand(80)
    attrs = {"pads": [1, 1, 1, 1], "fused_relu": 1}
    wl = w
    if layout == "HWOI":
        wl = np.ascontiguousarray(w.transpose(2, 3, 0, 1))
        attrs.update(weight_layout="HWOI", kernel_shape=[3, 3])
    tiling = CONV.tile([TensorType.of(a) for a in (x, wl, b)], attrs, TARGET)
    assert tiling["mode"] == "winograd"
    y = np.full((1, 80, 24, 24), np.nan, np.float32)
    run = CONV.prepare([x, wl, b], [y], attrs, tiling,
                       np.full(tiling["workspace"], 0xFF, np.uint8), [False, True, True])
    expected = direct(x, w, b, [1, 1, 1, 1], relu=True)
    wl[...] = 0       # a bound kernel holds its transformed weights
    for _ in range(2):
        assert run() is None
        assert np.abs(y - expected).max() <= 2e-5 * np.abs(expected).max()

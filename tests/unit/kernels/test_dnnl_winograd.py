"""The oneDNN backend's Winograd convolution (executor/kernels/dnnl_backend/winograd.py):
which convolutions it takes, its results against a float64 direct convolution (tiles cut
by the image's edge, batches, pads, the epilogue), and the direct kernel wherever it
declines: weights that change, the C transforms missing, ``$AIRCC_WINOGRAD=off``."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from aircc.errors import ConfigError
from aircc.executor.kernels.dnnl_backend import winograd
from aircc.ops import TensorType, kernel_backend, layout, resolve_target
from aircc.ops.layout import CHANNELS_LAST

DNNL = kernel_backend("dnnl")
TARGET = resolve_target("dnnl-avx512" if "avx512" in DNNL.host_vector_class() else "dnnl-avx2")
rng = np.random.default_rng(7)

#: Relative to the largest output: F(4x4)'s transforms scale values by up to 8^2 and 1/24.
TOLERANCE = {4: 5e-5, 2: 5e-6}


def f32(*shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def reference(x, w, b, pads, residual=None, relu=False) -> np.ndarray:
    """Direct 3x3 convolution of NHWC ``x`` in float64."""
    n, h, wd, c = x.shape
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    ho, wo = h + pt + pb - 2, wd + pl + pr - 2
    y = np.zeros((n, ho, wo, w.shape[0]))
    for i in range(3):
        for j in range(3):
            y += xp[:, i:i + ho, j:j + wo, :] @ w[:, :, i, j].T.astype(np.float64)
    if b is not None:
        y += b
    if residual is not None:
        y += residual
    return np.maximum(y, 0) if relu else y


def conv(ins, attrs, out_shape, constant=True, prepared=None):
    """(output, tiling) of the oneDNN Conv kernel, tiled then bound (weights ``constant``)."""
    impl = layout.adapt_kernel(DNNL.impl("Conv", 11, ""), attrs)
    tiling = impl.tile([None if a is None else TensorType.of(a) for a in ins], attrs, TARGET)
    ws = np.zeros(max(1, int(tiling.get("workspace", 0))), np.uint8)
    y = np.full(out_shape, np.nan, np.float32)
    flags = [False, constant] + [constant] * (len(ins) > 2) + [False] * (len(ins) > 3)
    call = impl.prepare(ins, [y], attrs, tiling, ws, flags, prepared=prepared)
    call()
    return y, tiling


needs_transforms = pytest.mark.skipif(not winograd.available(),
                                      reason="the C transforms were not built here")


@needs_transforms
@pytest.mark.parametrize("n,h,w,c,k,pads,mode,epilogue", [
    (1, 28, 28, 64, 64, [1, 1, 1, 1], "auto", "relu"),          # F(4x4), whole tiles
    (2, 30, 26, 64, 32, [1, 1, 1, 1], "auto", "residual"),      # F(4x4), cut tiles, batch
    (1, 14, 14, 128, 128, [1, 1, 1, 1], "auto", "both"),        # F(2x2)
    (1, 13, 17, 96, 128, [1, 1, 1, 1], "2", "none"),            # cut tiles both ways
    (2, 11, 9, 24, 40, [0, 0, 0, 0], "4", "relu"),              # no padding: smaller output
    (1, 10, 12, 70, 33, [2, 0, 1, 1], "4", "both"),             # asymmetric pads, odd channels
])
def test_winograd_conv_matches_a_float64_direct_conv(aircc_env, n, h, w, c, k, pads, mode,
                                                     epilogue):
    aircc_env("AIRCC_WINOGRAD", mode)
    x, wt, b = f32(n, h, w, c), f32(k, c, 3, 3, scale=0.1), f32(k)
    ho, wo = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    residual = f32(n, ho, wo, k) if epilogue in ("residual", "both") else None
    relu = epilogue in ("relu", "both")
    attrs = {"kernel_shape": [3, 3], "pads": pads, CHANNELS_LAST: 1}
    if residual is not None:
        attrs["fused_add"] = 1
    if relu:
        attrs["fused_relu"] = 1
    ins = [x, wt, b] + ([residual] if residual is not None else [])
    y, tiling = conv(ins, attrs, (n, ho, wo, k))
    m = tiling.get("winograd")
    assert m == (4 if mode == "auto" and min(ho, wo) >= 24 else 2 if mode == "auto" else int(mode))
    assert tiling["impl"].startswith(f"winograd F({m}x{m}, 3x3)"), tiling
    want = reference(x, wt, b, [pads[0], pads[1], pads[2], pads[3]], residual, relu)
    err = np.abs(y - want).max() / np.abs(want).max()
    assert err < TOLERANCE[m], (err, tiling)
    assert not np.isnan(y).any()


@needs_transforms
@pytest.mark.parametrize("shape,attrs,want", [
    ((1, 56, 56, 64), {}, 4),
    ((1, 28, 28, 128), {}, 4),
    ((1, 27, 27, 96), {}, 4),
    ((1, 14, 14, 256), {}, 2),
    ((1, 13, 13, 128), {}, 2),
    ((1, 13, 13, 96), {}, None),                      # F(2x2) wants 128 outputs
    ((1, 112, 112, 128), {}, 4),
    ((1, 224, 224, 64), {}, None),                    # its buffers outgrow the caches
    ((1, 7, 7, 512), {}, None),                       # too few tiles for the products
    ((1, 14, 14, 64), {}, None),                      # too few channels at 14 x 14
    ((1, 56, 56, 16), {}, None),                      # too few input channels
    ((1, 28, 28, 64), {"strides": [2, 2]}, None),
    ((1, 28, 28, 64), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, None),
    ((1, 28, 28, 64), {"group": 2}, None),
    ((1, 28, 28, 64), {"fused_activation": "HardSigmoid"}, None),
    ((1, 28, 28, 64), {CHANNELS_LAST: 0}, None),     # channels-first: the direct kernel
])
def test_which_convolutions_take_the_winograd_mode(shape, attrs, want):
    c = shape[-1]
    groups = attrs.get("group", 1)
    x = TensorType("float32", shape if attrs.get(CHANNELS_LAST, 1) else
                   (shape[0], c, *shape[1:3]))
    w = TensorType("float32", (c, c // groups, 3, 3))
    full = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], CHANNELS_LAST: 1, **attrs}
    found = winograd.choose([x, w, TensorType("float32", (c,))], full, "auto")
    assert (found.m if found else None) == want


def test_the_mode_setting(aircc_env):
    """The target's mode decides; a target that names none (a dynamic model's, at run time)
    follows $AIRCC_WINOGRAD."""
    types = [TensorType("float32", (1, 56, 56, 64)), TensorType("float32", (64, 64, 3, 3))]
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], CHANNELS_LAST: 1}
    assert winograd.choose(types, attrs, "off") is None
    with pytest.raises(ConfigError, match="AIRCC_WINOGRAD='sometimes'"):
        aircc_env("AIRCC_WINOGRAD", "sometimes")
    if winograd.available():
        assert winograd.choose(types, attrs, "2").m == 2
        impl = layout.adapt_kernel(DNNL.impl("Conv", 11, ""), attrs)
        aircc_env("AIRCC_WINOGRAD", "2")
        assert impl.tile(types, attrs, TARGET)["winograd"] == 2
        assert "winograd" not in impl.tile(types, attrs, dataclasses.replace(TARGET, winograd="off"))


@needs_transforms
def test_weights_that_change_between_runs_run_the_direct_kernel(aircc_env):
    aircc_env("AIRCC_WINOGRAD", "auto")
    x, wt, b = f32(1, 28, 28, 64), f32(64, 64, 3, 3, scale=0.1), f32(64)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], CHANNELS_LAST: 1}
    impl = layout.adapt_kernel(DNNL.impl("Conv", 11, ""), attrs)
    tiling = impl.tile([TensorType.of(a) for a in (x, wt, b)], attrs, TARGET)
    assert tiling["winograd"] == 4
    # not constant: no U made ahead, so the direct kernel (or its numpy twin) runs
    assert winograd.prepare([x, wt, b], [np.empty((1, 28, 28, 64), np.float32)], attrs, tiling,
                            np.zeros(tiling["workspace"], np.uint8), [False, False, True]) is None
    y, _ = conv([x, wt, b], attrs, (1, 28, 28, 64), constant=False)
    want = reference(x, wt, b, [1, 1, 1, 1])
    assert np.abs(y - want).max() / np.abs(want).max() < 1e-5


@needs_transforms
def test_a_model_that_chose_winograd_runs_the_direct_kernel_where_the_transforms_are_missing(
        aircc_env, monkeypatch):
    """The tiling's workspace covers both kernels, so a .om compiled where the C module was
    built also runs where it was not."""
    aircc_env("AIRCC_WINOGRAD", "auto")
    x, wt, b = f32(1, 28, 28, 64), f32(64, 64, 3, 3, scale=0.1), f32(64)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], CHANNELS_LAST: 1, "fused_relu": 1}
    impl = layout.adapt_kernel(DNNL.impl("Conv", 11, ""), attrs)
    tiling = impl.tile([TensorType.of(a) for a in (x, wt, b)], attrs, TARGET)
    assert tiling["winograd"] == 4
    monkeypatch.setattr(winograd, "transforms", lambda: None)
    assert winograd.choose([TensorType.of(a) for a in (x, wt, b)], attrs, "auto") is None
    ws = np.zeros(tiling["workspace"], np.uint8)
    y = np.full((1, 28, 28, 64), np.nan, np.float32)
    impl.prepare([x, wt, b], [y], attrs, tiling, ws, [False, True, True], prepared=None)()
    want = reference(x, wt, b, [1, 1, 1, 1], relu=True)
    assert np.abs(y - want).max() / np.abs(want).max() < 1e-5


@needs_transforms
def test_weights_in_a_strided_view_are_transformed_as_they_read(aircc_env):
    """U is made from the weights' values, not their memory order (a non-contiguous U once
    gave a wrong product)."""
    aircc_env("AIRCC_WINOGRAD", "auto")
    x, b = f32(1, 28, 28, 64), f32(48)
    wt = np.ascontiguousarray(f32(3, 3, 64, 48, scale=0.1)).transpose(3, 2, 0, 1)
    assert not wt.flags.c_contiguous
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], CHANNELS_LAST: 1}
    y, tiling = conv([x, wt, b], attrs, (1, 28, 28, 48))
    assert tiling["winograd"] == 4
    want = reference(x, wt, b, [1, 1, 1, 1])
    assert np.abs(y - want).max() / np.abs(want).max() < TOLERANCE[4]


@needs_transforms
def test_the_transforms_split_among_a_device_workers_team_give_the_same_result(aircc_env):
    """In a device's stream worker the C transforms share their tiles out among the
    matmul's OpenMP team (two threads here); each tile is computed the same way, so the
    output equals the one-thread run's bit for bit."""
    import threading

    from aircc.executor.device.threads import mark_device_worker

    aircc_env("AIRCC_WINOGRAD", "auto")
    x, wt, b = f32(2, 28, 28, 64), f32(64, 64, 3, 3, scale=0.1), f32(64)
    r = f32(2, 28, 28, 64)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], CHANNELS_LAST: 1, "fused_add": 1,
             "fused_relu": 1}
    one, tiling = conv([x, wt, b, r], attrs, (2, 28, 28, 64))
    assert tiling["winograd"] == 4
    team = {}

    def in_worker():
        mark_device_worker()
        from aircc.executor.kernels.dnnl_backend.common import worker_cpus
        team["cpus"] = worker_cpus()
        team["y"], _ = conv([x, wt, b, r], attrs, (2, 28, 28, 64))

    worker = threading.Thread(target=in_worker)
    worker.start()
    worker.join()
    assert team["cpus"] >= 1
    np.testing.assert_array_equal(team["y"], one)

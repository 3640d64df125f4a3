"""Kernel tests, spatial ops: convtranspose, resize, depthtospace: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from kernel_harness import T, check, infer, rand

CONVT_CASES = [
    ((1, 3, 5, 5), (3, 4, 3, 3), {}),
    ((2, 3, 5, 4), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_padding": [1, 1]}),
    ((1, 2, 4, 5), (2, 3, 2, 3), {"strides": [3, 2], "dilations": [2, 1],
                                  "pads": [0, 1, 2, 0]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_shape": [9, 10]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 6), (2, 3, 4), {"strides": [2], "pads": [1, 2]}),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xs,wsh,attrs", CONVT_CASES)
def test_conv_transpose(xs, wsh, attrs, bias):
    inputs = [rand(*xs), rand(*wsh)] + ([rand(wsh[1])] if bias else [])
    check("ConvTranspose", inputs, attrs, opset=11, rtol=1e-4, atol=1e-5)


def test_conv_transpose_groups():
    x, w = rand(1, 4, 5, 5), rand(4, 3, 3, 3)
    check("ConvTranspose", [x, w, rand(6)], {"group": 2, "strides": [2, 2]}, opset=11,
          engine="ort", rtol=1e-4, atol=1e-5)
    (t,) = infer("ConvTranspose", [T(("N", 4, "H", 5)), T((4, 3, 3, 3))],
                 {"group": 2, "strides": [2, 2]})
    assert t.shape[:2] == ("N", 6) and t.shape[3] == 11 and isinstance(t.shape[2], str)


RESIZE_CASES = [
    ("nearest", "asymmetric", "floor", None, [1, 1, 2, 2]),
    ("nearest", "half_pixel", "round_prefer_floor", None, [1, 1, 1.5, 0.6]),
    ("nearest", "align_corners", "round_prefer_ceil", [1, 2, 7, 3], None),
    ("nearest", "asymmetric", "ceil", None, [1, 1, 2, 3]),
    ("nearest", "pytorch_half_pixel", "round_prefer_floor", [1, 2, 1, 9], None),
    ("linear", "half_pixel", None, None, [1, 1, 2, 2]),
    ("linear", "align_corners", None, [1, 2, 7, 9], None),
    ("linear", "asymmetric", None, None, [1, 1, 0.5, 1.7]),
    ("linear", "pytorch_half_pixel", None, [1, 2, 1, 8], None),
]


@pytest.mark.parametrize("mode,ctm,nearest,sizes,scales", RESIZE_CASES)
def test_resize(mode, ctm, nearest, sizes, scales):
    x = rand(1, 2, 4, 5)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if nearest:
        attrs["nearest_mode"] = nearest
    sc = None if scales is None else np.array(scales, np.float32)
    sz = None if sizes is None else np.array(sizes, np.int64)
    check("Resize", [x, None, sc, sz], attrs, opset=13, engine="ort", rtol=1e-5, atol=1e-6)
    if mode == "linear" and ctm != "pytorch_half_pixel":
        check("Resize", [x, None, sc, sz], attrs, opset=13, rtol=1e-5, atol=1e-6)


def test_resize_versions():
    x = rand(1, 2, 3, 4)
    check("Resize", [x, np.array([1, 1, 2, 2], np.float32)], {"mode": "nearest"}, opset=10,
          engine="ort")
    check("Resize", [x, np.array([1, 1, 2, 1.5], np.float32)], {"mode": "linear"}, opset=10,
          engine="ort", atol=1e-6)
    check("Resize", [x, np.zeros(0, np.float32), np.array([1, 1, 2, 2], np.float32)],
          {"mode": "nearest"}, opset=11, engine="ort")
    check("Resize", [x, None, None, np.array([6, 8], np.int64)],
          {"mode": "linear", "axes": [2, 3]}, opset=18)
    (t,) = infer("Resize", [T((1, 2, 3, 4)), None, T((4,))], opset=13)
    assert len(t.shape) == 4 and all(isinstance(d, str) for d in t.shape)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_space(mode):
    x = rand(2, 8, 3, 4)
    check("DepthToSpace", [x], {"blocksize": 2, "mode": mode}, opset=13)
    check("SpaceToDepth", [rand(2, 3, 4, 6)], {"blocksize": 2}, opset=13)
    check("DepthToSpace", [x], {"blocksize": 2}, opset=1) if mode == "DCR" else None

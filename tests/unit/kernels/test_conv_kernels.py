"""Kernel tests, Conv: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from aircc.ops import InferContext, TensorType, op_def
from kernel_harness import BACKEND, TARGET, T, check, infer, rand

CONV_CASES = [
    # (x shape, w shape, attrs)
    ((1, 3, 9, 9), (4, 3, 3, 3), {}),
    ((2, 3, 9, 9), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 10, 11), (5, 3, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 3]}),
    ((1, 4, 11, 11), (6, 4, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((2, 8, 7, 7), (6, 8, 1, 1), {}),                       # pointwise
    ((2, 8, 7, 7), (6, 4, 1, 1), {"group": 2}),             # grouped pointwise
    ((1, 8, 7, 7), (8, 2, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((2, 6, 9, 9), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 9, 9), (8, 1, 3, 3), {"group": 4}),             # channel multiplier 2
    ((1, 3, 10, 10), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 10, 10), (4, 3, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [3, 3]}),
    ((1, 3, 10, 10), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 3, 8, 8), (4, 3, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 8, 8), (4, 3, 1, 1), {"pads": [1, 1, 1, 1]}),
    ((2, 3, 20), (4, 3, 5), {"pads": [2, 2], "strides": [2]}),  # 1-D
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 3), {"pads": [1, 1, 1, 0, 1, 1]}),  # 3-D
    ((1, 2, 5, 5), (3, 2, 3, 3), {"kernel_shape": [3, 3], "pads": [0, 1, 0, 1]}),
    ((1, 3, 13, 12), (4, 3, 3, 3), {"dilations": [2, 2], "strides": [2, 2], "pads": [1, 2, 2, 1]}),
    ((1, 3, 13, 12), (4, 3, 5, 3), {"dilations": [1, 2], "strides": [1, 2], "pads": [2, 2, 2, 2]}),
    ((2, 4, 11, 11), (4, 1, 3, 3), {"group": 4, "dilations": [2, 2], "strides": [2, 2],
                                    "pads": [1, 1, 1, 1]}),
    ((1, 4, 11, 11), (4, 1, 5, 5), {"group": 4, "strides": [3, 3], "pads": [2, 2, 2, 2]}),
    ((1, 6, 10, 10), (6, 1, 3, 1), {"group": 6, "pads": [1, 0, 1, 0]}),
    ((1, 8, 9, 9), (4, 8, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 15, 15), (2, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ((1, 6, 8), (6, 1, 3), {"group": 6, "pads": [1, 1]}),  # 1-D depthwise
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xs,wsh,attrs", CONV_CASES)
def test_conv(xs, wsh, attrs, bias):
    inputs = [rand(*xs), rand(*wsh)]
    if bias:
        inputs.append(rand(wsh[0]))
    check("Conv", inputs, attrs, opset=11, rtol=1e-4, atol=1e-5)


def test_conv_blocks(monkeypatch):
    """The im2col block split (several row blocks) gives the same result."""
    from aircc.executor.kernels.conv import choice
    monkeypatch.setattr(choice, "BLOCK_BYTES", 4096)
    inputs = [rand(2, 5, 17, 13), rand(4, 5, 3, 3), rand(4)]
    t = BACKEND.impl("Conv", 11).tile([TensorType.of(a) for a in inputs], {"pads": [1, 1, 1, 1]}, TARGET)
    assert t["rows"] < t["out"][0]
    check("Conv", inputs, {"pads": [1, 1, 1, 1]}, opset=11, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("width, exact", [(11, False), (5, True)])
def test_wide_conv_bias_in_the_gemm_and_relu_in_the_store(monkeypatch, width, exact):
    """The im2col (``wide``) mode with one group puts the bias in the GEMM (a row of ones)
    and stores through a fused Relu; with groups, no bias, or a residual after it, the
    bias and Relu are separate passes.  A narrow output (5 wide: rows of the phase layout
    7 wide) gathers exact columns and the GEMM writes Y itself.  Every variant, in several
    row blocks, called directly and bound once with constant weights (``prepare``), equals
    the reference convolution, and the fused forms the plain one followed by Relu."""
    from aircc.executor.kernels.conv import choice
    monkeypatch.setattr(choice, "BLOCK_BYTES", 2000)
    conv = BACKEND.impl("Conv", 11)
    x = rand(2, 4, 9, width)
    for group, with_bias, extra in ((1, True, False), (1, False, False), (2, True, False),
                                    (1, True, True)):
        w, b = rand(6, 4 // group, 3, 3), rand(6)
        ins = [x, w] + ([b] if with_bias else [])
        attrs = {"pads": [1, 1, 1, 1], "strides": [2, 1], "group": group}
        t = conv.tile([TensorType.of(a) for a in ins], attrs, TARGET)
        assert t["mode"] == "wide" and t["rows"] < t["out"][0] and t["exact"] == exact
        check("Conv", ins, attrs, opset=11, rtol=1e-4, atol=1e-5)
        plain = np.empty((2, 6, *t["out"]), np.float32)
        conv.kernel(ins, [plain], attrs, t, None)
        res = rand(*plain.shape)
        fused_ins = ins + ([b if with_bias else None] if extra and len(ins) < 3 else []) \
            + ([res] if extra else [])
        fused_attrs = {**attrs, "fused_relu": 1, **({"fused_add": 1} if extra else {})}
        got = np.empty_like(plain)
        conv.kernel(fused_ins, [got], fused_attrs, t, None)
        want = np.maximum(plain + (res if extra else 0), 0)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        ws = np.empty(t["workspace"], np.uint8)
        bound = conv.prepare(fused_ins, [got], fused_attrs, t, ws,
                             [False, True, True, False][:len(fused_ins)])
        got[...] = np.nan
        bound()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_depthwise_channel_blocks(monkeypatch):
    """Depthwise convolution over several channel blocks gives the same result."""
    from aircc.executor.kernels.conv import choice
    monkeypatch.setattr(choice, "DW_BLOCK_BYTES", 4096)
    inputs = [rand(2, 7, 12, 12), rand(7, 1, 3, 3), rand(7)]
    attrs = {"group": 7, "pads": [1, 1, 1, 1], "strides": [2, 2]}
    t = BACKEND.impl("Conv", 11).tile([TensorType.of(a) for a in inputs], attrs, TARGET)
    assert t["mode"] == "depthwise_wide" and 1 < t["chunk"] < 7
    check("Conv", inputs, attrs, opset=11, rtol=1e-4, atol=1e-5)


def test_conv_dtypes_and_no_tiling():
    x, w = rand(1, 4, 7, 7, dtype=np.float64), rand(6, 2, 3, 3, dtype=np.float64)
    check("Conv", [x, w], {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 2]}, opset=11,
          rtol=1e-10, atol=1e-12)
    # called without tiling/workspace (e.g. constant folding): computes them on the spot
    definition, impl = op_def("Conv", 11), BACKEND.impl("Conv", 11)
    attrs = {"pads": [1, 1, 1, 1]}
    x, w = rand(2, 3, 6, 6), rand(4, 3, 3, 3)
    (t,) = definition.infer(InferContext([TensorType.of(x), TensorType.of(w)], attrs, [None, None]))
    y = np.full(t.shape, np.nan, np.float32)
    impl.kernel([x, w], [y], attrs, {}, None)
    y2 = np.full(t.shape, np.nan, np.float32)
    til = impl.tile([TensorType.of(x), TensorType.of(w)], attrs, TARGET)
    impl.kernel([x, w], [y2], attrs, til, np.empty(til["workspace"], np.uint8))
    np.testing.assert_array_equal(y, y2)


def test_conv_symbolic():
    (t,) = infer("Conv", [T(("N", 3, 224, 224)), T((64, 3, 7, 7))],
                 {"strides": [2, 2], "pads": [3, 3, 3, 3]})
    assert t.shape == ("N", 64, 112, 112)
    (t,) = infer("Conv", [T(("N", 3, "H", 10)), T((8, 3, 3, 3))])
    assert t.shape[:2] == ("N", 8) and isinstance(t.shape[2], str) and t.shape[3] == 8
    with pytest.raises(ShapeInferenceError):
        infer("Conv", [T((1, 4, 8, 8)), T((8, 3, 3, 3))])

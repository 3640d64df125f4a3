"""Kernel tests, pools: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from aircc.ops import TensorType
from kernel_harness import BACKEND, TARGET, T, check, infer, ints, rand

POOL_CASES = [
    ((1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 11), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                      "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 10, 10), {"kernel_shape": [4, 4], "strides": [3, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "auto_pad": "VALID"}),
    ((1, 2, 7, 9), {"kernel_shape": [1, 3], "strides": [1, 2]}),
    ((1, 2, 9, 7), {"kernel_shape": [3, 1], "pads": [1, 0, 1, 0]}),
    ((1, 2, 3, 4), {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),    # no tap covers every row
    # stride 1, rows as long as the input's: the column pass runs over the flattened rows
    ((2, 3, 6, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 2, 5, 9), {"kernel_shape": [2, 4], "pads": [0, 1, 1, 2]}),
    ((1, 2, 5, 6), {"kernel_shape": [1, 3], "pads": [0, 0, 0, 2]}),
    ((1, 2, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]}),  # rows 2x
    ((1, 2, 11, 11), {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 0, 0]}),
    ((2, 3, 20), {"kernel_shape": [4], "strides": [2], "pads": [1, 2]}),
    ((1, 2, 6, 7, 5), {"kernel_shape": [2, 3, 2], "pads": [0, 1, 1, 1, 1, 0]}),
]


@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_maxpool(xs, attrs):
    check("MaxPool", [rand(*xs)], attrs, opset=12, engine="ort")


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_2d_pools_are_separable_unless_dilated(op_type):
    impl = BACKEND.impl(op_type, 12)
    x = T((1, 4, 12, 12))
    t = impl.tile([x], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, TARGET)
    assert t["mode"] == "separable"
    assert t["row_taps"] == [[1, 6, 1], [0, 6, 0], [0, 6, 1]]   # [first out, end, first in]
    assert impl.tile([x], {"kernel_shape": [3, 3], "dilations": [2, 2]}, TARGET)["mode"] == "phase"


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_a_window_as_large_as_its_input_tiles_in_time_linear_in_the_kernel(op_type):
    """Hugging Face EfficientNet's pooler: AvgPool2d(hidden, ceil_mode=True) on a 1 x 1
    plane, a window of hidden^2 taps (1280^2 in B0).  The tiling used to lay out every tap
    of the stride-phase plan it then did not use (quadratic in the taps, hours for B0)."""
    k = 64
    attrs = {"kernel_shape": [k, k], "strides": [k, k], "ceil_mode": 1, "count_include_pad": 1}
    t = BACKEND.impl(op_type, 19).tile([T((2, 8, 1, 1))], attrs, TARGET)
    assert t["mode"] == "separable" and "plan" not in t and len(t["row_taps"]) <= k
    check(op_type, [rand(2, 8, 1, 1)], {k: v for k, v in attrs.items()
                                         if op_type == "AveragePool" or k != "count_include_pad"},
          opset=19, engine="ort")     # onnx's reference divides the ceil_mode window by k^2


def test_maxpool_dilations_and_ints():
    attrs = {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]}
    check("MaxPool", [rand(1, 2, 9, 9)], attrs, opset=12, engine="ort")
    check("MaxPool", [rand(1, 2, 9, 9)], {**attrs, "ceil_mode": 1, "strides": [2, 2]},
          opset=12, engine="ort")
    check("MaxPool", [ints(1, 2, 6, 6, dtype=np.int8)], {"kernel_shape": [3, 3],
          "pads": [1, 1, 1, 1]}, opset=12, engine="ort")
    check("MaxPool", [rand(1, 2, 8, 8)], {"kernel_shape": [3, 3], "strides": [2, 2]}, opset=8)


def test_maxpool_indices_rejected():
    with pytest.raises(ShapeInferenceError):
        infer("MaxPool", [T((1, 2, 4, 4))], {"kernel_shape": [2, 2]}, opset=12, n_out=2)


@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_avgpool(xs, attrs, cip):
    check("AveragePool", [rand(*xs)], {**attrs, "count_include_pad": cip}, opset=11,
          engine="ort")


def test_avgpool_versions():
    check("AveragePool", [rand(1, 2, 9, 9)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
          opset=7)
    check("AveragePool", [rand(1, 2, 9, 9)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
          "dilations": [2, 2], "count_include_pad": 0}, opset=19, engine="ort")


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("xs", [(2, 3, 5, 4), (1, 4, 7), (1, 2, 3, 4, 5)])
def test_global_pool(op_type, xs):
    check(op_type, [rand(*xs)], opset=9, engine="ort")


def test_separable_pools_in_channel_blocks(monkeypatch):
    """Separable pools run a block of channels at a time: several blocks (and a last,
    shorter one) give the reference result, padded or not, max and average.  A strided
    column pass combines its taps at every column in a scratch block (contiguous passes),
    then picks the outputs; the border columns, where a tap falls in the padding or would
    wrap into the next row, come out right (float and int8, odd and even widths)."""
    import aircc.executor.kernels.pool as pool
    monkeypatch.setattr(pool, "POOL_BLOCK_BYTES", 3 * 11 * 11 * 4)
    x = rand(2, 4, 11, 11)
    for op, attrs in (("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2]}),
                      ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
                      ("MaxPool", {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [0, 1, 0, 1]}),
                      ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
                      ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 1, 0, 0]})):
        t = BACKEND.impl(op, 11).tile([TensorType.of(x)], attrs, TARGET)
        assert t["mode"] == "separable" and t["block"] == 3
        assert bool(t["scratch_off"]) == (attrs["strides"][1] > 1)
        check(op, [x], attrs, opset=11, rtol=1e-5, atol=1e-6)
    for xs in ((1, 2, 12, 12), (1, 2, 13, 9)):
        for pads in ([0, 0, 1, 1], [1, 1, 1, 1]):
            check("MaxPool", [ints(*xs, dtype=np.int8)], {"kernel_shape": [3, 3], "strides": [2, 2],
                  "pads": pads}, opset=12, engine="ort")


def test_unpadded_pools_on_big_planes_run_flat(monkeypatch):
    """Unpadded pools on big planes reduce whole planes (a window at every input position,
    then a strided pick): several blocks of channels (and a shorter last one), square and
    oblong windows and strides, max and average, all equal onnxruntime; padded windows
    keep the separable mode."""
    import aircc.executor.kernels.pool as pool
    monkeypatch.setattr(pool, "FLAT_MIN_PLANE", 64)
    monkeypatch.setattr(pool, "FLAT_BLOCK_BYTES", 2 * 13 * 11 * 4)
    x = rand(1, 5, 13, 11)
    for attrs in ({"kernel_shape": [3, 3], "strides": [2, 2]},
                  {"kernel_shape": [2, 3], "strides": [3, 1]},
                  {"kernel_shape": [1, 4], "strides": [1, 2]},
                  {"kernel_shape": [5, 1], "strides": [2, 3]}):
        for op in ("MaxPool", "AveragePool"):
            t = BACKEND.impl(op, 11).tile([TensorType.of(x)], attrs, TARGET)
            assert t["mode"] == "flat" and t["block"] == 2
            check(op, [x], attrs, opset=11, engine="ort")
    padded = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    assert BACKEND.impl("MaxPool", 11).tile([TensorType.of(x)], padded, TARGET)["mode"] == "separable"

"""Kernel tests, softmax and logsoftmax: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.ops import op_def
from kernel_harness import BACKEND, check, rand


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset,axis", [(11, None), (11, 0), (11, 2), (11, -1), (13, None),
                                        (13, 1), (13, 0), (13, -2)])
def test_softmax(op_type, opset, axis):
    attrs = {} if axis is None else {"axis": axis}
    check(op_type, [rand(2, 3, 4, lo=-5, hi=5)], attrs, opset=opset,
          engine="ort" if opset < 13 else "onnx")


def test_softmax_opset1_and_large():
    check("Softmax", [rand(3, 10, lo=-100, hi=100)], opset=9, engine="ort")
    check("LogSoftmax", [rand(3, 10, lo=-100, hi=100)], opset=13, engine="ort")
    assert op_def("Softmax", 1) is op_def("Softmax", 12)
    assert BACKEND.impl("Softmax", 1) is BACKEND.impl("Softmax", 12)


def test_softmax_shift_by_tensor_max_keeps_every_row_accurate():
    """The last-axis float32 path (tensors of SMALL elements or more) shifts by the
    tensor's maximum; rows far below it (an attention mask) are redone with their own
    maximum; NaN and inf go the exact way.  Small tensors take the row-wise path."""
    from aircc.executor.kernels.softmax import SMALL, softmax

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 48, 64)) * 4).astype(np.float32)
    assert x.size >= SMALL
    x[0, 1, :4] -= 10000                     # whole rows masked out
    x[1, 2, 5, 16:] -= 10000                 # half a row masked out
    x[1, 0, 7] += 60                         # one row far above all the others
    y = np.empty_like(x)
    softmax(x, y, 3)
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    ref /= ref.sum(axis=-1, keepdims=True)
    big = ref > 1e-30
    assert np.all(np.abs(y - ref)[big] <= 4e-6 * ref[big])
    assert np.all(np.abs(y - ref) <= 1e-30 + 4e-6 * ref)
    for bad in (np.nan, np.inf, -np.inf):
        z = x.copy()
        z[0, 0, 0, 0] = bad
        out = np.empty_like(z)
        softmax(z, out, 3)
        assert np.isnan(out[0, 0, 0]).all() == (bad != -np.inf)
        np.testing.assert_allclose(out[1], y[1], rtol=1e-5, atol=1e-30)
    small = x[:, :, :4, :32]
    assert small.size < SMALL
    ys = np.empty(small.shape, np.float32)
    softmax(np.ascontiguousarray(small), ys, 3)
    rs = np.exp(small.astype(np.float64) - small.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(ys, rs / rs.sum(axis=-1, keepdims=True), rtol=4e-6, atol=1e-30)


def test_softmax_of_a_sum_shifts_once_and_redoes_underflowing_rows():
    """softmax(a + b) (fuse-add-softmax) on the large path: one shift by max(a) + max(b);
    a sample whose every key the mask removes underflows against it and is redone
    exactly; the mask may be the bigger operand."""
    from aircc.executor.kernels.softmax import SMALL, softmax_add

    rng = np.random.default_rng(4)
    a = (rng.standard_normal((4, 4, 32, 32)) * 3).astype(np.float32)
    mask = np.where(rng.random((4, 1, 1, 32)) < 0.3, -10000.0, 0.0).astype(np.float32)
    mask[2] = -1e30
    assert a.size >= SMALL
    s64 = a.astype(np.float64) + mask
    ref = np.exp(s64 - s64.max(axis=-1, keepdims=True))
    ref /= ref.sum(axis=-1, keepdims=True)
    for x, m in ((a, mask), (mask, a)):
        y = np.empty(a.shape, np.float32)
        softmax_add(x, m, y, 3)
        np.testing.assert_allclose(y, ref, rtol=4e-6, atol=1e-30)
    # small tensors: one reduction for the sums; an underflowing row sends the whole
    # tensor the exact way (sample 2 here), every other case stays on the short path
    small, smask = a[:, :2, :4], mask
    assert small.size < SMALL
    for m in (smask, np.zeros_like(smask)):
        s64 = small.astype(np.float64) + m
        ref = np.exp(s64 - s64.max(axis=-1, keepdims=True))
        ref /= ref.sum(axis=-1, keepdims=True)
        y = np.empty(small.shape, np.float32)
        softmax_add(np.ascontiguousarray(small), m, y, 3)
        np.testing.assert_allclose(y, ref, rtol=4e-6, atol=1e-30)

"""Kernel tests, data movement: concat, split, slice, gather, expand, pad: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from kernel_harness import RNG, T, check, infer, ints, rand, run_ours


def test_concat():
    check("Concat", [rand(2, 3), rand(2, 1), rand(2, 4)], {"axis": 1}, opset=13)
    check("Concat", [rand(2, 3), rand(1, 3)], {"axis": -2}, opset=13)
    check("Concat", [ints(2, 3)], {"axis": 0}, opset=4)
    check("Concat", [rand(2, 3, 1), rand(2, 3, 0)], {"axis": 2}, opset=13)
    (t,) = infer("Concat", [T(("N", 3)), T(("N", 5))], {"axis": 1})
    assert t.shape == ("N", 8)
    with pytest.raises(ShapeInferenceError):
        infer("Concat", [T((2, 3)), T((3, 3))], {"axis": 1})


def test_split():
    x = rand(6, 4)
    check("Split", [x], {"axis": 0}, opset=11, n_out=3)
    check("Split", [x], {"axis": 1, "split": [1, 3]}, opset=11, n_out=2)
    check("Split", [x, np.array([2, 4], np.int64)], opset=13, n_out=2)
    check("Split", [x], {"axis": -1}, opset=13, n_out=2)
    check("Split", [rand(7, 2)], {"num_outputs": 3}, opset=18, n_out=3)
    check("Split", [x, np.array([1, 1, 4], np.int64)], opset=18, n_out=3)
    with pytest.raises(ShapeInferenceError):
        infer("Split", [T((7, 2))], opset=13, n_out=2)


SLICE_CASES = [
    ([0, 1], [2, 3], [0, 1], None),
    ([1], [-1], [1], None),
    ([-3, 0], [100, 10], [0, 2], [1, 2]),
    ([5, 4], [-100, 0], [0, 1], [-1, -2]),
    ([2], [2 ** 63 - 1], [2], [1]),
    ([0], [-(2 ** 63)], [0], [-1]),
    ([0, 0, 0], [3, 4, 5], None, None),
    ([3], [1], [0], None),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICE_CASES)
def test_slice(starts, ends, axes, steps):
    x = rand(6, 5, 7)
    arr = lambda v: None if v is None else np.array(v, np.int64)  # noqa: E731
    inputs = [x, arr(starts), arr(ends), arr(axes), arr(steps)]
    while inputs[-1] is None:
        inputs.pop()
    check("Slice", inputs, opset=13)
    if steps is None:
        attrs = {"starts": starts, "ends": ends, **({} if axes is None else {"axes": axes})}
        _, (y,) = run_ours("Slice", [x], attrs, opset=9)
        sl = [slice(None)] * 3
        for i, (s, e) in enumerate(zip(starts, ends)):
            sl[axes[i] if axes else i] = slice(s, e)
        np.testing.assert_array_equal(y, x[tuple(sl)])


def test_slice_symbolic():
    (t,) = infer("Slice", [T(("N", 10)), T((1,), "int64"), T((1,), "int64"),
                           T((1,), "int64")], opset=13,
                 values=[None, np.array([2]), np.array([5]), np.array([1])])
    assert t.shape == ("N", 3)
    (t,) = infer("Slice", [T(("N", 10)), T((1,), "int64"), T((1,), "int64")], opset=13,
                 values=[None, np.array([0]), np.array([2 ** 63 - 1])])
    assert t.shape == ("N", 10)
    (t,) = infer("Slice", [T((4, 10)), T((1,), "int64"), T((1,), "int64"), T((1,), "int64")],
                 opset=13, values=[None, None, None, np.array([1])])
    assert t.shape[0] == 4 and isinstance(t.shape[1], str)


def test_gather():
    x = rand(5, 4, 3)
    check("Gather", [x, np.array([0, 4, -1], np.int64)], opset=13)
    check("Gather", [x, np.array([[1, 2], [0, -2]], np.int32)], {"axis": 1}, opset=13)
    check("Gather", [x, np.array(2, np.int64)], {"axis": -1}, opset=13)
    check("Gather", [ints(5), np.array([[1], [3]], np.int64)], opset=1)
    check("Gather", [ints(5), np.array(-2, np.int64)], opset=13)    # one element of a vector
    check("GatherElements", [x, RNG.integers(-3, 3, size=(5, 4, 2))], {"axis": 2}, opset=13)


@pytest.mark.parametrize("index", [5, -6])
def test_gather_refuses_an_index_out_of_range_instead_of_wrapping_it(index):
    from aircc.executor.kernels.movement import gather

    x, out = rand(5, 3), np.zeros((2, 3), np.float32)
    with pytest.raises(IndexError, match=f"index {index} is out of bounds for axis 0 with size 5"):
        gather(x, np.array([0, index], np.int64), out, 0)
    gather(x, np.array([4, -5], np.int64), out, 0)
    np.testing.assert_array_equal(out, x[[4, 0]])


@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("idx,axis", [(np.array(-1, np.int64), 1), (np.array(2, np.int64), 0),
                                      (np.array([[0, -1], [3, 1]], np.int64), 1),
                                      (np.array([4, 0, -5], np.int64), 0)])
def test_a_bound_gather_matches_numpy_for_constant_and_changing_indices(constant, idx, axis):
    from aircc.executor.kernels.movement import Gather

    x = rand(5, 4, 3)
    want = np.take(x, np.where(idx < 0, idx + x.shape[axis], idx), axis=axis)
    out = np.zeros(want.shape, np.float32)
    run = Gather.prepare([x, idx], [out], {"axis": axis}, {}, None, [False, constant])
    run()
    np.testing.assert_array_equal(out, want)
    x += 1                                   # a bound input changes between runs
    run()
    np.testing.assert_array_equal(out, want + 1)


@pytest.mark.parametrize("rows", [2, 20000])         # numpy's raise mode, and the check first
def test_a_bound_gather_refuses_an_index_out_of_range_and_works_after(rows):
    from aircc.executor.kernels.movement import Gather

    x = rand(rows + 3, 3)
    idx = np.zeros(rows, np.int64)
    out = np.zeros((rows, 3), np.float32)
    run = Gather.prepare([x, idx], [out], {}, {}, None, [False, False])
    idx[-1] = rows + 3
    with pytest.raises(IndexError, match=f"index {rows + 3} is out of bounds for axis 0 with size {rows + 3}"):
        run()
    idx[-1] = -(rows + 3)
    run()
    np.testing.assert_array_equal(out, x[idx])
    const = np.array([0, rows + 3], np.int64)             # a constant out of range: the
    assert Gather.prepare([x, const], [np.zeros((2, 3), np.float32)], {}, {}, None,
                          [False, True]) is None          # kernel's check at each run


def test_expand_tile():
    check("Expand", [rand(3, 1), np.array([2, 1, 4], np.int64)], opset=13)
    check("Expand", [rand(2, 3), np.array([3], np.int64)], opset=8)
    check("Expand", [ints(1), np.array([2, 2], np.int64)], opset=13)
    check("Tile", [rand(2, 3), np.array([2, 3], np.int64)], opset=13)
    check("Tile", [ints(2, 1, 3), np.array([1, 4, 2], np.int64)], opset=6)
    (t,) = infer("Tile", [T(("N", 3)), T((2,), "int64")], values=[None, np.array([1, 2])])
    assert t.shape == ("N", 6)
    (t,) = infer("Expand", [T(("N", 1)), T((2,), "int64")], values=[None, np.array([1, 5])])
    assert t.shape == ("N", 5)


PAD_CASES = [
    ([1, 2, 0, 3], "constant"), ([0, 0, 2, 1], "reflect"), ([2, 1, 1, 2], "edge"),
    ([1, -1, -1, 2], "constant"), ([0, 1, 0, 0], "reflect"),
]


@pytest.mark.parametrize("pads,mode", PAD_CASES)
def test_pad(pads, mode):
    x = rand(4, 5)
    eng = "ort" if min(pads) < 0 else "onnx"  # onnx's reference rejects negative pads
    check("Pad", [x, np.array(pads, np.int64)], {"mode": mode}, opset=13, engine=eng)
    check("Pad", [x], {"mode": mode, "pads": pads, "value": 1.5}, opset=2, engine=eng)
    if mode == "constant":
        check("Pad", [x, np.array(pads, np.int64), np.array(-2.0, np.float32)], opset=13,
              engine=eng)


def test_pad_axes_and_wrap():
    x = rand(2, 4, 5)
    check("Pad", [x, np.array([1, 2], np.int64), np.array(0.5, np.float32),
                  np.array([-1], np.int64)], opset=18)
    check("Pad", [x, np.array([1, 0, 2, 3], np.int64), None, np.array([0, 2], np.int64)],
          {"mode": "wrap"}, opset=19)
    check("Pad", [ints(3, 3), np.array([1, 1, 1, 1], np.int64), np.array(7, np.int64)],
          opset=11)


@pytest.mark.parametrize("start,limit,delta,dt", [(0, 10, 3, np.int64), (5, 1, -2, np.int32),
                                                   (0.5, 3.0, 0.4, np.float32),
                                                   (1.0, 1.0, 1.0, np.float64),
                                                   (10, 0, 1, np.int64)])
def test_range(start, limit, delta, dt):
    check("Range", [np.array(start, dt), np.array(limit, dt), np.array(delta, dt)], opset=11)


def test_gather_nd_with_batch_dims_and_negative_indices():
    x = rand(4, 3, 2)
    check("GatherND", [x, np.array([[0, 2], [3, -1]], np.int64)], opset=13)
    check("GatherND", [x, np.array([[[1]], [[-4]]], np.int64)], opset=13)
    check("GatherND", [x, np.array([[1], [0], [2], [-1]], np.int64)], {"batch_dims": 1}, opset=13)
    check("GatherND", [ints(2, 3, 4), np.array([[[1, 3]], [[0, 0]]], np.int32)],
          {"batch_dims": 1}, opset=12)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_and_nd_reduce_repeated_indices(reduction):
    """Repeated indices each count for a reduction (ufunc.at, not buffered assignment)."""
    x, upd = rand(3, 4), rand(2, 4)
    idx = np.array([[1, 0, 2, 1], [1, -3, 0, 2]], np.int64)      # row 1 of column 0 twice
    attrs = {"axis": 0} if reduction == "none" else {"axis": 0, "reduction": reduction}
    if reduction == "none":
        idx = np.array([[1, 0, 2, 1], [0, 2, 1, -1]], np.int64)  # the spec: no repeats
    check("ScatterElements", [x, idx, upd], attrs, opset=18)
    nd_idx = np.array([[1], [-1], [1]], np.int64) if reduction != "none" else \
        np.array([[1], [-1], [0]], np.int64)
    check("ScatterND", [rand(4, 3), nd_idx, rand(3, 3)],
          {} if reduction == "none" else {"reduction": reduction}, opset=18)
    check("ScatterND", [rand(2, 3), np.array([[0, 2], [1, 0]], np.int64), rand(2)],
          {} if reduction == "none" else {"reduction": reduction}, opset=18)

"""The oneDNN backend's kernels against the numpy backend's, op by op, through the backend
interface (tiling, prepare and kernel), on channels-first and channels-last activations,
with the epilogues the compiler fuses; and the uses they leave to numpy."""
from __future__ import annotations

import numpy as np
import pytest

from aircc.executor.kernels.dnnl.enums import Arg
from aircc.ops import TensorType, kernel_backend, layout, resolve_target
from aircc.ops.layout import CHANNELS_LAST, to_last

DNNL = kernel_backend("dnnl")
NUMPY = kernel_backend("numpy")
TARGET = resolve_target("dnnl-avx512" if "avx512" in DNNL.host_vector_class() else "dnnl-avx2")
rng = np.random.default_rng(0)


def run(backend, op: str, ins: list, attrs: dict, out_shapes: list, since: int = 13,
        bound: bool = True):
    """Outputs and tiling of ``op`` on ``backend``: tiled, then bound once (``prepare``) and
    run, or run through ``kernel``."""
    domain = "aircc" if op in ("Attention", "ChannelShuffle") else ""
    impl = layout.adapt_kernel(backend.impl(op, since, domain), attrs)
    types = [None if x is None else TensorType.of(x) for x in ins]
    tiling = impl.tile(types, attrs, TARGET)
    ws = np.zeros(max(1, int(tiling.get("workspace", 0))), np.uint8)
    outs = [np.full(s, np.nan, np.float32) for s in out_shapes]
    call = impl.prepare(ins, outs, attrs, tiling, ws, [False] * len(ins), prepared=None) \
        if bound and impl.prepare is not None else None
    if call is None:
        impl.kernel(ins, outs, attrs, tiling, ws)
    else:
        call()
    return outs, tiling


def same(op: str, ins: list, attrs: dict, out_shapes: list, since: int = 13, backend="dnnl",
         rtol=1e-4, atol=1e-5) -> dict:
    """Both backends agree, bound and unbound; returns the oneDNN tiling."""
    want, _ = run(NUMPY, op, ins, attrs, out_shapes, since)
    for bound in (True, False):
        got, tiling = run(DNNL, op, ins, attrs, out_shapes, since, bound)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    assert tiling.get("backend") == backend, tiling
    return tiling


def f32(*shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1))


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("group,dilation,stride,pads", [
    (1, 1, 1, [1, 1, 1, 1]), (2, 1, 2, [0, 1, 1, 0]), (8, 1, 1, [1, 1, 1, 1]), (1, 2, 1, [2, 2, 2, 2])])
def test_conv_with_groups_dilations_strides_pads_and_the_fused_epilogue(channels_last, group,
                                                                         dilation, stride, pads):
    x, w, b = f32(2, 8, 9, 9), f32(8, 8 // group, 3, 3), f32(8)
    attrs = {"group": group, "dilations": [dilation] * 2, "strides": [stride] * 2, "pads": pads}
    out = _conv_out(x.shape, w.shape, attrs)
    r = f32(*out)
    fused = {**attrs, "fused_add": 1, "fused_relu": 1}
    if channels_last:
        ins = [nhwc(x), w, b, nhwc(r)]
        tiling = same("Conv", ins, {**fused, CHANNELS_LAST: 1}, [to_last(out)], 11)
    else:
        tiling = same("Conv", [x, w, b, r], fused, [out], 11)
    assert "ref" not in tiling["impl"], tiling


def _conv_out(xs, ws, attrs) -> tuple:
    from aircc.ops.shapes import window_geometry
    out, _, _ = window_geometry(xs[2:], ws[2:], attrs["strides"], attrs["dilations"], attrs["pads"],
                                "NOTSET")
    return (xs[0], ws[0], *out)


def test_conv_transpose_with_output_padding_and_groups():
    x, w = f32(1, 4, 5, 5), f32(4, 3, 3, 3)
    attrs = {"strides": [2, 2], "output_padding": [1, 1], "group": 2, "pads": [1, 1, 0, 0]}
    same("ConvTranspose", [x, w, f32(6)], attrs, [(1, 6, 11, 11)], 11)
    same("ConvTranspose", [nhwc(x), w], {**attrs, CHANNELS_LAST: 1}, [(1, 11, 11, 6)], 11)


@pytest.mark.parametrize("op,attrs,out", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (2, 4, 4, 4)),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, (2, 4, 4, 4)),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (2, 4, 7, 7)),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
     (2, 4, 7, 7)),
    ("GlobalAveragePool", {}, (2, 4, 1, 1)), ("GlobalMaxPool", {}, (2, 4, 1, 1))])
def test_pools_both_layouts(op, attrs, out):
    x = f32(2, 4, 7, 7)
    same(op, [x], attrs, [out])
    same(op, [nhwc(x)], {**attrs, CHANNELS_LAST: 1}, [to_last(out)])


def test_batch_norm_with_a_fused_relu_both_layouts():
    x, s, b, m = f32(2, 6, 5, 5), f32(6), f32(6), f32(6)
    v = np.abs(f32(6)) + 0.1
    same("BatchNormalization", [x, s, b, m, v], {"epsilon": 1e-5, "fused_relu": 1}, [x.shape], 15)
    same("BatchNormalization", [nhwc(x), s, b, m, v], {"epsilon": 1e-5, CHANNELS_LAST: 1},
         [to_last(x.shape)], 15)


@pytest.mark.parametrize("a,b,attrs,out,add", [
    ((2, 3, 16, 32), (32, 24), {}, (2, 3, 16, 24), None),
    ((2, 16, 32), (2, 32, 24), {"fused_scale": 0.125}, (2, 16, 24), (24,)),
    ((64, 32), (32, 48), {"fused_relu": 1}, (64, 48), (64, 48)),
    ((2, 16, 4, 8), (2, 16, 4, 8), {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1]}, (2, 4, 16, 16),
     None)])
def test_matmul_batched_broadcast_permuted_with_its_epilogue(a, b, attrs, out, add):
    ins = [f32(*a), f32(*b)] + ([f32(*add)] if add else [])
    same("MatMul", ins, {**attrs, **({"fused_add": 1} if add else {})}, [out])


def test_a_binary_post_op_on_a_strided_destination_is_left_to_numpy():
    """oneDNN 3.2 crashes executing it; the numpy kernel runs instead."""
    ins = [f32(2, 7, 12), f32(12, 16), f32(16)]
    tiling = same("MatMul", ins, {"perm_y": [1, 0, 2], "fused_add": 1}, [(7, 2, 16)],
                  backend="numpy")
    assert "strided destination" in tiling["why"]


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 1)])
def test_gemm_with_alpha_and_a_broadcast_c(trans_a, trans_b):
    a = f32(6, 4) if trans_a else f32(4, 6)
    b = f32(5, 6) if trans_b else f32(6, 5)
    same("Gemm", [a, b, f32(5)], {"transA": trans_a, "transB": trans_b, "alpha": 0.5}, [(4, 5)])


@pytest.mark.parametrize("op,a,b,attrs,out", [
    ("Gemm", (1, 96), (80, 96), {"transB": 1}, (1, 80)),            # a torch Linear at batch 1
    ("Gemm", (7, 96), (96, 80), {"alpha": 0.5}, (7, 80)),
    ("MatMul", (2, 16, 64), (64, 48), {"fused_relu": 1}, (2, 16, 48)),
    ("MatMul", (1, 576), (576, 256), {}, (1, 256))])
def test_a_constant_weight_matrix_is_packed_once_and_a_changing_one_read_as_it_lies(op, a, b, attrs,
                                                                                   out):
    from aircc.executor.kernels.dnnl_backend import matmul

    ins = [f32(*a), f32(*b)] + ([f32(out[-1])] if op == "Gemm" else [])
    want, _ = run(NUMPY, op, ins, attrs, [out])
    impl = layout.adapt_kernel(DNNL.impl(op, 13), attrs)
    tiling = impl.tile([TensorType.of(x) for x in ins], attrs, TARGET)
    views = matmul._gemm_views(ins[0], ins[1], attrs) if op == "Gemm" else None
    pd = (matmul.Gemm if op == "Gemm" else matmul.MatMul).plan([TensorType.of(x) for x in ins], attrs)
    assert pd.packed is not None and tiling["workspace"] >= max(pd.scratchpad_size,
                                                                pd.packed.scratchpad_size)
    for constant in (True, False):
        ws = np.zeros(max(1, tiling["workspace"]), np.uint8)
        y = np.full(out, np.nan, np.float32)
        flags = [False, constant] + [False] * (len(ins) - 2)
        call = impl.prepare(ins, [y], attrs, tiling, ws, flags, prepared=None)
        call()
        np.testing.assert_allclose(y, want[0], rtol=1e-4, atol=1e-5)
        bound_weights = call.bound.memories[int(Arg.weights)]
        b_view = views[1] if views else ins[1]
        packs = constant and not b_view.flags.c_contiguous          # a transposed weight
        assert (bound_weights.ptr == b_view.ctypes.data) != packs
    ins[0][...] += 1                                    # the activations change: the same call
    want, _ = run(NUMPY, op, ins, attrs, [out])         # reads them again
    call()
    np.testing.assert_allclose(y, want[0], rtol=1e-4, atol=1e-5)


def test_a_device_without_room_for_the_packed_weights_reads_them_as_they_lie():
    from aircc.executor.device.memory import DeviceMemory
    from aircc.executor.device.prepared import PreparedConstants

    ins, attrs = [f32(1, 96), f32(80, 96), f32(80)], {"transB": 1}
    want, _ = run(NUMPY, "Gemm", ins, attrs, [(1, 80)])
    impl = DNNL.impl("Gemm", 13)
    tiling = impl.tile([TensorType.of(x) for x in ins], attrs, TARGET)
    for capacity, packs in ((1 << 20, True), (4096, False)):    # the copy takes 30 KiB
        store = PreparedConstants(DeviceMemory(capacity), "m")
        y = np.full((1, 80), np.nan, np.float32)
        call = impl.prepare(ins, [y], attrs, tiling, np.zeros(tiling["workspace"], np.uint8),
                            [False, True, True], prepared=store)
        call()
        np.testing.assert_allclose(y, want[0], rtol=1e-4, atol=1e-5)
        assert (call.bound.memories[int(Arg.weights)].ptr != ins[1].ctypes.data) == packs
        assert (store.nbytes > 0) == packs


def test_layer_norm_and_softmax_with_a_fused_residual():
    x, r = f32(4, 64, 96), f32(4, 64, 96)
    same("LayerNormalization", [x, f32(96), f32(96), r], {"axis": -1, "fused_add": 1},
         [x.shape], 17)
    same("LayerNormalization", [x, f32(96)], {"axis": -1, "epsilon": 1e-3}, [x.shape], 17)
    mask = f32(4, 1, 96)
    same("Softmax", [x, mask], {"axis": -1, "fused_add": 1}, [x.shape])
    same("LogSoftmax", [x], {"axis": 2}, [x.shape])


@pytest.mark.parametrize("op,attrs", [("LeakyRelu", {"alpha": 0.1}), ("Sigmoid", {}),
                                      ("Tanh", {}), ("HardSwish", {}), ("Elu", {"alpha": 0.5}),
                                      ("HardSigmoid", {"alpha": 0.3, "beta": 0.4})])
def test_activations_on_large_tensors(op, attrs):
    same(op, [f32(8, 64, 32)], attrs, [(8, 64, 32)], 14, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_ops_broadcast_the_second_operand_or_swap_when_they_commute(op):
    a, b = f32(8, 32, 64), f32(32, 1)
    if op == "Div":
        b = np.abs(b) + 0.5
    same(op, [a, b], {}, [a.shape])
    tiling = same(op, [b, a], {}, [a.shape], backend="dnnl" if op in ("Add", "Mul") else "numpy")
    assert tiling["backend"] == "dnnl" or "first operand broadcasts" in tiling["why"]


def test_small_tensors_and_other_dtypes_stay_on_numpy():
    assert same("Tanh", [f32(4, 4)], {}, [(4, 4)], backend="numpy")["why"].startswith("16 elements")
    x = rng.standard_normal((2, 3, 5, 5))
    w = rng.standard_normal((4, 3, 3, 3))
    tiling = DNNL.impl("Conv", 11).tile([TensorType.of(x), TensorType.of(w)], {}, TARGET)
    assert tiling["backend"] == "numpy" and "float64" in tiling["why"]


def test_a_fused_activation_left_to_numpy_runs_after_the_numpy_kernel():
    """Where oneDNN declines the product, numpy's kernel runs it and then the activation."""
    a, b, c = f32(2, 7, 12), f32(12, 16), f32(16)
    attrs = {"perm_y": [1, 0, 2], "fused_add": 1,
             "fused_activation": {"op": "Clip", "attrs": {"min": -0.5, "max": 0.5}}}
    got, tiling = run(DNNL, "MatMul", [a, b, c], attrs, [(7, 2, 16)])
    assert tiling["backend"] == "numpy"
    want = np.clip(a @ b + c, -0.5, 0.5).transpose(1, 0, 2)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("shape", [(2, 5, 6, 7), (1, 16, 32, 32), (3, 4, 50)])
def test_instance_norm_both_layouts_with_a_fused_relu(shape, relu):
    """Each sample as a oneDNN batch norm of its own statistics; the Relu in the same pass."""
    x, s, b = f32(*shape) * 3 + 1, f32(shape[1]), f32(shape[1])
    attrs = {"epsilon": 1e-5, **({"fused_relu": 1} if relu else {})}
    want, _ = run(NUMPY, "InstanceNormalization", [x, s, b], attrs, [x.shape], 6)
    if relu:
        assert want[0].min() == 0.0
    tiling = same("InstanceNormalization", [x, s, b], attrs, [x.shape], 6)
    assert "ref" not in tiling["impl"]
    got, tiling = run(DNNL, "InstanceNormalization", [nhwc(x), s, b], {**attrs, CHANNELS_LAST: 1},
                      [to_last(x.shape)], 6)
    assert tiling["backend"] == "dnnl"
    np.testing.assert_allclose(np.moveaxis(got[0], -1, 1), want[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seq_in,seq_out", [(0, 0), (1, 1), (0, 1)])
@pytest.mark.parametrize("mask", [None, "per-key", "per-query-and-key"])
@pytest.mark.parametrize("s", [16, 5])
def test_attention_matches_numpy(seq_in, seq_out, mask, s):
    b, e, h = 2, 64, 4
    mask_shape = {None: None, "per-key": (b, 1, 1, s), "per-query-and-key": (s, s)}[mask]
    x = f32(s, b, e) if seq_in else f32(b, s, e)
    ins = [x, f32(e, 3 * e) * 0.2, f32(3 * e)] + ([f32(*mask_shape)] if mask_shape else [])
    attrs = {"heads": h, "base2": 1, "seq_first_in": seq_in, "seq_first_out": seq_out}
    out = (s, b, h, e // h) if seq_out else (b, s, h, e // h)
    same("Attention", ins, attrs, [out], 1, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("empty_row", [False, True])
def test_attention_with_a_nan_guard_runs_on_onednn_and_zeroes_an_emptied_row(empty_row):
    """SDPA exports guard the probabilities of a fully masked row (NaN) to 0: oneDNN runs
    the attention, and only a call whose context came out NaN is made again by numpy."""
    b, s, e, h = 2, 8, 64, 4
    mask = np.zeros((b, 1, 1, s), np.float32)
    mask[1, ..., s // 2:] = -np.inf                    # padding
    if empty_row:
        mask[1] = -np.inf                              # every key of batch 1 masked
    ins = [f32(b, s, e), f32(e, 3 * e) * 0.2, f32(3 * e), mask]
    attrs = {"heads": h, "base2": 1, "nan_guard": 1}
    tiling = same("Attention", ins, attrs, [(b, s, h, e // h)], 1, rtol=1e-4, atol=1e-5)
    assert tiling["backend"] == "dnnl"
    (got,), _ = run(DNNL, "Attention", ins, attrs, [(b, s, h, e // h)], 1)
    assert not np.isnan(got).any()
    assert (got[1] == 0).all() == empty_row            # the emptied rows: zero context


@pytest.mark.parametrize("shape,perm", [((1, 64, 12, 12), [0, 2, 3, 1]),    # NCHW -> NHWC
                                        ((1, 12, 12, 64), [0, 3, 1, 2]),    # and back
                                        ((4, 32, 6, 16), [0, 2, 1, 3]),     # attention heads
                                        ((2, 1, 48, 96), [3, 1, 0, 2]),     # a dim of 1 dropped
                                        ((64, 96), None)])                  # default: reversed
def test_transpose_is_one_reorder(shape, perm):
    x = f32(*shape)
    out = x.transpose(perm).shape if perm else x.T.shape
    tiling = same("Transpose", [x], {"perm": perm} if perm else {}, [out])
    assert tiling["impl"].startswith("jit"), tiling


@pytest.mark.parametrize("shape,axis,groups", [((1, 60, 10, 10), 1, 3), ((1, 10, 10, 60), 3, 4),
                                               ((2, 24, 300), 1, 2)])
def test_channel_shuffle_matches_numpy_and_its_definition(shape, axis, groups):
    x = f32(*shape)
    same("ChannelShuffle", [x], {"axis": axis, "groups": groups}, [shape], since=1)
    (got,), _ = run(DNNL, "ChannelShuffle", [x], {"axis": axis, "groups": groups}, [shape], 1)
    c = shape[axis]
    reads = np.arange(c).reshape(groups, c // groups).T.reshape(-1)    # output i*g + j reads j*C/g + i
    np.testing.assert_array_equal(got, np.take(x, reads, axis=axis))


TEAM_PROBE = r"""
import os, numpy as np
from aircc.ops import TensorType, kernel_backend
from aircc.executor.device import threads
from aircc.executor.device.stream import Stream

impl = kernel_backend("dnnl").impl("MatMul", 13)
a, b = np.ones((256, 512), np.float32), np.ones((512, 256), np.float32)   # 67 MFLOP: a team's work
y = np.zeros((256, 256), np.float32)
attrs = {}
tiling = impl.tile([TensorType.of(a), TensorType.of(b)], attrs, None)
assert tiling["backend"] == "dnnl", tiling
call = impl.prepare([a, b], [y], attrs, tiling, np.zeros(max(1, tiling["workspace"]), np.uint8),
                    [False, True], None)
count = lambda: len(os.listdir("/proc/self/task"))
before = count()
call()                                             # the main thread: no team of its own
assert np.allclose(y, 512.0)
main_after = count()
s = Stream(0)
s.submit(lambda: None)                             # its worker starts with its first task
s.synchronize()
worker_before = count()
s.submit(call)
s.synchronize()
print(before, main_after, worker_before, count(), min(threads.threads(), len(os.sched_getaffinity(0))))
s.close()
"""


def test_kernels_called_outside_a_stream_worker_never_start_an_openmp_team():
    """Only device stream workers run oneDNN with a team of threads: a kernel called from
    any other thread (constant folding, a loader, a test) runs a one-thread twin, so that
    libgomp never keeps two teams on one machine's CPUs (see common.worker_cpus)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", TEAM_PROBE], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    before, main_after, worker_before, worker_after, team = map(int, out.stdout.split())
    assert main_after == before                          # no OpenMP thread started
    assert worker_after - worker_before == team - 1      # the worker's team: its helpers


NO_ROI = np.zeros(0, np.float32)


@pytest.mark.parametrize("attrs,scale,x_shape", [
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, 2.0, (2, 5, 6, 7)),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, 2.0, (1, 3, 8, 8)),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, 0.5, (1, 4, 8, 12)),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
     3.0, (1, 4, 5, 6)),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, 2.0, (1, 2, 3, 4, 5))])
@pytest.mark.parametrize("channels_last", [False, True])
def test_resize_on_onednn_where_its_coordinates_are_onnx_s(attrs, scale, x_shape, channels_last):
    x = f32(*x_shape)
    scales = np.array([1, 1] + [scale] * (len(x_shape) - 2), np.float32)
    out = tuple(int(d * s) for d, s in zip(x_shape, scales))
    want, _ = run(NUMPY, "Resize", [x, NO_ROI, scales], attrs, [out], 13)
    if channels_last:
        attrs = {**attrs, CHANNELS_LAST: 1}
        x, out = np.ascontiguousarray(np.moveaxis(x, 1, -1)), to_last(out)
    impl = DNNL.impl("Resize", 13)
    tiling = impl.tile([TensorType.of(x), TensorType.of(NO_ROI), TensorType.of(scales)], attrs, TARGET)
    y = np.full(out, np.nan, np.float32)
    call = impl.prepare([x, NO_ROI, scales], [y], attrs, tiling,
                        np.zeros(max(1, tiling.get("workspace", 0)), np.uint8), [False, True, True])
    call()
    assert call.__qualname__.startswith("bind"), "oneDNN's resampling ran"
    got = np.moveaxis(y, -1, 1) if channels_last else y
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-5)


def test_a_resize_whose_size_was_rounded_stays_with_numpy():
    """5 x 1.5 -> 7: ONNX maps by 1.5, oneDNN would by 7 / 5; numpy runs it, right."""
    x = f32(1, 2, 5, 5)
    scales = np.array([1, 1, 1.5, 1.5], np.float32)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    want, _ = run(NUMPY, "Resize", [x, NO_ROI, scales], attrs, [(1, 2, 7, 7)], 13)
    impl = DNNL.impl("Resize", 13)
    tiling = impl.tile([TensorType.of(x), TensorType.of(NO_ROI), TensorType.of(scales)], attrs, TARGET)
    y = np.full((1, 2, 7, 7), np.nan, np.float32)
    call = impl.prepare([x, NO_ROI, scales], [y], attrs, tiling,
                        np.zeros(max(1, tiling.get("workspace", 0)), np.uint8), [False, True, True])
    call()
    assert not call.__qualname__.startswith("bind")
    np.testing.assert_allclose(y, want[0], rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ LSTM, GRU, RNN
RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def rnn_operands(op: str, direction: str = "forward", layout_: int = 0, init: str = "hc",
                 seq: int = 5, batch: int = 3, inp: int = 4, hidden: int = 6, bias: bool = True,
                 peepholes: bool = False, outs: str = "yhc", **attrs):
    """(inputs, attributes, output shapes; None for an absent output) of a layer at opset
    14: ``init`` names the initial states given (h, c), ``outs`` the outputs (y, h, c)."""
    g, d = RNN_GATES[op], 2 if direction == "bidirectional" else 1
    state = (batch, d, hidden) if layout_ else (d, batch, hidden)
    ins = [f32(batch, seq, inp) if layout_ else f32(seq, batch, inp),
           f32(d, g * hidden, inp) * 0.5, f32(d, g * hidden, hidden) * 0.5,
           f32(d, 2 * g * hidden) if bias else None, None,
           f32(*state) if "h" in init else None]
    if op == "LSTM":
        ins += [f32(*state) if "c" in init else None, f32(d, 3 * hidden) if peepholes else None]
    y = (batch, seq, d, hidden) if layout_ else (seq, d, batch, hidden)
    shapes = [y, state] + ([state] if op == "LSTM" else [])
    shapes = [s if name in outs else None for s, name in zip(shapes, "yhc")]
    return ins, {"direction": direction, "layout": layout_, "hidden_size": hidden, **attrs}, shapes


def rnn_run(backend, op: str, ins: list, attrs: dict, out_shapes: list, constant: bool):
    """Outputs, tiling and bound call of a layer bound once (weights, bias and peepholes
    ``constant`` or not, as a loaded model's or a directly called kernel's)."""
    impl = backend.impl(op, 14)
    tiling = impl.tile([None if x is None else TensorType.of(x) for x in ins], attrs, TARGET)
    ws = np.zeros(max(1, int(tiling.get("workspace", 0))), np.uint8)
    outs = [None if s is None else np.full(s, np.nan, np.float32) for s in out_shapes]
    flags = [constant and i in (1, 2, 3, 7) for i in range(len(ins))]
    call = impl.prepare(ins, outs, attrs, tiling, ws, flags, prepared=None)
    call()
    return outs, tiling, call


def rnn_same(op: str, ins: list, attrs: dict, out_shapes: list, backend: str = "dnnl") -> dict:
    """oneDNN's kernel (its primitive, when ``backend`` is dnnl) agrees with numpy's, with
    constant weights (packed once) and weights packed at each run; returns the tiling."""
    want, _, _ = rnn_run(NUMPY, op, ins, attrs, out_shapes, False)
    for constant in (True, False):
        got, tiling, call = rnn_run(DNNL, op, ins, attrs, out_shapes, constant)
        assert tiling["backend"] == backend, tiling
        assert (getattr(call, "bound", None) is not None) == (backend == "dnnl"), call
        for g, w in zip(got, want):
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return tiling


RNN_OPS = [("LSTM", {}), ("GRU", {"linear_before_reset": 1}), ("GRU", {"linear_before_reset": 0}),
           ("RNN", {})]


@pytest.mark.parametrize("init", ["", "hc"])
@pytest.mark.parametrize("layout_", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op,extra", RNN_OPS)
def test_recurrent_layers_on_onednn_match_numpy(op, extra, direction, layout_, init):
    """Gate orders, weights, summed biases (four rows for linear_before_reset), both layouts
    (a bidirectional layout-0 Y reordered from oneDNN's concatenation), initial states."""
    ins, attrs, shapes = rnn_operands(op, direction, layout_, init, **extra)
    rnn_same(op, ins, attrs, shapes)


@pytest.mark.parametrize("op,init,outs", [
    ("LSTM", "h", "h"), ("LSTM", "c", "y"), ("LSTM", "", "c"), ("LSTM", "hc", "yc"),
    ("GRU", "h", "h"), ("GRU", "", "y"), ("RNN", "h", "y")])
def test_recurrent_layers_with_states_and_outputs_absent(op, init, outs):
    """An absent output goes to the workspace, an absent initial state is zeros there."""
    for direction in ("forward", "bidirectional"):
        ins, attrs, shapes = rnn_operands(op, direction, 0, init, outs=outs)
        rnn_same(op, ins, attrs, shapes)


def test_lstm_peepholes_and_a_layer_without_bias_on_onednn():
    ins, attrs, shapes = rnn_operands("LSTM", "bidirectional", 1, peepholes=True)
    rnn_same("LSTM", ins, attrs, shapes)
    ins, attrs, shapes = rnn_operands("GRU", "reverse", 0, bias=False, linear_before_reset=1)
    rnn_same("GRU", ins, attrs, shapes)


@pytest.mark.parametrize("activation,alpha", [("Relu", None), ("Sigmoid", None),
                                              ("LeakyRelu", 0.3)])
def test_rnn_activations_onednn_computes(activation, alpha):
    extra = {"activations": [activation] * 2}
    if alpha is not None:
        extra["activation_alpha"] = [alpha] * 2
    ins, attrs, shapes = rnn_operands("RNN", "bidirectional", **extra)
    rnn_same("RNN", ins, attrs, shapes)


@pytest.mark.parametrize("op,extra,why", [
    ("LSTM", {"clip": 1.0}, "clip"),
    ("GRU", {"clip": 0.5, "linear_before_reset": 1}, "clip"),
    ("LSTM", {"input_forget": 1}, "input_forget"),
    ("LSTM", {"activations": ["HardSigmoid", "Tanh", "Tanh"]}, "activations"),
    ("GRU", {"activations": ["Sigmoid", "Relu"]}, "activations"),
    ("RNN", {"activations": ["Tanh", "Relu"], "direction": "bidirectional"}, "activations"),
    ("RNN", {"activations": ["Softsign"]}, "activations")])
def test_what_onednn_does_not_compute_runs_on_numpy(op, extra, why):
    ins, attrs, shapes = rnn_operands(op, **{"direction": "forward", **extra})
    tiling = rnn_same(op, ins, attrs, shapes, backend="numpy")
    assert why in tiling["why"], tiling


def test_float64_layers_run_on_numpy():
    ins, attrs, shapes = rnn_operands("GRU", linear_before_reset=1)
    ins = [None if a is None else a.astype(np.float64) for a in ins]
    tiling = DNNL.impl("GRU", 14).tile([None if a is None else TensorType.of(a) for a in ins],
                                       attrs, TARGET)
    assert tiling["backend"] == "numpy" and "float64" in tiling["why"], tiling


@pytest.mark.parametrize("op,layout_", [("LSTM", 0), ("GRU", 1)])
def test_sequence_lengths_are_read_at_each_run(op, layout_):
    """Bound once: lengths that are all seq_length run the primitive, others the numpy
    kernel bound beside it (Y past a length 0, Y_h the state at its last step)."""
    ins, attrs, shapes = rnn_operands(op, "bidirectional", layout_, seq=6, batch=3)
    lens = np.full(3, 6, np.int32)
    ins[4] = lens
    impl, types = DNNL.impl(op, 14), [None if a is None else TensorType.of(a) for a in ins]
    tiling = impl.tile(types, attrs, TARGET)
    assert tiling["backend"] == "dnnl", tiling
    ws = np.zeros(tiling["workspace"], np.uint8)
    outs = [np.full(s, np.nan, np.float32) for s in shapes]
    call = impl.prepare(ins, outs, attrs, tiling, ws, [i in (1, 2, 3) for i in range(len(ins))])
    assert call.bound is not None
    for values in ([6, 6, 6], [6, 2, 0], [3, 6, 1], [6, 6, 6]):
        lens[:] = values
        call()
        want, _, _ = rnn_run(NUMPY, op, ins, attrs, shapes, False)
        for g, w in zip(outs, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    lens[:] = [7, 6, 6]
    with pytest.raises(ValueError, match="sequence_lens"):
        call()


def test_packed_weights_are_made_once_in_prepared_memory():
    """Constant weights are reordered into the primitive's layout once, when bound, into the
    model's prepared memory: a second task on the same weights shares them."""
    from aircc.executor.device.memory import DeviceMemory
    from aircc.executor.device.prepared import PreparedConstants

    store = PreparedConstants(DeviceMemory(16 << 20), "test")
    ins, attrs, shapes = rnn_operands("LSTM", "bidirectional", 0, seq=4, hidden=16)
    impl = DNNL.impl("LSTM", 14)
    tiling = impl.tile([None if a is None else TensorType.of(a) for a in ins], attrs, TARGET)
    want, _, _ = rnn_run(NUMPY, "LSTM", ins, attrs, shapes, False)
    made = []
    for _ in range(2):
        outs = [np.full(s, np.nan, np.float32) for s in shapes]
        impl.prepare(ins, outs, attrs, tiling, np.zeros(tiling["workspace"], np.uint8),
                     [i in (1, 2, 3) for i in range(len(ins))], prepared=store)()
        made.append(store.nbytes)
        for g, w in zip(outs, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert made[0] == made[1] >= ins[1].nbytes + ins[2].nbytes

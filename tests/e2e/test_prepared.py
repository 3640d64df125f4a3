"""Operands kernels derive from weights (Winograd-domain weights, GEMM operands with the
bias as a column) live in device memory: counted against its capacity, shared by the
tasks and shapes that use one weight, and freed with the model."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from testdata import numpy_target
from aircc.errors import DeviceOutOfMemoryError
from aircc.executor.device.memory import DeviceMemory
from aircc.executor.device.prepared import PreparedConstants, prepared_array
from aircc.executor.kernels.conv import winograd
from graphs import const, model, tensor

RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def conv_model(c=64, m=96, size=28, shape=None):
    """One 3x3 conv with a bias and a Relu; F(4x4, 3x3) at 28 x 28 and up (49 tiles)."""
    w, b = const("W", rand(m, c, 3, 3) * 0.1), const("B", rand(m))
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    shape = shape or [1, c, size, size]
    out = [1, m] + list(shape[2:])
    return model(nodes, [tensor("x", shape)], [tensor("y", out)], [w, b])


def reference(m, x):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def u_bytes(c, m, tile=4):
    return (tile + 2) ** 2 * m * c * 4


def test_static_load_puts_winograd_weights_on_the_device_and_close_frees_them():
    m = conv_model()
    dev = aircc.VirtualDevice(256 << 20)
    compiled = aircc.compile(m, streams=1, target=numpy_target())
    model_ = aircc.load(compiled.om, device=dev)
    stats = model_.run_stats()
    assert stats.prepared_bytes == u_bytes(64, 96)
    assert dev.memory.used >= stats.weights_bytes + stats.arena_bytes + stats.prepared_bytes
    x = rand(1, 64, 28, 28)
    np.testing.assert_allclose(model_.run({"x": x})["y"], reference(m, x), rtol=1e-4, atol=1e-4)
    model_.close()
    assert dev.memory.used == 0


def test_a_device_too_small_for_the_prepared_weights_fails_the_load_and_keeps_nothing():
    m = conv_model()
    compiled = aircc.compile(m, streams=1, target=numpy_target())
    big = aircc.VirtualDevice(256 << 20)
    with aircc.load(compiled.om, device=big) as fits:
        needed, prepared = big.memory.used, fits.run_stats().prepared_bytes
    dev = aircc.VirtualDevice(needed - prepared // 2)
    with pytest.raises(DeviceOutOfMemoryError, match="prepared weights of model"):
        aircc.load(compiled.om, device=dev)
    assert dev.memory.used == 0 and dev.streams == []
    # the device still works: a model without Winograd convs (16 channels) fits and runs
    small = conv_model(c=16, m=16)
    with aircc.load(aircc.compile(small, streams=1, target=numpy_target()).om, device=dev) as loaded:
        assert loaded.run_stats().prepared_bytes < prepared
        x = rand(1, 16, 28, 28)
        np.testing.assert_allclose(loaded.run({"x": x})["y"], reference(small, x), rtol=1e-4, atol=1e-4)
    assert dev.memory.used == 0
    with aircc.load(compiled.om, device=aircc.VirtualDevice(needed)) as exact:
        assert exact.run_stats().prepared_bytes == prepared


def test_two_convs_sharing_a_weight_share_its_transform():
    w = const("W", rand(64, 64, 3, 3) * 0.1)
    nodes = [helper.make_node("Conv", ["x", "W"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r"]),
             helper.make_node("Conv", ["r", "W"], ["y"], pads=[1, 1, 1, 1])]
    m = model(nodes, [tensor("x", [1, 64, 28, 28])], [tensor("y", [1, 64, 28, 28])], [w])
    with aircc.load(aircc.compile(m, streams=1, target=numpy_target()).om) as loaded:
        assert loaded.run_stats().prepared_bytes == u_bytes(64, 64)
        x = rand(1, 64, 28, 28)
        np.testing.assert_allclose(loaded.run({"x": x})["y"], reference(m, x), rtol=1e-4, atol=1e-4)


def test_dynamic_mode_transforms_a_weight_once_for_every_shape(monkeypatch):
    """The first run of each shape is bound like its replays: one transform for the
    model's life, in device memory, whatever the shapes."""
    calls = []
    original = winograd.weights

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(winograd, "weights", counted)
    m = conv_model(shape=[1, 64, "h", "w"])
    compiled = aircc.compile(m, target=numpy_target())
    assert compiled.report.mode == "dynamic"
    with aircc.load(compiled.om) as loaded:
        for size in (28, 32, 28, 36, 32):
            x = rand(1, 64, size, size)
            np.testing.assert_allclose(loaded.run({"x": x})["y"], reference(m, x), rtol=1e-4, atol=1e-4)
        assert len(calls) == 1
        assert loaded.run_stats().prepared_bytes == u_bytes(64, 96)


def test_prepared_constants_allocate_once_per_key_and_give_everything_back():
    mem = DeviceMemory(1 << 16)
    store = PreparedConstants(mem, "model 't'")
    fills = []

    def fill(out):
        fills.append(out.shape)
        out[...] = 3

    a = store.get(("k", 1), (8, 8), np.float32, fill)
    assert store.get(("k", 1), (8, 8), np.float32, fill) is a and fills == [(8, 8)]
    assert np.shares_memory(a, mem.data) and (a == 3).all()
    store.get(("k", 2), (4,), np.float64, fill)
    assert store.nbytes == 8 * 8 * 4 + 4 * 8 and mem.used > 0
    with pytest.raises(DeviceOutOfMemoryError, match="prepared weights of model 't'"):
        store.get(("k", 3), (1 << 20,), np.float32, fill)
    with pytest.raises(ValueError):      # a fill that fails gives its allocation back
        store.get(("k", 4), (4,), np.float32, lambda out: (_ for _ in ()).throw(ValueError("bad")))
    used = mem.used
    store.release()
    assert mem.used == 0 and store.nbytes == 0 and used > 0
    host = prepared_array(None, "any", (2, 2), np.float32, fill)    # no store: a host array
    assert not np.shares_memory(host, mem.data) and (host == 3).all()


def test_dynamic_mode_out_of_memory_for_prepared_weights_fails_the_run_not_the_model():
    m = conv_model(shape=[1, 64, "h", "w"])
    compiled = aircc.compile(m, target=numpy_target())
    probe = aircc.VirtualDevice(64 << 20)
    with aircc.load(compiled.om, device=probe) as loaded:
        loaded.run({"x": rand(1, 64, 28, 28)})
        need, prepared = probe.memory.peak_used, loaded.run_stats().prepared_bytes
    dev = aircc.VirtualDevice(need - prepared // 2)
    with aircc.load(compiled.om, device=dev) as loaded:
        for _ in range(2):
            with pytest.raises(DeviceOutOfMemoryError, match="prepared weights of model"):
                loaded.run({"x": rand(1, 64, 28, 28)})
        x = rand(1, 64, 8, 8)       # too small for the Winograd mode: runs
        np.testing.assert_allclose(loaded.run({"x": x})["y"], reference(m, x), rtol=1e-4, atol=1e-4)
        assert loaded.run_stats().prepared_bytes < prepared
    assert dev.memory.used == 0

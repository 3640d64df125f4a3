"""The virtual device and the static runtime: memory, streams, events, errors."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import aircc
from aircc.errors import DeviceOutOfMemoryError, InputError, KernelError, ModelFormatError
from aircc.config import parse_bytes
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.memory import DeviceMemory
from aircc.executor.device.stream import Event, Stream
from aircc.executor.runtime.feeds import exact_feeds
from testdata import SAMPLES
from graphs import diamond


def test_device_memory_allocates_frees_coalesces_and_reports_oom():
    mem = DeviceMemory(4096)
    a = mem.malloc(1000)
    b = mem.malloc(1000)
    assert a != b and mem.used == 2048
    with pytest.raises(DeviceOutOfMemoryError) as e:
        mem.malloc(4000, "big tensor")
    assert "2048 bytes are available" in str(e.value) and "big tensor" in str(e.value)
    assert e.value.code == 207018
    mem.free(a)
    mem.free(b)
    assert mem.largest_free_block() == 4096      # coalesced back into one block
    assert mem.malloc(4096) == 0


def test_device_memory_views_are_real_memory():
    mem = DeviceMemory(1 << 16)
    off = mem.malloc(64)
    v = mem.view(off, np.float32, (4, 4))
    v[...] = 7
    assert np.shares_memory(v, mem.data)
    assert mem.data[off:off + 64].view(np.float32).sum() == 112
    assert mem.data.size == 1 << 16
    for _ in range(3):     # every allocation is a 64-byte-aligned address, not just offset
        assert mem.view(mem.malloc(100), np.float32, (25,)).ctypes.data % 64 == 0


def test_streams_run_in_order_and_events_really_block():
    s0, s1 = Stream(0), Stream(1)
    ev = Event(0)
    log = []
    s1.submit(lambda: ev.wait(1, lambda: False))
    s1.submit(lambda: log.append("consumer"))
    s0.submit(lambda: time.sleep(0.05))
    s0.submit(lambda: log.append("producer"))
    s0.submit(lambda: ev.record(1))
    s1.synchronize(timeout=5)
    assert log == ["producer", "consumer"]
    s0.close(), s1.close()


def test_event_wait_times_out_when_never_recorded():
    ev = Event(0)
    assert ev.wait(1, lambda: False, timeout=0.05) is False


def test_parse_bytes():
    assert parse_bytes("512M") == 512 << 20 and parse_bytes("2G") == 2 << 30 and parse_bytes("4096") == 4096


@pytest.fixture
def mlp_om(tmp_path):
    path = tmp_path / "mlp.om"
    aircc.compile(f"{SAMPLES}/mlp.onnx", path, input_shapes={"input": [4, 784]})
    return path


def test_load_and_run_mlp_sample(mlp_om, device):
    model = aircc.load(mlp_om, device=device)
    x = np.load(f"{SAMPLES}/mlp_input.npy")
    y = model.run({"input": x})["probs"]
    assert y.shape == (4, 10)
    np.testing.assert_allclose(y.sum(axis=1), 1, rtol=1e-5)
    import onnxruntime as ort
    ref = ort.InferenceSession(f"{SAMPLES}/mlp.onnx", providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-6)
    model.close()


def test_bad_feeds_get_clear_errors_and_next_call_works(mlp_om, device):
    model = aircc.load(mlp_om, device=device)
    x = np.load(f"{SAMPLES}/mlp_input.npy")
    good = model.run({"input": x})["probs"]
    with pytest.raises(InputError, match="must be float32, got float64"):
        model.run({"input": x.astype(np.float64)})
    with pytest.raises(InputError, match=r"must have shape \[4, 784\], got \[2, 784\]"):
        model.run({"input": x[:2]})
    with pytest.raises(InputError, match="missing inputs"):
        model.run({})
    with pytest.raises(InputError, match="unknown input names"):
        model.run({"input": x, "extra": x})
    np.testing.assert_array_equal(model.run({"input": x})["probs"], good)
    model.close()


def test_load_takes_what_compile_returned(device):
    compiled = aircc.compile(diamond(branches=2))
    x = np.linspace(-1, 1, 2 * 4, dtype=np.float32).reshape(2, 4)
    from_object = aircc.load(compiled, device=device).run({"x": x})
    from_om = aircc.load(compiled.om, device=device).run({"x": x})
    assert from_object.keys() == from_om.keys()
    for k in from_object:
        np.testing.assert_array_equal(from_object[k], from_om[k])


def test_exact_feeds_take_the_short_path_and_everything_else_the_checked_one(mlp_om, device):
    model = aircc.load(mlp_om, device=device)
    x = np.load(f"{SAMPLES}/mlp_input.npy")
    assert exact_feeds(model.engine._fast[1], {"input": x}) is not None
    strided = np.asfortranarray(x)                 # same values, not C-contiguous
    sub = x.view(np.recarray)                      # an ndarray subclass
    for feeds in ({"input": strided}, {"input": sub}):
        assert exact_feeds(model.engine._fast[1], feeds) is None
    fast = model.run({"input": x})["probs"]
    for other in (model.run({"input": strided})["probs"], model.run({"input": sub})["probs"],
                  model.run({"input": x}, output_names=["probs"])["probs"]):
        np.testing.assert_array_equal(other, fast)
    a, b = model.run({"input": x})["probs"], model.run({"input": x})["probs"]
    assert a is not b and not np.shares_memory(a, b)     # every run returns fresh outputs
    assert not np.shares_memory(a, device.memory.data)    # host arrays, not device views
    assert model.run_stats().submissions_per_run == 1
    model.close()


def test_a_loaded_model_is_a_context_manager_that_closes_on_any_exit(mlp_om):
    """``with aircc.load(...) as m`` frees the model's device memory and streams when the
    block ends, normally or by an error, for static and dynamic models alike."""
    dev = VirtualDevice(256 << 20)
    x = np.load(f"{SAMPLES}/mlp_input.npy")
    with aircc.load(mlp_om, device=dev) as model:
        assert model.run({"input": x})["probs"].shape == (4, 10)
        assert dev.memory.used > 0 and model.engine.streams
    assert dev.memory.used == 0 and not model.engine.streams
    with pytest.raises(InputError):
        with aircc.load(mlp_om, device=dev) as model:
            model.run({"input": x[:2]})
    assert dev.memory.used == 0
    dynamic = aircc.compile(diamond(), mode="dynamic")
    with aircc.load(dynamic.om, device=dev) as model:
        assert type(model.engine).__name__ == "DynamicModel"
        got = model.run({"x": np.ones((2, 4), np.float32)})["y"]
        assert got.shape == (2, 4)
    assert dev.memory.used == 0 and not model.engine.streams
    dev.close()


def test_out_of_memory_at_load_names_bytes_and_loses_nothing(mlp_om):
    small = VirtualDevice(64 << 10)
    with pytest.raises(DeviceOutOfMemoryError, match="bytes are available"):
        aircc.load(mlp_om, device=small)
    assert small.memory.used == 0           # nothing leaked by the failed load
    big = VirtualDevice(64 << 20)
    model = aircc.load(mlp_om, device=big)
    assert model.run({"input": np.load(f"{SAMPLES}/mlp_input.npy")})["probs"].shape == (4, 10)
    model.close()
    assert big.memory.used == 0
    small.close(), big.close()


def test_kernel_failure_names_node_and_op_and_next_run_works(device, tmp_path):
    unfused = ["fold-constants", "infer-shapes", "remove-identity", "dce", "infer-shapes"]
    compiled = aircc.compile(diamond(branches=3), passes=unfused)     # keep tanh1 its own launch
    model = aircc.load(compiled.om, device=device)
    x = np.ones((2, 4), np.float32)
    expected = model.run({"x": x})["y"]
    # sabotage one kernel of one stream: the run fails cleanly, other streams are released
    lists = model.engine.program.lists
    victim_stream = next(i for i, lst in enumerate(lists) if any(d.get("node") == "tanh1" for _, d in lst))
    k = next(j for j, (_, d) in enumerate(lists[victim_stream]) if d.get("node") == "tanh1")
    fn, desc = lists[victim_stream][k]

    def boom(run):
        raise FloatingPointError("injected fault")
    lists[victim_stream][k] = (boom, desc)
    with pytest.raises(KernelError, match="tanh1.*Tanh.*injected fault"):
        model.run({"x": x}, timeout=10)
    lists[victim_stream][k] = (fn, desc)
    np.testing.assert_array_equal(model.run({"x": x})["y"], expected)
    model.close()


def test_multistream_run_is_deterministic_across_many_runs(device):
    compiled = aircc.compile(diamond(width=4096, branches=4), min_branch_bytes=0,
                             split_matrix_branches=True)
    model = aircc.load(compiled.om, device=device)
    assert model.engine.program.streams and len(model.engine.program.streams) == 4
    x = np.random.default_rng(1).standard_normal((2, 4096)).astype(np.float32)
    first = model.run({"x": x})["y"]
    expected = sum(np.tanh(np.maximum(x, 0) * (b + 1)) for b in range(4))
    np.testing.assert_allclose(first, expected, rtol=1e-5, atol=1e-6)
    for _ in range(20):
        np.testing.assert_array_equal(model.run({"x": x})["y"], first)
    model.close()


def test_corrupt_om_is_rejected_and_loader_still_works(mlp_om, device):
    data = bytearray(mlp_om.read_bytes())
    data[-10] ^= 0xFF
    with pytest.raises(ModelFormatError):
        aircc.load(bytes(data), device=device)
    model = aircc.load(mlp_om, device=device)
    assert model.run({"input": np.load(f"{SAMPLES}/mlp_input.npy")})["probs"].shape == (4, 10)
    model.close()


def test_device_cpus_pin_the_stream_workers_and_bad_lists_are_refused(mlp_om):
    """Workers of a device made with ``cpus`` run on those CPUs only; the host thread is
    pinned inside ``host_thread_on_device_cpus`` and put back after; a CPU the process
    cannot use, or a malformed list, is a DeviceError naming it, and nothing is created."""
    import os

    from aircc.errors import DeviceError
    from aircc.executor.device.device import parse_cpus

    assert parse_cpus("0") == {0} and parse_cpus("0-2,5") == {0, 1, 2, 5}
    first = min(os.sched_getaffinity(0))
    dev = VirtualDevice(64 << 20, cpus=str(first))
    try:
        model = aircc.load(mlp_om, device=dev)
        x = np.load(f"{SAMPLES}/mlp_input.npy")
        before = os.sched_getaffinity(0)
        with dev.host_thread_on_device_cpus():
            assert os.sched_getaffinity(0) == {first}
            y = model.run({"input": x})["probs"]
        assert os.sched_getaffinity(0) == before
        np.testing.assert_allclose(y.sum(axis=1), 1, rtol=1e-5)
        for s in [*dev.streams, dev.control]:
            s.submit(lambda: None)           # each has a worker now (an idle one parks)
            s.synchronize()
        workers = [t for t in threading.enumerate() if t.name.startswith(f"dev{dev.id}-")]
        mine = [s._worker for s in dev.streams] + [dev.control._worker]
        assert mine and all(w in workers for w in mine)
        assert all(os.sched_getaffinity(w.native_id) == {first} for w in mine)
        model.close()
    finally:
        dev.close()
    missing = max(os.sched_getaffinity(0)) + 1
    for bad, words in ((str(missing), "not all available"), ("x-1", "bad CPU list"), ("", "no CPU")):
        with pytest.raises(DeviceError, match=words):
            VirtualDevice(1 << 20, cpus=bad if bad else " ")
    unpinned = VirtualDevice(1 << 20)
    try:
        assert unpinned.cpus is None
        with unpinned.host_thread_on_device_cpus():
            assert os.sched_getaffinity(0) == before
    finally:
        unpinned.close()

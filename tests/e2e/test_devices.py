"""The runtime around the device: discovery and logical ids, device states and their
callbacks, stream priorities on shared compute units, the memory pool's statistics,
and one model on several devices (split batches, failover)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import aircc
from aircc import faults
from aircc.errors import ConfigError, DeviceError, DeviceLostError, InputError
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.discovery import discover
from aircc.executor.device.health import DeviceState
from aircc.formats import save_om
from graphs import diamond
from testdata import SAMPLES

#: Four devices: 1 reports a problem, 2 answers after the probe's deadline.
FOUR = {"probe_timeout_ms": 800, "devices": [
    {"id": 0, "memory": "64M", "compute_units": 1},
    {"id": 1, "memory": "64M", "health": "ecc_error"},
    {"id": 2, "memory": "64M", "response_ms": 4000},
    {"id": 3, "memory": "32M", "compute_units": 2, "pool": {"growth_bytes": "1M"}},
]}


pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.fixture
def four_devices():
    reg = discover(FOUR)
    yield reg
    reg.close()


def mapping(reg) -> list[tuple]:
    return [(i.logical_id, i.physical_id, i.state) for i in reg.infos]


# ---------------------------------------------------------------- discovery
def test_four_configured_two_usable_with_contiguous_ids_the_same_on_every_start():
    regs = [discover(FOUR) for _ in range(2)]
    try:
        for reg in regs:
            assert len(reg) == 2
            assert mapping(reg) == [(0, 0, "healthy"), (None, 1, "unavailable"),
                                    (None, 2, "unavailable"), (1, 3, "healthy")]
            assert [d.physical_id for d in reg.devices] == [0, 3]
            bad = {i.physical_id: i.reason for i in reg.infos if i.logical_id is None}
            assert "ecc_error" in bad[1] and "did not answer its probe within 800 ms" in bad[2]
            assert reg.get(1).memory.capacity == 32 << 20 and reg.get(1).units.count == 2
            with pytest.raises(DeviceError, match=r"no device 2: the logical devices are 0-1"):
                reg.get(2)
    finally:
        for reg in regs:
            reg.close()


def test_visible_devices_narrow_and_reorder(tmp_path):
    reg = discover(FOUR, visible="3,0")
    try:
        assert [(i.logical_id, i.physical_id) for i in reg.infos] == [(0, 3), (1, 0)]
    finally:
        reg.close()
    reg = discover(FOUR, visible="1,3")      # an unavailable one keeps no logical id
    try:
        assert mapping(reg) == [(None, 1, "unavailable"), (0, 3, "healthy")]
    finally:
        reg.close()
    with pytest.raises(ConfigError, match=r"names devices \[7\].*its ids: \[0, 1, 2, 3\]"):
        discover(FOUR, visible="7")


AIRRUN = [sys.executable, "-c", "from aircc.cli.airrun_cmd import main; main()"]


def list_devices(env: dict) -> str:
    out = subprocess.run([*AIRRUN, "--list-devices"],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env}, check=True)
    return out.stdout


def test_airrun_lists_devices_from_the_environment_identically_on_every_start(tmp_path):
    cfg = tmp_path / "devices.json"
    cfg.write_text(json.dumps(FOUR))
    first = list_devices({"AIR_DEVICE_CONFIG": str(cfg)})
    rows = [line.split()[:4] for line in first.splitlines()[1:]]
    assert rows == [["0", "0", "dev0", "healthy"], ["-", "1", "dev1", "unavailable"],
                    ["-", "2", "dev2", "unavailable"], ["1", "3", "dev3", "healthy"]]
    second = list_devices({"AIR_DEVICE_CONFIG": str(cfg)})
    assert [r.split()[:4] for r in second.splitlines()] == [r.split()[:4] for r in first.splitlines()]
    narrowed = list_devices({"AIR_DEVICE_CONFIG": str(cfg), "AIR_VISIBLE_DEVICES": "3,0"})
    assert [line.split()[:2] for line in narrowed.splitlines()[1:]] == [["0", "3"], ["1", "0"]]


@pytest.mark.parametrize("config, message", [
    ({"devices": []}, "non-empty list 'devices'"),
    ({"devices": [{"id": 0}, {"id": 0}]}, "ids must be unique"),
    ({"devices": [{"memory": "lots"}]}, r"devices\[0\].memory: 'lots' is not a size"),
    ({"devices": [{"compute_units": 0}]}, r"compute_units must be an int >= 1"),
    ({"devices": [{"colour": "red"}]}, r"unknown keys \['colour'\]"),
    ({"devices": [{"pool": {"growth_bytes": 100}}]}, "multiple of 512"),
])
def test_a_bad_configuration_names_what_is_wrong(config, message):
    with pytest.raises(ConfigError, match=message):
        discover(config)


def test_a_missing_configuration_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        discover(str(tmp_path / "nope.json"))


# ---------------------------------------------------------------- states and callbacks
def test_states_move_with_the_runtime_and_callbacks_hear_faults_and_resets(four_devices):
    dev = four_devices.get(0)
    heard = []
    stop = dev.on_state_change(lambda d, old, new, why: heard.append((d.id, old.value, new.value)))
    m = aircc.load(aircc.compile(diamond(), mode="static").om, device=dev,
                   recovery=aircc.RecoveryPolicy(device_lost="fail"))
    fault = faults.inject("hang", seconds=30, device=0)
    seen = {}

    def run():
        try:
            m.run({"x": np.ones((2, 4), np.float32)})
        except Exception as e:
            seen["error"] = e
    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 10
    while not fault.fired and time.monotonic() < deadline:
        time.sleep(0.005)
    assert dev.state is DeviceState.RUNNING
    dev.inject_fault("overheated")
    t.join(10)
    assert not t.is_alive() and isinstance(seen["error"], DeviceLostError)
    assert "faulted during the run (overheated)" in str(seen["error"])
    assert dev.state is DeviceState.FAULT and heard == [(0, "healthy", "fault")]
    with pytest.raises(DeviceLostError, match="device 0 is lost"):
        dev.check_usable()
    faults.clear()
    dev.reset()
    assert dev.state is DeviceState.HEALTHY and heard[-1] == (0, "fault", "healthy")
    out = m.run({"x": np.ones((2, 4), np.float32)})["y"]          # weights written again
    np.testing.assert_allclose(out, sum(np.tanh(np.ones((2, 4), np.float32) * k) for k in (1, 2, 3)),
                               rtol=1e-6)
    stop()
    dev.inject_fault("again")
    assert len(heard) == 2                   # removed: it hears no more
    dev.reset()
    m.close()


def test_an_unavailable_device_takes_no_work_and_cannot_be_reset():
    reg = discover({"devices": [{"id": 5, "health": "no_firmware"}]})
    try:
        assert len(reg) == 0 and reg.infos[0].state == "unavailable"
        with pytest.raises(DeviceError, match="the logical devices are none"):
            reg.get(0)
    finally:
        reg.close()
    dev = VirtualDevice(1 << 20)
    dev.mark_unavailable("device 9 answered too late")
    with pytest.raises(DeviceError, match="unavailable: device 9 answered too late"):
        dev.create_stream()
    with pytest.raises(DeviceError, match="cannot be reset"):
        dev.reset()
    dev.close()


# ---------------------------------------------------------------- priorities
def queue_behind_a_gate(dev, high_priority: int) -> tuple[list[float], float]:
    """100 tasks queued on a low stream behind a task that holds the device's only
    compute unit, then one task on a second stream; start times of each."""
    low, high = dev.create_stream(0), dev.create_stream(high_priority)
    gate = threading.Event()
    starts: list[float] = []
    high_start: list[float] = []
    low.submit(lambda: gate.wait(10))
    for _ in range(100):
        low.submit(lambda: (starts.append(time.perf_counter()), time.sleep(0.0002)))
    time.sleep(0.05)                 # every low task is queued before the high one
    high.submit(lambda: high_start.append(time.perf_counter()))
    time.sleep(0.05)                 # the high stream's worker now waits for the unit
    gate.set()
    low.synchronize(10)
    high.synchronize(10)
    return starts, high_start[0]


def test_a_high_priority_task_starts_before_the_last_90_queued_low_ones():
    dev = VirtualDevice(1 << 20, compute_units=1)
    try:
        starts, high = queue_behind_a_gate(dev, high_priority=7)
        assert len(starts) == 100
        assert sum(s < high for s in starts) <= 10        # before the last 90 of them
        assert dev.units.stats["handoffs"] >= 1
    finally:
        dev.close()


def test_without_priorities_the_device_keeps_the_order_tasks_were_queued_in():
    dev = VirtualDevice(1 << 20, compute_units=1)
    try:
        starts, high = queue_behind_a_gate(dev, high_priority=0)
        assert sum(s < high for s in starts) == 100
    finally:
        dev.close()


def test_one_compute_unit_runs_a_multi_stream_model_with_events_right():
    """Workers give their unit back while they wait on an event: no deadlock."""
    om = aircc.compile(diamond(branches=4), mode="static", min_branch_bytes=0,
                       split_matrix_branches=True).om
    dev = VirtualDevice(16 << 20, compute_units=1)
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    want = sum(np.tanh(np.maximum(x, 0) * k) for k in (1, 2, 3, 4))
    try:
        with aircc.load(om, device=dev, timeout=20) as m:
            assert len(m.engine.streams) > 1
            for _ in range(20):
                np.testing.assert_allclose(m.run({"x": x})["y"], want, rtol=1e-6)
    finally:
        dev.close()


def test_the_compiler_gives_streams_priorities_and_the_loader_adds_the_models():
    proto = diamond()
    c = aircc.compile(proto, mode="static", min_branch_bytes=0, split_matrix_branches=True,
                      stream_priorities={1: 3})
    tasks = c.om.parsed().static_plans()[0].tasks
    assert tasks.priorities[:2] == [0, 3]
    dev = VirtualDevice(16 << 20)
    try:
        with aircc.load(c.om, device=dev, priority=2) as m:
            assert [s.priority for s in m.engine.streams][:2] == [2, 5]
        with aircc.load(c.om, device=dev, priority="high") as m:
            assert [s.priority for s in m.engine.streams][:2] == [7, 7]   # kept in range
    finally:
        dev.close()
    with pytest.raises(aircc.AirccError, match="the model has streams 0-"):
        aircc.compile(proto, mode="static", stream_priorities={40: 1})
    with pytest.raises(aircc.AirccError, match=r"priority must be an int in \[-7, 7\]"):
        aircc.compile(proto, mode="static", stream_priorities={0: 9})


# ---------------------------------------------------------------- the memory pool
def test_pool_statistics_return_to_baseline_after_every_unload_and_release_returns_bytes():
    dev = VirtualDevice(256 << 20)
    base = dev.memory_stats()
    keys = ("reserved_bytes", "allocated_bytes", "cached_bytes")
    static = aircc.compile(f"{SAMPLES}/mlp.onnx", input_shapes={"input": [4, 784]}).om
    dynamic = aircc.compile(f"{SAMPLES}/mlp.onnx").om
    x = np.random.default_rng(0).standard_normal((4, 784)).astype(np.float32)
    try:
        for om in (static, dynamic, static):
            m = aircc.load(om, device=dev, replay=False)
            m.run({"input": x})
            during = dev.memory_stats()
            assert during["allocated_bytes"] > 0 and during["peak_allocated_bytes"] >= during["allocated_bytes"]
            if om is dynamic:
                assert during["cached_bytes"] > 0          # the run's freed blocks are cached
                got = dev.release_cached()
                after = dev.memory_stats()
                assert got > 0 and after["reserved_bytes"] == during["reserved_bytes"] - got
                assert after["cached_bytes"] == during["cached_bytes"] - got
            m.close()
            assert {k: dev.memory_stats()[k] for k in keys} == {k: base[k] for k in keys}
    finally:
        dev.close()


def test_fragmentation_is_reported_from_the_free_blocks():
    dev = VirtualDevice(1 << 20)
    try:
        offs = [dev.memory.malloc(64 << 10) for _ in range(12)]
        for o in offs[::2]:
            dev.memory.free(o)
        s = dev.memory_stats()
        free = (1 << 20) - 6 * (64 << 10)
        assert s["free_bytes"] == free and s["largest_free_block_bytes"] == (1 << 20) - 12 * (64 << 10)
        assert s["fragmentation"] == pytest.approx(1 - s["largest_free_block_bytes"] / free, abs=1e-4)
        assert 0 < s["fragmentation"] < 1
    finally:
        dev.close()


def test_pool_options_initial_size_growth_and_no_reuse():
    from aircc.executor.device.caching_allocator import PoolOptions

    dev = VirtualDevice(64 << 20, pool=PoolOptions(initial_bytes=4 << 20, growth_bytes=1 << 20,
                                                   reuse=False))
    try:
        pool = dev.caching_allocator
        assert dev.memory_stats()["reserved_bytes"] >= 4 << 20
        s = dev.create_stream()
        blocks = [pool.malloc(100 << 10, s) for _ in range(3)]
        for b in blocks:
            pool.free(b)
        s.synchronize(5)
        again = pool.malloc(100 << 10, s)
        st = pool.stats()
        assert st["cache_hits"] == 0          # reuse off: a freed block is never handed out
        assert st["segment_releases"] >= 3    # its segment went back to device memory
        pool.free(again)
    finally:
        dev.close()
    with pytest.raises(DeviceError, match="growth_bytes must be a positive multiple of 512"):
        PoolOptions(growth_bytes=1000)


# ---------------------------------------------------------------- several devices
@pytest.fixture(scope="module")
def mlp_builds():
    return {"static": aircc.compile(f"{SAMPLES}/mlp.onnx", input_shapes={"input": [2, 784]}).om,
            "dynamic": aircc.compile(f"{SAMPLES}/mlp.onnx").om}


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_batch_split_across_two_devices_gives_what_one_device_gives(four_devices, mlp_builds, mode):
    om = mlp_builds[mode]
    x = np.random.default_rng(1).standard_normal((10, 784)).astype(np.float32)
    one = aircc.load(om, device=four_devices.get(0))
    if mode == "static":
        want = np.concatenate([one.run({"input": x[i:i + 2]})["probs"] for i in range(0, 10, 2)])
    else:
        want = one.run({"input": x})["probs"]
    one.close()
    with aircc.load(om, devices=four_devices.devices) as m:
        got = m.run({"input": x})["probs"]
        assert [(d, n) for d, _, n in m.last_parts] == [(0, 6 if mode == "static" else 5),
                                                        (1, 4 if mode == "static" else 5)]
        stats = m.run_stats()
        assert [(p["device"], p["rows"]) for p in stats.parts] == [(d, n) for d, _, n in m.last_parts]
        assert len(stats.models) == len(stats.devices) and all(s.runs >= 1 for s in stats.models)
    np.testing.assert_array_equal(got, want)


def test_a_model_on_two_devices_shares_no_memory(four_devices, mlp_builds):
    x = np.random.default_rng(2).standard_normal((4, 784)).astype(np.float32)
    with aircc.load(mlp_builds["static"], devices=four_devices.devices) as m:
        want = m.run({"input": x})["probs"]
        a, b = m.models
        assert a.device is not b.device and a.engine.prepared is not b.engine.prepared
        b.device.memory.data[b.engine.weights_base:b.engine.weights_base + 4096] = 0
        b.engine.prepared.refill()       # what is derived from the weights (packed copies) too
        np.testing.assert_array_equal(a.run({"input": x[:2]})["probs"], want[:2])
        assert not np.array_equal(b.run({"input": x[2:]})["probs"], want[2:])


def test_a_model_split_across_devices_refuses_device_outputs_and_runs_on(four_devices,
                                                                          mlp_builds):
    x = np.random.default_rng(2).standard_normal((4, 784)).astype(np.float32)
    with aircc.load(mlp_builds["static"], devices=four_devices.devices) as m:
        with pytest.raises(InputError, match="split across devices .* load it on one device"):
            m.run({"input": x}, device_outputs=True)
        assert m.run({"input": x})["probs"].shape == (4, 10)


def test_a_device_faulted_mid_run_fails_over_and_the_run_completes(four_devices, mlp_builds):
    x = np.random.default_rng(3).standard_normal((8, 784)).astype(np.float32)
    policy = aircc.RecoveryPolicy(device_lost="failover")
    with aircc.load(mlp_builds["dynamic"], devices=four_devices.devices, recovery=policy) as m:
        want = m.run({"input": x})["probs"]
        faults.inject("device_lost", device=1)          # device 1 dies inside its part
        got = m.run({"input": x})["probs"]
        np.testing.assert_array_equal(got, want)
        assert four_devices.get(1).state is DeviceState.FAULT
        assert any("failed over from device 1 to device 0" in r["action"] for r in m.recoveries)
        four_devices.get(1).reset()


def test_a_device_faulted_from_outside_mid_run_fails_over_through_its_callback(four_devices, mlp_builds):
    x = np.random.default_rng(4).standard_normal((8, 784)).astype(np.float32)
    policy = aircc.RecoveryPolicy(device_lost="failover")
    with aircc.load(mlp_builds["static"], devices=four_devices.devices, recovery=policy) as m:
        want = m.run({"input": x})["probs"]
        hang = faults.inject("hang", device=1, seconds=30)
        dev1 = four_devices.get(1)

        def fault_when_hung():
            while not hang.fired:
                time.sleep(0.002)
            dev1.inject_fault("lost power")
        t = threading.Thread(target=fault_when_hung)
        t.start()
        got = m.run({"input": x})["probs"]
        t.join(10)
        np.testing.assert_array_equal(got, want)
        assert m.models[1].device is four_devices.get(0)
        assert "faulted during the run (lost power)" in m.recoveries[0]["message"]
        faults.clear()
        dev1.reset()


def test_airrun_splits_a_batch_across_devices(tmp_path, mlp_builds):
    cfg = tmp_path / "devices.json"
    cfg.write_text(json.dumps({"devices": [{"id": 0, "memory": "64M"}, {"id": 1, "memory": "64M"}]}))
    om = tmp_path / "mlp.om"
    save_om(mlp_builds["dynamic"], om)
    x = np.random.default_rng(5).standard_normal((6, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    env = {**os.environ, "AIR_DEVICE_CONFIG": str(cfg)}
    outs = {}
    for flag in (["--device", "1"], ["--devices", "0,1"]):
        out = tmp_path / f"out{flag[0]}.npz"
        r = subprocess.run([*AIRRUN, str(om), "--input",
                            str(tmp_path / "x.npy"), "-o", str(out), "--quiet", "--stats", *flag],
                           capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr
        assert "device memory" in r.stdout and "fragmentation" in r.stdout
        outs[flag[0]] = np.load(out)["probs"]
    assert "on devices 0,1" in r.stderr
    np.testing.assert_array_equal(outs["--device"], outs["--devices"])


def test_compile_stream_priority_on_the_command_line(tmp_path):
    from click.testing import CliRunner

    from aircc.cli.aircc_cmd import main as aircc_main
    from aircc.formats import load_om

    src = tmp_path / "diamond.onnx"
    src.write_bytes(diamond().SerializeToString())
    out = tmp_path / "d.om"
    r = CliRunner().invoke(aircc_main, ["compile", str(src), "-o", str(out), "--mode", "static",
                                        "--min-branch-bytes", "0", "--split-matrix-branches",
                                        "--stream-priority", "1=4"])
    assert r.exit_code == 0, r.output
    assert load_om(out).parsed().static_plans()[0].tasks.priorities[1] == 4
    r = CliRunner().invoke(aircc_main, ["compile", str(src), "-o", str(out), "--stream-priority", "one"])
    assert r.exit_code == 2 and "'one' is not STREAM=P" in r.output

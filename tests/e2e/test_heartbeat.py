"""Fault detection: a heartbeat on each device's control processor puts a device that
stops answering in FAULT, so that the run in flight on it fails over; a reset brings it
back; the scheduler thread ends with ``disable_fault_detection`` and ``close``; the
environment variable and airrun's option."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import onnxruntime as ort
import pytest

import aircc
from aircc import config, faults
from aircc.errors import ConfigError, DeviceError, RunTimeoutError
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.discovery import discover
from aircc.executor.device.health import DeviceState
from aircc.executor.device.heartbeat import hang_control
from aircc.formats import save_om
from testdata import SAMPLES

pytestmark = pytest.mark.usefixtures("no_faults_left")

INTERVAL = 0.1
#: Slack on a busy two-core machine for what should happen at a tick.
MARGIN = 1.5
AIRRUN = [sys.executable, "-c", "from aircc.cli.airrun_cmd import main; main()"]


def wait_for(check, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def heartbeat_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.endswith("-heartbeat")]


@pytest.fixture
def two_devices():
    a = VirtualDevice(64 << 20, device_id=0, name="hb-a")
    b = VirtualDevice(64 << 20, device_id=1, name="hb-b")
    yield a, b
    faults.clear()
    a.close()
    b.close()


@pytest.fixture(scope="module")
def mlp():
    """The MLP sample, static and dynamic, an input and onnxruntime's output."""
    x = np.random.default_rng(7).standard_normal((2, 784)).astype(np.float32)
    sess = ort.InferenceSession(f"{SAMPLES}/mlp.onnx", providers=["CPUExecutionProvider"])
    want = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    return {"static": aircc.compile(f"{SAMPLES}/mlp.onnx", input_shapes={"input": [2, 784]}).om,
            "dynamic": aircc.compile(f"{SAMPLES}/mlp.onnx").om, "x": x, "want": want}


@pytest.mark.parametrize("mode,replay", [("static", True), ("dynamic", True), ("dynamic", False)],
                         ids=["static", "dynamic-replayed", "dynamic-host-kernels"])
def test_a_device_that_stops_answering_mid_run_faults_and_the_run_completes_on_the_other(
        two_devices, mlp, mode, replay):
    a, b = two_devices
    changes = []
    a.on_state_change(lambda dev, old, new, reason: changes.append((old, new, time.monotonic())))
    beat = a.enable_fault_detection(interval=INTERVAL)
    assert beat.misses == 3
    policy = aircc.RecoveryPolicy(device_lost="failover", failover_devices=(b,))
    with aircc.load(mlp[mode], device=a, recovery=policy, timeout=60, replay=replay) as m:
        np.testing.assert_allclose(m.run({"input": mlp["x"]})["probs"], mlp["want"],
                                   rtol=1e-4, atol=1e-6)
        assert wait_for(lambda: beat.answered >= 1)     # it answered while it could
        silent = faults.inject("unresponsive", device=0, seconds=60)
        t0 = time.monotonic()
        got = m.run({"input": mlp["x"]})["probs"]       # stops answering in its first kernel
        assert silent.fired == 1 and time.monotonic() - t0 < 4 * INTERVAL + 2 * MARGIN
        np.testing.assert_allclose(got, mlp["want"], rtol=1e-4, atol=1e-6)
        assert m.device is b
        assert "failed over from device 0 to device 1" in m.recoveries[0]["action"]
        assert "missed 3 heartbeats in a row" in m.recoveries[0]["message"]
        faulted = changes[0][2] - t0      # 3 beats missed: 3 to 4 intervals after it went silent,
        # or after the beat before, when the control processor had not answered it yet (busy)
        assert 2 * INTERVAL - 0.02 <= faulted <= 4 * INTERVAL + MARGIN, faulted
        assert a.state is DeviceState.FAULT and a.faults[0].kind == "heartbeat"
        time.sleep(3 * INTERVAL)
        assert [c[:2] for c in changes] == [(DeviceState.HEALTHY, DeviceState.FAULT)]   # once
        assert beat.faults == 1 and not beat.answering

        faults.clear()                                    # the device answers again ...
        assert wait_for(lambda: beat.answering and beat.sent >= 3)
        assert a.state is DeviceState.FAULT               # ... and stays FAULT until reset
        a.reset()
        sent = beat.sent
        time.sleep(5 * INTERVAL)
        # answering: the last beat sent was answered (a beat just sent waits for its turn)
        assert beat.running and wait_for(lambda: beat.sent >= sent + 2 and beat.answering)
        assert a.state is DeviceState.HEALTHY and beat.faults == 1
        assert [c[:2] for c in changes] == [(DeviceState.HEALTHY, DeviceState.FAULT),
                                            (DeviceState.FAULT, DeviceState.HEALTHY)]
    with aircc.load(mlp[mode], device=a) as again:        # serves work again
        np.testing.assert_allclose(again.run({"input": mlp["x"]})["probs"], mlp["want"],
                                   rtol=1e-4, atol=1e-6)


def test_a_device_reset_while_still_silent_faults_again(two_devices):
    a, _ = two_devices
    beat = a.enable_fault_detection(interval=0.05, misses=2)
    release = hang_control(a, 60)
    assert wait_for(lambda: a.state is DeviceState.FAULT)
    a.reset()
    assert a.state is DeviceState.HEALTHY
    t0 = time.monotonic()
    assert wait_for(lambda: a.state is DeviceState.FAULT)
    assert 1 * 0.05 - 0.02 <= time.monotonic() - t0 <= 2 * 0.05 + MARGIN   # misses - 1 to misses
    assert beat.faults == 2 and [f.kind for f in a.faults] == ["heartbeat", "reset", "heartbeat"]
    release.set()
    assert wait_for(lambda: beat.answering and beat.answered >= 2)
    a.reset()
    time.sleep(4 * 0.05)
    assert a.state is DeviceState.HEALTHY and beat.faults == 2


@pytest.mark.parametrize("kind", ["hang", "unresponsive"])
def test_clear_lets_a_fault_that_fired_all_its_times_return(kind):
    """``faults.clear()`` ends a hang in progress even once its fault is no longer armed."""
    fault = faults.inject(kind, seconds=60)
    assert faults.fire(fault) and fault not in faults.armed()
    faults.clear()
    assert fault.released.is_set()


def test_a_stuck_kernel_is_not_a_silent_device(two_devices, mlp):
    """A hung kernel holds its stream, not the control processor: the run's deadline ends
    it and the device stays healthy."""
    a, _ = two_devices
    beat = a.enable_fault_detection(interval=0.05)
    with aircc.load(mlp["static"], device=a, timeout=0.6) as m:
        faults.inject("hang", device=0, seconds=30)
        with pytest.raises(RunTimeoutError):
            m.run({"input": mlp["x"]})
        assert beat.sent >= 5 and beat.faults == 0 and a.usable
        faults.clear()
        np.testing.assert_allclose(m.run({"input": mlp["x"]})["probs"], mlp["want"],
                                   rtol=1e-4, atol=1e-6)


def test_disable_and_close_stop_the_scheduler_thread():
    dev = VirtualDevice(16 << 20, name="hb-threads")
    start = threading.active_count()
    for _ in range(5):
        beat = dev.enable_fault_detection(interval=0.05)
        assert dev.enable_fault_detection(interval=0.06, misses=4) is beat   # reconfigured
        assert (beat.interval, beat.misses) == (0.06, 4)
        assert heartbeat_threads() == ["hb-threads-heartbeat"]
        assert wait_for(lambda: beat.answered >= 2)
        dev.disable_fault_detection()
        assert not beat.running and heartbeat_threads() == [] and dev.fault_detection is None
    # the control processor's worker parks once the beats stop: back to where it began
    assert wait_for(lambda: threading.active_count() <= start, 5.0), \
        [t.name for t in threading.enumerate()]
    beat = dev.enable_fault_detection(interval=0.05)
    dev.close()
    assert not beat.running and heartbeat_threads() == []
    with pytest.raises(DeviceError, match="closed"):
        dev.enable_fault_detection()


@pytest.mark.parametrize("interval,misses", [(0, 3), (0.01, 3), (-1, 3), (float("nan"), 3),
                                             ("100", 3), (True, 3), (0.1, 0), (0.1, 2.5)])
def test_bad_values_are_config_errors(interval, misses):
    dev = VirtualDevice(16 << 20)
    try:
        with pytest.raises(ConfigError, match="interval|misses"):
            dev.enable_fault_detection(interval=interval, misses=misses)
        assert dev.fault_detection is None and heartbeat_threads() == []
    finally:
        dev.close()


@pytest.fixture
def environment(monkeypatch):
    yield monkeypatch
    monkeypatch.undo()
    config.reload()


@pytest.mark.parametrize("value,seconds", [("100", 0.1), (" 250.5 ", 0.2505), ("0", None),
                                           ("off", None)])
def test_the_environment_variable_sets_every_discovered_devices_heartbeat(environment, value,
                                                                          seconds):
    environment.setenv("AIR_FAULT_DETECTION_MS", value)
    assert config.reload().fault_detection == seconds
    reg = discover({"devices": [{"id": 0, "memory": "16M"}, {"id": 1, "memory": "16M"}]})
    try:
        for dev in reg.devices:
            beat = dev.fault_detection
            if seconds is None:
                assert beat is None
            else:
                assert beat.running and beat.interval == seconds
    finally:
        reg.close()
    assert heartbeat_threads() == []


@pytest.mark.parametrize("value", ["10", "abc", "-100", "nan", "inf", "4000000", "100ms"])
def test_a_bad_environment_variable_is_a_config_error_naming_it(environment, value):
    environment.setenv("AIR_FAULT_DETECTION_MS", value)
    with pytest.raises(ConfigError, match="AIR_FAULT_DETECTION_MS=.*milliseconds from 50 to"):
        config.reload()


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory, mlp):
    d = tmp_path_factory.mktemp("heartbeat_cli")
    save_om(mlp["static"], d / "mlp.om")
    np.save(d / "x.npy", mlp["x"])
    (d / "devices.json").write_text(json.dumps(
        {"devices": [{"id": 0, "memory": "64M"}, {"id": 1, "memory": "64M"}]}))
    return d


def airrun(files, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("AIRCC_FAULTS", "AIR_FAULT_DETECTION_MS")}
    environ.update(AIR_DEVICE_CONFIG=str(files / "devices.json"), **env)
    return subprocess.run([*AIRRUN, str(files / "mlp.om"), "--input", str(files / "x.npy"),
                           "-o", str(files / "out.npz"), "--quiet", *args],
                          capture_output=True, text=True, timeout=120, env=environ)


def test_airrun_fails_over_from_a_device_that_stops_answering(cli_files, mlp):
    r = airrun(cli_files, "--fault-detection", "50", "--recovery", "device_lost=failover",
               "--timeout", "60", "--repeat", "3", "--log", "warning",
               AIRCC_FAULTS="unresponsive@run=2,seconds=5,device=0")
    assert r.returncode == 0, r.stderr
    assert "missed 3 heartbeats in a row (50 ms apart)" in r.stderr
    assert "failed over from device 0 to device 1" in r.stderr
    np.testing.assert_allclose(np.load(cli_files / "out.npz")["probs"], mlp["want"],
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("args,env,words", [
    (["--fault-detection", "20"], {}, "--fault-detection='20': expected a heartbeat interval"),
    (["--fault-detection", "fast"], {}, "--fault-detection='fast': expected a heartbeat"),
    ([], {"AIR_FAULT_DETECTION_MS": "-1"}, "AIR_FAULT_DETECTION_MS='-1': expected a heartbeat"),
    (["--dataset", "DIR", "--output-dir", "DIR", "--fault-detection", "100"], {},
     "a dataset job's actors read $AIR_FAULT_DETECTION_MS"),
])
def test_airrun_refuses_a_bad_interval(cli_files, args, env, words):
    args = [str(cli_files) if a == "DIR" else a for a in args]
    r = airrun(cli_files, *args, **env)
    assert r.returncode == 2 and r.stderr.startswith("error: [") and words in r.stderr, r.stderr


def test_airrun_off_overrides_the_environment(cli_files, mlp):
    """``--fault-detection 0`` turns off what the environment turned on (and a silent
    device is then only caught by the run's deadline)."""
    r = airrun(cli_files, "--fault-detection", "off", "--timeout", "0.8",
               AIR_FAULT_DETECTION_MS="50", AIRCC_FAULTS="unresponsive@run=1,seconds=5")
    assert r.returncode == 5 and "passed its deadline of 0.8 s" in r.stderr, r.stderr

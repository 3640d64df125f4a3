"""A runtime that a hung kernel, an injected fault or a careless caller cannot crash, hang
or turn against another model: deadlines and the watchdog, fault injection and recovery
policies, the lifecycle of a loaded model, and several threads on one device.

Every fault test checks the same three things: the error names what went wrong, the
next run is right, and the device is back where it was (memory, cached blocks, threads).
"""
from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest

import aircc
from aircc import faults
from aircc.errors import (DeviceLostError, DeviceOutOfMemoryError, KernelError,
                          ModelClosedError, ModelFormatError, RunTimeoutError)
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.stream import Stream
from graphs import diamond
from testdata import SAMPLES

X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
#: Builds: static (three streams, events), dynamic with replays, dynamic without.
MODES = {"static": ("static", {}), "dynamic": ("dynamic", {}),
         "dynamic-no-replay": ("dynamic", {"replay": False})}


@pytest.fixture(scope="module")
def builds():
    return {mode: aircc.compile(diamond(), mode=mode, min_branch_bytes=0,
                                 split_matrix_branches=True).om
            for mode in ("static", "dynamic")}


def any_batch(proto):
    """``proto`` with its input's and output's first dim symbolic (``N``)."""
    for vi in (*proto.graph.input, *proto.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    return proto


pytestmark = pytest.mark.usefixtures("no_faults_left")


@pytest.fixture
def dev():
    d = VirtualDevice(256 << 20)
    yield d
    d.close()


def load(builds, mode: str, dev, **kw):
    built, options = MODES[mode]
    return aircc.load(builds[built], device=dev, **options, **kw)


def footprint(dev) -> tuple:
    """What must come back after a fault: device memory in use, the device's live streams
    and the process's threads that are no device's stream workers (a worker comes and
    goes with its stream's work: an idle one parks; devices of other tests have theirs; a
    stuck one is the quarantine's, which ``settled`` waits for).  Cached memory may grow:
    a block the failed run freed, whose events had not run yet when the next run asked,
    stays cached and the allocator takes a new segment (it never waits on another
    stream); ``release_cached`` gives every cached byte back (:func:`cached_returns`)."""
    others = [t for t in threading.enumerate() if not re.match(r"dev\d+-", t.name)]
    streams = [s for s in [*dev.streams, dev.control] if s.alive]
    return dev.memory.allocated, len(others), len(streams)


def cached_returns(dev) -> None:
    """Every cached byte goes back to device memory on demand."""
    dev.release_cached()
    assert dev.memory.cached == 0


def settled(dev, timeout: float = 10.0) -> None:
    """Wait until every stuck kernel has returned and its streams have ended."""
    assert dev.settle(timeout), "a quarantine did not end"
    end = time.monotonic() + timeout
    while any(t.name.startswith(f"dev{dev.id}") and not t.is_alive() for t in threading.enumerate()) \
            and time.monotonic() < end:
        time.sleep(0.01)


# ---------------------------------------------------------------- deadlines
@pytest.mark.parametrize("mode", MODES)
def test_a_hung_kernel_times_out_naming_stream_and_task_and_the_next_run_is_right(builds, dev, mode):
    m = load(builds, mode, dev)
    want = m.run({"x": X})["y"]
    before = footprint(dev)
    faults.inject("hang", node="mul1", seconds=1.0)
    t0 = time.monotonic()
    with pytest.raises(RunTimeoutError, match=r"deadline of 0.3 s in stream 1, .*node 'mul1/chain'") as e:
        m.run({"x": X}, timeout=0.3)
    assert time.monotonic() - t0 < 0.9            # the deadline, not the kernel's own 1 s
    assert e.value.stream == 1 and "mul1/chain" in e.value.task
    assert dev.faults[-1].kind == "timeout" and dev.state.value == "healthy"
    assert dev.stats["streams_replaced"] >= 1
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)    # while the kernel still hangs
    assert dev.quarantined_bytes > 0 or mode == "dynamic-no-replay"
    settled(dev)
    m.run({"x": X})
    assert footprint(dev) == before
    m.close()


def test_a_run_past_its_deadline_on_a_slow_loop_is_cancelled_between_tasks(dev):
    """A deadline shorter than the run, with no kernel stuck: cancelled at a task boundary,
    nothing quarantined, no stream replaced."""
    from graphs import loop_if_model

    om = aircc.compile(loop_if_model(), mode="static").om
    m = aircc.load(om, device=dev)
    feeds = {"M": np.array(3, np.int64), "x": np.ones((2, 8), np.float32)}
    want = m.run(feeds)["y"]
    faults.inject("hang", seconds=0.1, times=0)      # every kernel takes 0.1 s
    with pytest.raises(RunTimeoutError, match="deadline of 0.25 s"):
        m.run(feeds, timeout=0.25)
    faults.clear()
    assert dev.stats["streams_replaced"] == 0 and dev.quarantined_bytes == 0
    np.testing.assert_array_equal(m.run(feeds)["y"], want)
    m.close()


def test_the_deadline_comes_from_run_then_load_then_the_environment(builds, dev, aircc_env):
    aircc_env("AIRCC_RUN_TIMEOUT", "0.2")
    m = load(builds, "static", dev)
    faults.inject("hang", node="mul1", seconds=0.6, times=0)
    with pytest.raises(RunTimeoutError, match="deadline of 0.2 s"):
        m.run({"x": X})
    m.timeout = 0.3
    with pytest.raises(RunTimeoutError, match="deadline of 0.3 s"):
        m.run({"x": X})
    with pytest.raises(RunTimeoutError, match="deadline of 0.25 s"):
        m.run({"x": X}, timeout=0.25)
    faults.clear()
    m.close()
    settled(dev)


# ---------------------------------------------------------------- injected faults
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["kernel_error", "oom", "device_lost"])
def test_an_injected_fault_fails_the_run_clearly_and_the_next_run_is_right(builds, dev, mode, kind):
    m = load(builds, mode, dev, recovery=aircc.RecoveryPolicy(out_of_memory="fail",
                                                               device_lost="fail"))
    want = m.run({"x": X})["y"]
    before = footprint(dev)
    fault = faults.inject(kind, node="mul1")
    error = {"kernel_error": KernelError, "oom": DeviceOutOfMemoryError,
             "device_lost": DeviceLostError}[kind]
    with pytest.raises(error, match="mul1/chain"):
        m.run({"x": X})
    assert fault.fired == 1
    if kind == "device_lost":
        with pytest.raises(DeviceLostError, match="reset it"):   # until someone resets it
            m.run({"x": X})
        dev.reset()
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)
    settled(dev)
    assert footprint(dev) == before
    cached_returns(dev)
    m.close()


@pytest.mark.parametrize("mode", MODES)
def test_the_default_policy_releases_memory_on_oom_and_resets_a_lost_device(builds, dev, mode):
    m = load(builds, mode, dev)
    want = m.run({"x": X})["y"]
    before = footprint(dev)
    faults.inject("oom", node="mul2")
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)
    faults.inject("device_lost", node="stem")
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)
    assert [r["error"] for r in m.recoveries] == ["DeviceOutOfMemoryError", "DeviceLostError"]
    assert m.recoveries[0]["action"].startswith("released")
    assert m.recoveries[1]["action"].startswith("reset device")
    assert dev.stats["resets"] == 1 and [f.kind for f in dev.faults] == ["lost", "reset"]
    m.run({"x": X})
    assert footprint(dev) == before
    m.close()


def test_retries_and_a_longer_deadline_recover_a_run(builds, dev):
    m = load(builds, "static", dev, recovery=aircc.RecoveryPolicy(retries=1, timeout_retries=1,
                                                                  timeout_factor=3))
    want = m.run({"x": X})["y"]
    faults.inject("kernel_error", node="sum")
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)
    faults.inject("kernel_error", node="sum", times=2)           # more than the policy allows
    with pytest.raises(KernelError):
        m.run({"x": X})
    faults.inject("hang", node="mul0", seconds=0.5)
    np.testing.assert_array_equal(m.run({"x": X}, timeout=0.2)["y"], want)
    assert [r["action"] for r in m.recoveries] == [
        "ran again", "ran again", "ran again with a deadline of 0.6 s"]
    m.close()
    settled(dev)


def test_a_lost_device_fails_over_to_another(builds, dev):
    spare = VirtualDevice(256 << 20, device_id=1)
    m = load(builds, "static", dev, recovery=aircc.RecoveryPolicy(
        device_lost="failover", failover_devices=(spare,)))
    want = m.run({"x": X})["y"]
    faults.inject("device_lost", node="sum")
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)
    assert m.device is spare and "failed over from device 0 to device 1" in m.recoveries[0]["action"]
    assert dev.memory.used == 0 and dev.state.value == "fault"
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)
    m.close()
    assert spare.memory.used == 0
    spare.close()


def test_faults_and_the_policy_from_the_environment(builds, dev, aircc_env):
    aircc_env("AIRCC_FAULTS", "kernel_error@node=mul1,run=2")
    aircc_env("AIRCC_RECOVERY", "retries=0,out_of_memory=fail")
    faults.load_environment()
    m = load(builds, "dynamic", dev)
    assert m.recovery.out_of_memory == "fail"
    m.run({"x": X})                                   # run 1: not this one
    with pytest.raises(KernelError, match="injected kernel error in node 'mul1/chain'"):
        m.run({"x": X})
    m.run({"x": X})                                   # it fired its one time
    m.close()
    with pytest.raises(aircc.errors.ConfigError, match="unknown fault kind 'melt'"):
        aircc_env("AIRCC_FAULTS", "melt@node=x")
    with pytest.raises(aircc.errors.ConfigError, match="retries='x'"):
        aircc_env("AIRCC_FAULTS", "")
        aircc_env("AIRCC_RECOVERY", "retries=x")
        load(builds, "static", dev)


def test_a_stream_worker_survives_a_task_that_raises():
    s = Stream(0)
    ran = []
    s.submit(lambda: 1 / 0)
    s.submit(lambda: ran.append(1))
    s.synchronize(5)
    assert ran == [1] and isinstance(s.faults[0], ZeroDivisionError) and s.alive
    assert s.close()


# ---------------------------------------------------------------- lifecycle
@pytest.mark.parametrize("mode", MODES)
def test_run_after_close_raises_at_once(builds, dev, mode):
    m = load(builds, mode, dev)
    m.run({"x": X})
    m.close()
    t0 = time.monotonic()
    with pytest.raises(ModelClosedError, match="is closed"):
        m.run({"x": X}, timeout=30)
    assert time.monotonic() - t0 < 0.1
    assert dev.memory.used == 0
    m.close()                                         # twice is fine


@pytest.mark.parametrize("mode", MODES)
def test_close_during_a_slow_kernel_returns_in_its_bound_and_loses_nothing(builds, dev, mode):
    before = footprint(dev)
    m = load(builds, mode, dev)
    want = m.run({"x": X})["y"]
    faults.inject("hang", node="mul1", seconds=2.0)
    outcome = []

    def run():
        try:
            m.run({"x": X})
            outcome.append("finished")
        except ModelClosedError as e:
            outcome.append(e)
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    m.close(timeout=0.3)
    assert time.monotonic() - t0 < 1.5
    t.join(2)
    assert isinstance(outcome[0], ModelClosedError) and "closed during the run" in str(outcome[0])
    other = load(builds, mode, dev)                   # the hung kernel still holds its memory
    assert dev.quarantined_bytes > 0 or mode == "dynamic-no-replay"
    np.testing.assert_array_equal(other.run({"x": X})["y"], want)
    other.close()
    settled(dev)
    assert dev.memory.used == 0 and footprint(dev) == before


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_failed_load_leaves_nothing_behind(builds, mode):
    small = VirtualDevice(64)
    before = footprint(small)
    with pytest.raises(DeviceOutOfMemoryError):
        load(builds, mode, small)
    assert small.memory.used == 0 and footprint(small) == before
    small.close()
    dev = VirtualDevice(64 << 20)
    before = footprint(dev)
    om = builds[mode]
    contract = om.parsed()
    bad = aircc.formats.OmFile(om.mode, om.sections, om.weights)
    bad.contract = contract.__class__(**vars(contract))
    if mode == "static":                              # a kernel whose op this runtime lacks
        task = next(t for tl in contract.tasks.lists for t in tl if t.kind.value == "kernel")
        bad.contract.tasks = type(contract.tasks)(contract.tasks.streams, contract.tasks.events,
                                                  [list(tl) for tl in contract.tasks.lists],
                                                  contract.tasks.count)
        old_op = task.op
        task.op = "NoSuchOp"
        try:
            with pytest.raises(aircc.UnsupportedOpError, match="NoSuchOp"):
                aircc.load(bad, device=dev)
        finally:
            task.op = old_op
    else:
        with pytest.raises(aircc.errors.ConfigError):
            aircc.load(om, device=dev, runtime_core_number=2)
    assert dev.memory.used == 0 and footprint(dev) == before
    dev.close()


def test_overwriting_or_deleting_the_om_after_load_changes_nothing(builds, dev, tmp_path):
    for mode in ("static", "dynamic"):
        path = tmp_path / f"{mode}.om"
        path.write_bytes(aircc.formats.dump_om(builds[mode]))
        m = aircc.load(str(path), device=dev)
        want = m.run({"x": X})["y"]
        path.write_bytes(b"\xff" * path.stat().st_size)     # in place, same size
        np.testing.assert_array_equal(m.run({"x": X})["y"], want)
        path.write_bytes(b"")
        path.unlink()
        np.testing.assert_array_equal(m.run({"x": X + 0})["y"], want)
        m.close()


# ---------------------------------------------------------------- isolation
def test_a_forged_file_cannot_reach_another_models_memory(dev):
    """Two models on one device: a forged .om (valid checksums) whose copy or kernel points
    past its own arena, where the other model's weights lie, is refused at load; the
    other model's weights and outputs are untouched."""
    from test_om_contract import forge

    om = aircc.compile(f"{SAMPLES}/mlp.onnx", input_shapes={"input": [4, 784]}).om
    victim = aircc.load(om, device=dev)
    x = np.load(f"{SAMPLES}/mlp_input.npy")
    want = victim.run({"input": x})["probs"]
    weights = dev.memory.data[victim.engine.weights_base:victim.engine.weights_base + victim.engine.plan.weights_bytes].copy()
    arena = om.sections["memory_plan"]["arena_bytes"]
    tasks = om.sections["tasks"]["lists"]
    d2h = next((s, i) for s, tl in enumerate(tasks) for i, t in enumerate(tl) if t["kind"] == "memcpy_d2h")
    kern = next((s, i) for s, tl in enumerate(tasks) for i, t in enumerate(tl) if t["kind"] == "kernel")
    for (s, i), field, offset in ((d2h, "src", arena), (kern, "outputs", arena),
                                  (kern, "outputs", -64), (d2h, "src", 2 ** 40)):
        import copy
        sections = copy.deepcopy(om.sections)
        target = sections["tasks"]["lists"][s][i][field]
        (target[0] if isinstance(target, list) else target)["offset"] = offset
        forged = forge(aircc.formats.OmFile(om.mode, sections, om.weights))
        with pytest.raises(ModelFormatError, match=rf"section 'tasks': lists\[{s}\]\[{i}\]\.{field}"):
            aircc.load(forged, device=dev)
    np.testing.assert_array_equal(dev.memory.data[victim.engine.weights_base:victim.engine.weights_base
                                                  + victim.engine.plan.weights_bytes], weights)
    np.testing.assert_array_equal(victim.run({"input": x})["probs"], want)
    victim.close()


def test_operands_are_checked_against_the_models_own_regions_when_bound(builds, dev):
    """Past the reader (a contract changed in memory), binding still refuses an operand
    outside the model's arena."""
    om = builds["static"]
    bad = aircc.formats.OmFile(om.mode, om.sections, om.weights)
    import copy
    bad.contract = copy.deepcopy(om.parsed())
    copy_task = next(t for tl in bad.contract.tasks.lists for t in tl if t.kind.value == "memcpy_d2h")
    copy_task.operand.offset = bad.contract.memory_plan.arena_bytes
    with pytest.raises(ModelFormatError, match="lies outside the model's arena"):
        aircc.load(bad, device=dev)
    assert dev.memory.used == 0


def test_a_wait_nobody_records_or_a_loop_that_never_ends_is_refused_at_load(builds):
    """Files that would hang a run forever are refused before anything runs."""
    from test_om_contract import refused

    om = builds["static"]
    lists = om.sections["tasks"]["lists"]
    w = next((s, i) for s, tl in enumerate(lists) for i, t in enumerate(tl) if t["kind"] == "event_wait")
    r = next((s, i) for s, tl in enumerate(lists) for i, t in enumerate(tl)
             if t["kind"] == "event_record" and t["event"] == lists[w[0]][w[1]]["event"])

    def circular(sec):          # the record moves behind a wait on its own event
        tl = sec["tasks"]["lists"]
        rec = tl[r[0]].pop(r[1])
        tl[r[0]].append(rec)
        waits = next(t for t in tl[r[0]] if t["kind"] == "event_wait")
        tl[w[0]][w[1]]["event"], waits["event"] = waits["event"], tl[w[0]][w[1]]["event"]
    refused(om, circular, "wait for each other")

    def self_goto(sec):
        tl = sec["tasks"]["lists"][0]
        n = sec["tasks"]["count"]
        tl.insert(1, {"kind": "label", "id": n, "label": 7})
        tl.insert(2, {"kind": "goto", "id": n + 1, "label": 7})
        sec["tasks"]["count"] += 2
    refused(om, self_goto, "would loop forever")


# ---------------------------------------------------------------- concurrency
def test_many_threads_over_two_models_on_one_device_match_sequential_runs(builds, dev):
    mlp = aircc.load(aircc.compile(f"{SAMPLES}/mlp.onnx", input_shapes={"input": [4, 784]}).om,
                     device=dev)
    dyn = aircc.load(aircc.compile(any_batch(diamond()), mode="dynamic", min_branch_bytes=0,
                                    split_matrix_branches=True),
                     device=dev)
    rng = np.random.default_rng(0)
    feeds = [({"input": rng.standard_normal((4, 784)).astype(np.float32)},
              {"x": rng.standard_normal((2 + k % 3, 4)).astype(np.float32)}) for k in range(16)]
    want = [(mlp.run(a)["probs"], dyn.run(b)["y"]) for a, b in feeds]
    bad = []

    def worker(t: int) -> None:
        for i in range(200):
            k = (t * 7 + i) % len(feeds)
            model, which = (mlp, 0) if (t + i) % 2 else (dyn, 1)
            got = model.run(feeds[k][which])["probs" if which == 0 else "y"]
            if not np.array_equal(got, want[k][which]):
                bad.append((t, i, k))
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads) and not bad
    assert time.monotonic() - t0 < 120
    mlp.close()
    dyn.close()

"""Many requests at once: execution contexts over weights held once, run_async's queue,
cancellation and deadlines, the throughput hint's CPU groups."""
from __future__ import annotations

import concurrent.futures as cf
import random
import threading
import time

import numpy as np
import pytest

import aircc
from aircc.errors import ConfigError, ModelClosedError, RunTimeoutError
from aircc.executor.device.device import VirtualDevice
from aircc.executor.runtime.loader import cpu_groups
from testdata import SAMPLES

X = np.random.default_rng(0).standard_normal((8, 784)).astype(np.float32)


@pytest.fixture(scope="module")
def builds():
    """The MLP static at batch 4, dynamic, and with gears 1, 2, 4."""
    mlp = f"{SAMPLES}/mlp.onnx"
    return {"static": aircc.compile(mlp, mode="static", input_shapes={"input": [4, 784]}).om,
            "dynamic": aircc.compile(mlp, mode="dynamic").om,
            "gears": aircc.compile(mlp, dynamic_batch=[1, 2, 4]).om}


def settled(check, seconds: float = 10.0) -> bool:
    """``check()`` true now or within ``seconds`` (threads and quarantines end on their own)."""
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def test_contexts_hold_the_weights_once_and_an_arena_each(builds):
    dev = VirtualDevice(256 << 20)
    try:
        base = dev.memory_stats()["allocated_bytes"]
        with aircc.load(builds["static"], device=dev) as one:
            alone = dev.memory_stats()["allocated_bytes"] - base
            want = one.run({"input": X[:4]})["probs"]
            stats = one.run_stats()
        with aircc.load(builds["static"], device=dev, contexts=4) as four:
            held = dev.memory_stats()["allocated_bytes"] - base
            s = four.run_stats()
            assert four.contexts == s.contexts == 4
            assert held == stats.weights_bytes + 4 * stats.arena_bytes + stats.prepared_bytes
            assert alone == stats.weights_bytes + stats.arena_bytes + stats.prepared_bytes
            np.testing.assert_array_equal(four.run({"input": X[:4]})["probs"], want)
        assert dev.memory_stats()["allocated_bytes"] == base
    finally:
        dev.close()


def test_runs_from_more_threads_than_contexts_take_turns_and_agree(builds):
    with aircc.load(builds["dynamic"], contexts=3) as m:
        want = {b: m.run({"input": X[:b]})["probs"] for b in (1, 2, 3)}
        bad = []

        def worker(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(20):
                b = rng.choice((1, 2, 3))
                if not np.allclose(m.run({"input": X[:b]})["probs"], want[b], rtol=1e-6, atol=1e-7):
                    bad.append(b)
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not bad and m.run_stats().runs == 3 + 6 * 20


def test_the_throughput_hint_gives_each_context_its_own_cpus():
    dev = VirtualDevice(64 << 20, cpus=[0])
    try:
        assert cpu_groups(dev, "latency", None) == [None]
        assert cpu_groups(dev, "latency", 3) == [None] * 3
        assert cpu_groups(dev, "throughput", None) == [frozenset({0})]
        assert cpu_groups(dev, "throughput", 2) == [frozenset({0})] * 2   # more contexts than CPUs
        with pytest.raises(ConfigError, match="hint must be one of latency, throughput"):
            cpu_groups(dev, "fast", None)
        with pytest.raises(ConfigError, match="contexts must be a whole number"):
            cpu_groups(dev, "latency", 0)
    finally:
        dev.close()
    dev = VirtualDevice(64 << 20)
    try:
        groups = cpu_groups(dev, "throughput", None)
        cpus = set().union(*groups)
        assert sum(len(g) for g in groups) == len(cpus) and len(groups) == min(len(cpus), 4)
        # GEMMs take turns on one matrix engine per group of CPUs, not one per device
        cubes = [dev.cube_for(g) for g in groups]
        assert len({id(c) for c in cubes}) == len(groups) and dev.cube_for(None) is dev.cube
        assert all(dev.cube_for(set(g)) is c for g, c in zip(groups, cubes))
    finally:
        dev.close()


def test_run_async_gives_what_run_gives_and_calls_back_once(builds):
    with aircc.load(builds["static"], contexts=2) as m:
        want = m.run({"input": X[:4]})["probs"]
        calls = []
        futures = [m.run_async({"input": X[:4]}, callback=lambda out, err: calls.append((out, err)))
                   for _ in range(40)]
        for f in futures:
            np.testing.assert_array_equal(f.result(timeout=30)["probs"], want)
        assert settled(lambda: len(calls) == 40)
        assert all(err is None and np.array_equal(out["probs"], want) for out, err in calls)
        bad = m.run_async({"wrong": X[:4]})
        with pytest.raises(aircc.InputError, match="unknown input names"):
            bad.result(timeout=30)
        assert m.run({"input": X[:4]})["probs"].shape == (4, 10)       # and the next run works


def test_a_full_queue_holds_the_caller_back_and_close_fails_what_is_queued(builds):
    with aircc.load(builds["static"]) as m:
        m.max_in_flight = 1
        # the first request keeps its place until its callback returns, 0.3 s after it ran
        first = m.run_async({"input": X[:4]}, callback=lambda out, err: time.sleep(0.3))
        t0 = time.perf_counter()
        second = m.run_async({"input": X[:4]})          # waits for room
        assert time.perf_counter() - t0 >= 0.25 and first.done()
        second.result(timeout=30)
        with pytest.raises(ConfigError, match="max_in_flight must be a whole number >= 1"):
            m.max_in_flight = 0
        m.max_in_flight = 8
        queued = [m.run_async({"input": X[:4]}) for _ in range(8)]
        for f in queued[4:]:
            f.cancel()
    for f in queued:
        assert f.done()
        assert f.cancelled() or f.exception() is None or isinstance(f.exception(), ModelClosedError)
    with pytest.raises(ModelClosedError):
        m.run_async({"input": X[:4]}).result(timeout=5)


def test_a_request_past_its_deadline_in_the_queue_fails_naming_it(builds):
    with aircc.load(builds["static"]) as m:
        m.max_in_flight = 4
        block = threading.Event()
        held = m.run_async({"input": X[:4]}, callback=lambda out, err: block.wait(5))
        late = m.run_async({"input": X[:4]}, timeout=0.05)
        time.sleep(0.2)
        block.set()
        held.result(timeout=30)
        with pytest.raises(RunTimeoutError, match="deadline of 0.05 s"):
            late.result(timeout=30)


@pytest.mark.parametrize("mode", ["static", "dynamic", "gears"])
def test_a_storm_of_requests_resolves_each_once_and_leaves_nothing_behind(builds, mode):
    """8 threads and run_async, 2,000 randomised requests (random batches where the model
    takes them, cancellations, deadlines too short to meet): every future resolves exactly
    once, every result equals a sequential run's, and memory, threads and the device's
    compute units come back to where they were."""
    dev = VirtualDevice(256 << 20)
    threads_before = threading.active_count()
    batches = (4,) if mode == "static" else (1, 2, 4)
    try:
        memory_before = dev.memory_stats()["allocated_bytes"]
        m = aircc.load(builds[mode], device=dev, contexts=3)
        want = {b: m.run({"input": X[:b]})["probs"] for b in batches}
        m.max_in_flight = 6
        resolved: dict[int, int] = {}
        lock = threading.Lock()
        futures: list[tuple[int, cf.Future]] = []

        def count(k: int):
            def done(f: cf.Future) -> None:
                with lock:
                    resolved[k] = resolved.get(k, 0) + 1
            return done

        def client(seed: int) -> None:
            rng = random.Random(seed)
            for i in range(250):
                k, b = seed * 1000 + i, rng.choice(batches)
                short = rng.random() < 0.1
                f = m.run_async({"input": X[:b]}, timeout=1e-4 if short else None)
                f.add_done_callback(count(k))
                with lock:
                    futures.append((b, f))
                if rng.random() < 0.1:
                    f.cancel()
        clients = [threading.Thread(target=client, args=(s,)) for s in range(8)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        cf.wait([f for _, f in futures], timeout=120)
        assert len(futures) == 2000 and all(f.done() for _, f in futures)
        assert settled(lambda: len(resolved) == 2000) and set(resolved.values()) == {1}
        outcomes = {"ok": 0, "cancelled": 0, "timeout": 0}
        for b, f in futures:
            if f.cancelled():
                outcomes["cancelled"] += 1
            elif f.exception() is not None:
                assert isinstance(f.exception(), RunTimeoutError), f.exception()
                outcomes["timeout"] += 1
            else:
                np.testing.assert_array_equal(f.result()["probs"], want[b])
                outcomes["ok"] += 1
        assert outcomes["ok"] > 1000 and outcomes["cancelled"] + outcomes["timeout"] > 0
        np.testing.assert_array_equal(m.run({"input": X[:batches[-1]]})["probs"], want[batches[-1]])
        m.close()
        assert settled(lambda: not dev.quarantines)
        assert dev.memory_stats()["allocated_bytes"] == memory_before
        assert dev.units.free == dev.units.count
        assert settled(lambda: threading.active_count() <= threads_before), threading.enumerate()
    finally:
        dev.close()


def test_the_session_runs_async_as_onnxruntime_does(builds, tmp_path):
    path = tmp_path / "mlp.om"
    path.write_bytes(aircc.formats.dump_om(builds["static"]))
    sess = aircc.InferenceSession(str(path), providers=[("AirccVirtualDeviceProvider",
                                                         {"contexts": "2"})])
    want = sess.run(None, {"input": X[:4]})
    got, done = [], threading.Event()

    def callback(results, user_data, err):
        got.append((results, user_data, err))
        if len(got) == 3:
            done.set()
    for k in range(2):
        sess.run_async(None, {"input": X[:4]}, callback, k)
    sess.run_async(None, {"bogus": X[:4]}, callback, "bad")
    assert done.wait(30)
    by_data = {d: (r, e) for r, d, e in got}
    for k in range(2):
        np.testing.assert_array_equal(by_data[k][0][0], want[0])
        assert by_data[k][1] == ""
    assert by_data["bad"][0] is None and "unknown input names" in by_data["bad"][1]
    assert sess.model.contexts == 2


def test_airrun_keeps_requests_in_flight_and_reports_throughput(builds, tmp_path):
    import json

    from click.testing import CliRunner

    from aircc.cli.airrun_cmd import main as airrun

    path, figures = tmp_path / "mlp.om", tmp_path / "bench.json"
    path.write_bytes(aircc.formats.dump_om(builds["static"]))
    r = CliRunner().invoke(airrun, [str(path), "--random", "0", "--benchmark", "40", "--hint",
                                    "throughput", "--requests", "3", "--quiet",
                                    "--benchmark-json", str(figures)])
    assert r.exit_code == 0, r.output
    b = json.loads(figures.read_text())
    assert b["runs"] == 40 and b["requests_in_flight"] == 3 and b["throughput_per_s"] > 0
    assert b["min_ms"] <= b["p50_ms"] <= b["p99_ms"] <= b["max_ms"]
    assert "(3 requests in flight)" in r.output
    r = CliRunner().invoke(airrun, [str(path), "--random", "0", "--requests", "3"])
    assert r.exit_code != 0 and "--requests keeps requests in flight for --benchmark N" in r.output

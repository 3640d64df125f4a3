"""Doorbells (executor/device/doorbell): rings are never lost, a waiter wakes whether it
spins or sleeps, a wait with no deadline still lets Ctrl-C through, the pure-Python bell
behaves the same, and the spin policy follows ``AIRCC_SPIN_US``, the thread count and the
program (the host spins only for short runs that use one CPU)."""
from __future__ import annotations

import signal
import sys
import threading
import time

import numpy as np
import pytest

from aircc.errors import ConfigError, RunTimeoutError
from aircc.executor.device import doorbell, threads
from aircc.executor.device.stream import Stream

BELLS = [doorbell.PyBell] + ([doorbell.NativeBell] if doorbell.NativeBell is not None else [])


def test_the_c_bell_is_built_on_linux():
    if sys.platform.startswith("linux"):
        assert doorbell.NativeBell is not None and doorbell.Bell is doorbell.NativeBell


@pytest.mark.parametrize("bell_type", BELLS, ids=lambda t: t.__name__)
def test_a_ring_before_the_wait_ends_it_at_once_and_no_ring_times_out(bell_type):
    bell = bell_type()
    seen = bell.count
    bell.ring()
    assert bell.count == (seen + 1) & 0xFFFFFFFF
    t = time.perf_counter()
    assert bell.ring_wait(None, seen, 10_000_000, 5_000_000_000) is True
    assert time.perf_counter() - t < 0.5
    t = time.perf_counter()
    assert bell.ring_wait(None, bell.count, 20_000, 50_000_000) is False
    waited = time.perf_counter() - t
    assert 0.04 <= waited < 2.0


@pytest.mark.parametrize("bell_type", BELLS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("spin_ns", [0, 200_000], ids=["sleeping", "spinning"])
def test_a_ring_from_another_thread_wakes_the_waiter(bell_type, spin_ns):
    bell, answer = bell_type(), bell_type()
    got: list[bool] = []

    def waiter():
        seen = bell.count
        ready.set()
        got.append(bell.ring_wait(None, seen, spin_ns, 10_000_000_000))
        answer.ring()

    for _ in range(50):
        ready = threading.Event()
        seen_answer = answer.count
        th = threading.Thread(target=waiter)
        th.start()
        ready.wait(5)
        if _ % 2:
            time.sleep(0.002)          # half the time the waiter has gone to sleep
        assert answer.ring_wait(bell, seen_answer, spin_ns, 10_000_000_000)   # rings `bell`
        th.join(5)
        assert not th.is_alive()
    assert got == [True] * 50


@pytest.mark.parametrize("bell_type", BELLS, ids=lambda t: t.__name__)
def test_no_ring_is_lost_between_two_threads_counting_to_20000(bell_type):
    """Ping-pong: each side waits for the other's ring before it rings; a lost ring would
    stall the count (the deadline of each wait turns that into a failure)."""
    ping, pong = bell_type(), bell_type()
    rounds = 20_000 if bell_type is not doorbell.PyBell else 2_000
    failures: list[int] = []

    def other():
        seen = ping.count
        for i in range(rounds):
            if not ping.ring_wait(None, seen, 50_000, 5_000_000_000):
                failures.append(i)
                return
            seen = ping.count
            pong.ring()

    th = threading.Thread(target=other)
    th.start()
    seen = pong.count
    for i in range(rounds):
        if not pong.ring_wait(ping, seen, 50_000, 5_000_000_000):
            failures.append(-i)
            break
        seen = pong.count
    th.join(10)
    assert failures == [] and not th.is_alive()


@pytest.mark.skipif(doorbell.NativeBell is None or not hasattr(signal, "setitimer"),
                    reason="the C bell and POSIX timers")
def test_a_wait_with_no_deadline_lets_a_signal_through():
    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        bell = doorbell.NativeBell()
        t = time.perf_counter()
        with pytest.raises(Interrupted):
            bell.ring_wait(None, bell.count, 0, -1)
        assert time.perf_counter() - t < 2.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_the_c_bell_rejects_wrong_arguments():
    if doorbell.NativeBell is None:
        pytest.skip("the C bell is not built here")
    bell = doorbell.NativeBell()
    with pytest.raises(TypeError, match="Bell or None"):
        bell.ring_wait(object(), 0, 0, 0)
    with pytest.raises(TypeError, match="ring_wait"):
        bell.ring_wait(None, 0)
    with pytest.raises(TypeError, match="no arguments"):
        doorbell.NativeBell(3)


def test_a_stream_runs_many_small_tasks_in_order_across_idle_gaps():
    s = Stream(0, name="bell", idle=0.05)
    ran: list[int] = []
    try:
        for k in range(3000):
            s.submit(lambda k=k: ran.append(k))
            if k % 500 == 0:
                s.synchronize(5)
                time.sleep(0.001 if k % 1000 else 0.08)    # a spin, a sleep, a park
        s.synchronize(5)
        assert ran == list(range(3000))
    finally:
        assert s.close(2)


def test_a_bell_given_to_ring_when_idle_rings_once_the_queue_is_empty():
    s = Stream(0, name="bell")
    bell = doorbell.Bell()
    order: list[str] = []
    try:
        gate = threading.Event()
        seen = bell.count

        def first():
            s.ring_when_idle(bell)
            gate.wait(5)
            order.append(f"first, rung {bell.count != seen}")

        s.submit(first)
        s.submit(lambda: order.append(f"second, rung {bell.count != seen}"))
        gate.set()
        assert bell.ring_wait(None, seen, 0, 5_000_000_000)
        s.synchronize(5)
        # a second task was queued: the worker did not wait to be idle to ring
        assert order == ["first, rung False", "second, rung True"]
        seen = bell.count
        s.submit(lambda: s.ring_when_idle(bell))
        assert bell.ring_wait(None, seen, 0, 5_000_000_000)
    finally:
        s.close(2)


def test_the_spin_follows_aircc_spin_us_and_the_thread_count(aircc_env):
    if doorbell.NativeBell is None or len(threads.available_cpus()) < 2:
        pytest.skip("spinning needs the C bell and two CPUs")
    aircc_env("AIRCC_SPIN_US", "40")
    before = threads.threads()
    try:
        threads.set_threads(len(threads.available_cpus()))
        assert doorbell.worker_spin_ns() == 40_000
        assert doorbell.host_spin_ns(None) == 0                      # not known yet
        assert doorbell.host_spin_ns(50e-6) == 120_000                # twice, and 20 us
        assert doorbell.host_spin_ns(190e-6) == 200_000               # at most 5 x 40 us
        assert doorbell.host_spin_ns(300e-6) == 0                     # too long to spin for
        threads.set_threads(1)
        assert doorbell.worker_spin_ns() == 0 and doorbell.host_spin_ns(50e-6) == 0
    finally:
        threads.set_threads(before)
    aircc_env("AIRCC_SPIN_US", "0")
    assert doorbell.worker_spin_ns() == 0 and doorbell.host_spin_ns(10e-6) == 0
    for bad in ("-5", "ten", "1e9", "200000"):
        with pytest.raises(ConfigError, match="AIRCC_SPIN_US"):
            aircc_env("AIRCC_SPIN_US", bad)


def test_the_host_spins_only_for_programs_that_used_one_cpu(aircc_env):
    """A one-stream program of small kernels counts as one CPU; one that ran a kernel on
    an OpenMP team of two, or that has two streams, does not."""
    aircc_env("AIRCC_ADAPT_THREADS", "0")              # full teams whatever else runs

    from onnx import TensorProto, helper, numpy_helper

    import aircc
    from aircc.compiler.context import CompileOptions
    from aircc.compiler.driver import compile_model

    def model(n: int, branches: int):
        rng = np.random.default_rng(0)
        nodes, inits, outs = [], [], []
        for b in range(branches):
            w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), f"w{b}")
            inits.append(w)
            nodes.append(helper.make_node("MatMul", ["x", f"w{b}"], [f"m{b}"]))
            nodes.append(helper.make_node("Relu", [f"m{b}"], [f"y{b}"]))
            outs.append(helper.make_tensor_value_info(f"y{b}", TensorProto.FLOAT, [n, n]))
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                              outs, inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    results = {}
    for name, n, branches, streams in (("small", 16, 1, 1), ("big", 512, 1, 1),
                                       ("two streams", 16, 2, 2)):
        compiled = compile_model(model(n, branches), CompileOptions(
            streams=streams, mode="static", min_branch_bytes=0, split_matrix_branches=True))
        m = aircc.load(compiled.om)
        try:
            x = np.ones((n, n), np.float32)
            for _ in range(3):
                m.run({"x": x})
            program = m.engine.program
            results[name] = (program.one_cpu, len(program.lists))
        finally:
            m.close()
    assert results["small"] == (True, 1)
    if len(threads.available_cpus()) > 1 and results["big"][1] == 1:
        assert results["big"][0] is False          # the 512^3 product ran on two threads
    assert results["two streams"][0] is False and results["two streams"][1] == 2


def test_the_host_walks_a_short_program_itself_unless_a_fault_is_planned(monkeypatch):
    """A one-stream program of small kernels that ran short is walked on the calling
    thread, in its idle worker's place; with a fault planned, or a deadline under 100
    times the run, the stream's worker walks it."""
    from onnx import TensorProto, helper, numpy_helper

    import aircc
    from aircc import faults
    from aircc.compiler.context import CompileOptions
    from aircc.compiler.driver import compile_model
    from aircc.executor.device import execution

    w = numpy_helper.from_array(np.eye(8, dtype=np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 8])], [w])
    om = compile_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                       CompileOptions(mode="static")).om
    walkers: list[str] = []
    for name in ("_walk", "_walk_checked"):
        def noted(self, *args, walk=getattr(execution.ProgramExecution, name), **kwargs):
            walkers.append(threading.current_thread().name)
            return walk(self, *args, **kwargs)
        monkeypatch.setattr(execution.ProgramExecution, name, noted)
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    m = aircc.load(om)
    try:
        for _ in range(20):                  # the first runs teach it how short it is
            m.run({"x": x})
        program = m.engine.program
        if not program.one_cpu or program.expected >= execution.HOST_WALK_SECONDS:
            pytest.skip("the program did not run short here")
        walkers.clear()
        np.testing.assert_array_equal(m.run({"x": x})["y"], x)
        assert walkers == [threading.current_thread().name]
        walkers.clear()
        try:                                 # too tight a deadline for the host's walk
            m.run({"x": x}, timeout=program.expected * execution.HOST_WALK_MARGIN / 2)
        except RunTimeoutError:
            pass                             # the worker may not make it either
        assert threading.current_thread().name not in walkers
        faults.inject("corrupt", node="mm", value=0.0)
        try:
            walkers.clear()
            np.testing.assert_array_equal(m.run({"x": x})["y"], x)
            assert walkers and walkers[-1] != threading.current_thread().name
        finally:
            faults.clear()
    finally:
        m.close()

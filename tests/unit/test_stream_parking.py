"""A stream's worker ends after a while without work (the stream is parked) and the next
task starts a new one: order, faults, close and retire are as for a stream that never
parked, and an idle model no longer holds an OpenMP team beside a busy one."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from aircc.executor.device.stream import Stream


def _wait_parked(s: Stream, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not s.parked and time.monotonic() < end:
        time.sleep(0.005)
    assert s.parked


def test_an_idle_worker_ends_and_the_next_task_starts_another_in_order():
    s = Stream(0, name="park", idle=0.05)
    ran: list[int] = []
    s.submit(lambda: ran.append(1))
    s.synchronize()
    _wait_parked(s)
    first = s._worker
    first.join(1)
    assert not first.is_alive() and s.alive and not s.drained.is_set()
    for k in range(2, 50):
        s.submit(lambda k=k: ran.append(k))
    s.synchronize()
    assert ran == list(range(1, 50)) and s.workers_started == 2 and s._worker is not first
    assert s.close(1) and s.drained.is_set() and not s.alive


def test_close_and_retire_of_a_parked_stream_end_it():
    for end in ("close", "retire"):
        s = Stream(0, name="park", idle=0.02)
        s.synchronize()
        _wait_parked(s)
        called = []
        if end == "close":
            assert s.close(1)
        else:
            s.retire(then=lambda: called.append(True))
            assert s.drained.wait(1) and called == [True]
        assert not any(t.name == "park-stream0" and t.is_alive() for t in threading.enumerate())


def test_a_racing_submit_never_strands_a_task_or_starts_two_workers():
    """Submits arriving just as the worker gives up: every task runs, once, in order."""
    s = Stream(0, name="race", idle=0.001)
    ran: list[int] = []
    for k in range(300):
        s.submit(lambda k=k: ran.append(k))
        if k % 3 == 0:
            time.sleep(0.0015)                    # around the idle deadline
    s.synchronize(5)
    assert ran == list(range(300))
    assert len([t for t in threading.enumerate() if t.name == "race-stream0" and t.is_alive()]) <= 1
    assert s.close(1)


IDLE_MODEL_PROBE = r"""
import os, time, numpy as np, aircc
from aircc.executor.device.stream import IDLE_SECONDS
from onnx import TensorProto, helper

def model():
    w = helper.make_tensor("w", TensorProto.FLOAT, [512, 512], np.ones(512 * 512, np.float32))
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 512])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

count = lambda: len(os.listdir("/proc/self/task"))
x = {"x": np.ones((256, 512), np.float32)}
om = aircc.compile(model()).om
a = aircc.load(om)
base = count()
a.run(x)                                  # its worker: a team of its own
busy = count()
time.sleep(IDLE_SECONDS * 4)              # idle, but the process's only team: it stays
lone = count()
kept = int(not a.engine.streams[0].parked)
b = aircc.load(om)
b.run(x)                                  # a second model's worker and team
both = count()
time.sleep(IDLE_SECONDS * 4)              # two idle teams: one worker parks, its team with it
idle = count()
y, y2 = a.run(x)["y"], b.run(x)["y"]      # both come back for the next run
from aircc.executor.device import threads
team = min(threads.threads(), len(os.sched_getaffinity(0)))
print(base, busy, lone, kept, both, idle, float(y[0, 0]), float(y2[0, 0]), team)
"""


def test_an_idle_worker_gives_its_openmp_team_back_unless_it_is_the_only_one():
    out = subprocess.run([sys.executable, "-c", IDLE_MODEL_PROBE], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    base, busy, lone, kept, both, idle, y, y2, team = map(float, out.stdout.split())
    assert busy - base == team                         # the worker (started by the first
                                                       # run) and its team's helpers
    if team == 1:
        return                                         # one CPU: no team to keep or give back
    assert kept == 1 and busy - lone <= 1              # the only team stays (a teamless
                                                       # control-stream worker may park)
    assert both - lone >= team                         # b's new worker and its helpers
    assert idle <= both - team                         # one worker and its helpers are gone
    assert y == 512.0 and y2 == 512.0                  # and back for the next runs

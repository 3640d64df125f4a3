"""Start each engine's timed runs with the other engine's threads idle.

Both engines keep their worker threads busy for a while after a run, waiting for
more work.  numpy's OpenBLAS, under our kernels, spins 2**28 cycles (about 0.1 s
here) after every threaded product; onnxruntime's pool spins some 15-30 ms.  Timed
right after our run, onnxruntime's ResNet-50 shared the second core with OpenBLAS's
spinning worker and took 23-35 ms instead of the 18.6 ms it takes alone.

So before each engine's block of runs the benchmark waits until no other thread of
the process is running (:func:`wait_until_quiet`), and each engine then runs in its
own default configuration, as it would alone.
"""
from __future__ import annotations

import os
import threading
import time


def _state(tid: str) -> str:
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            stat = f.read()
    except OSError:          # the thread has ended
        return "X"
    return stat[stat.rindex(")") + 2]


def busy_threads() -> list[int]:
    """Native ids of this process's threads, other than the caller, that are running or
    ready to run (state R in /proc); [] where /proc has no task list."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return []
    me = threading.get_native_id()
    return [int(t) for t in tids if int(t) != me and _state(t) == "R"]


def wait_until_quiet(limit_s: float = 0.5, poll_s: float = 0.0002) -> tuple[float, bool]:
    """Wait until :func:`busy_threads` is empty, at most ``limit_s`` (the default outlasts
    OpenBLAS's 0.1 s spin): (seconds waited, whether it got quiet)."""
    t0 = time.perf_counter()
    while True:
        if not busy_threads():
            return time.perf_counter() - t0, True
        waited = time.perf_counter() - t0
        if waited >= limit_s:
            return waited, False
        time.sleep(poll_s)

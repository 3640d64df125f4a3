"""A busy neighbour: another process that keeps one core busy while a model is timed.

On a shared machine the engines rarely have every core to themselves.  The contended
run starts :data:`SPIN` in a separate Python process (not pinned: the scheduler puts it
on whichever core it likes, as it would a neighbour's job), times the models as usual,
then kills it.  Its CPU time over the wall time it ran says how much of a core it took.
:func:`others_load` measures what every other process took while a model was timed:
on a shared machine, what says a quiet row was not quiet.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Iterator

#: What the neighbour runs: a tight loop of Python bytecode, no system calls, no memory.
SPIN = "while True: pass"
DESCRIPTION = (f"a separate Python process running `{SPIN}` (one thread, not pinned), "
               "started before the measurement and killed after it")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (from /proc; 0 where there is none)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy_ticks() -> tuple[int, int]:
    """(ticks every CPU spent busy, ticks this process spent) so far, from /proc."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    with open("/proc/self/stat") as f:
        own = f.read().rsplit(")", 1)[1].split()
    return user + nice + system + irq + softirq + steal, int(own[11]) + int(own[12])


@contextmanager
def others_load() -> Iterator[dict]:
    """The CPU time other processes (a busy neighbour included) took during the ``with``
    block, in cores (0: none, 1: a whole core); the dict it yields gets ``cores`` when the
    block ends, or None where /proc cannot tell."""
    out: dict = {"cores": None}
    try:
        busy0, own0 = _busy_ticks()
    except (OSError, ValueError):
        yield out
        return
    t0 = time.perf_counter()
    yield out
    busy1, own1 = _busy_ticks()
    wall = time.perf_counter() - t0
    if wall > 0:
        out["cores"] = max(0.0, (busy1 - busy0 - (own1 - own0)) / os.sysconf("SC_CLK_TCK") / wall)


@contextmanager
def busy_neighbour(settle_s: float = 0.2) -> Iterator[dict]:
    """Run :data:`SPIN` in another process for the ``with`` block; the dict it yields gets
    ``wall_s``, ``cpu_s`` and ``core_share`` (the neighbour's CPU time over its wall time)
    when the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
    stats: dict = {"pid": proc.pid, "what": DESCRIPTION}
    try:
        time.sleep(settle_s)                 # the interpreter has started and spins
        if proc.poll() is not None:
            raise RuntimeError(f"the busy neighbour exited at once (status {proc.returncode})")
        cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        yield stats
        stats["wall_s"] = time.perf_counter() - t0
        stats["cpu_s"] = cpu_seconds(proc.pid) - cpu0
        stats["core_share"] = stats["cpu_s"] / stats["wall_s"] if stats["wall_s"] > 0 else 0.0
    finally:
        proc.kill()
        proc.wait()

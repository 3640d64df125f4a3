"""Doorbells: how a stream worker hears of new work, and the host of a finished run.

A :class:`Bell` counts rings.  A waiter reads ``count``, checks for its work, and calls
``ring_wait(other, seen, spin_ns, timeout_ns)``: ring ``other`` (or None), then wait
until the count differs from ``seen``, spinning up to ``spin_ns`` before it sleeps.
Rings are never lost (a ring between the read and the wait ends the wait at once) and a
spare ring costs a waiter one more look at its queue.

Why spin.  On a virtual machine a thread woken from another CPU after it went to sleep
costs about 25 us (the idle vCPU halted; waking it goes through the hypervisor), against
about 1 us for a thread still spinning.  A BERT-style encoder at batch 1 and 16 tokens
runs some 160 us of kernels, and paid that twice per inference: host to worker, worker
back to host (``python tools/doorbell_bench.py``: a round trip of 47-53 us on a queue and
an event, 0.6-6.5 us on spinning doorbells).  So:

- a stream worker whose queue ran dry spins :func:`worker_spin_ns` (``AIRCC_SPIN_US``,
  default 100 us) before it sleeps: the next run of a model called in a loop finds it
  awake;
- the host waiting for a run spins only when the program's recent runs were short
  (:func:`host_spin_ns`: up to ``5 x AIRCC_SPIN_US``); a longer run costs the wake-up
  a small share, and its kernels may want every CPU.

A spinning thread calls ``sched_yield()`` every couple of microseconds, so a thread that
needs its CPU gets it, and the GIL is released while it waits.  ``ring_wait`` rings
``other`` only once the GIL is released, so the thread it wakes does not go back to
sleep on the GIL (the worker rings a finished run's bell as it starts to wait for more
work: :meth:`~.stream.Stream.ring_when_idle`).  There is no spinning with
``AIRCC_SPIN_US=0``, or when aircc may use one thread only (``--threads 1``: its
spinning would take a CPU it was not given).

The bell is a C type (``doorbell_c``, built with the package on Linux); where it was not
built, :class:`PyBell` (a condition variable, no spinning) stands in.
"""
from __future__ import annotations

import threading

from aircc.config import settings
from . import threads

try:
    from .doorbell_c import Bell as NativeBell   # type: ignore[import-not-found]
except ImportError:                               # not built here: the condition variable
    NativeBell = None

#: The host spins for a run only when it expects the run to end within this many
#: worker spins (``5 x AIRCC_SPIN_US``).
HOST_SPIN_FACTOR = 5


class PyBell:
    """A bell on a condition variable, for where the C module was not built (never spins)."""

    __slots__ = ("_cond", "count")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self.count = 0

    def ring(self) -> None:
        with self._cond:
            self.count = (self.count + 1) & 0xFFFFFFFF
            self._cond.notify_all()

    def ring_wait(self, other: "PyBell | None", seen: int, spin_ns: int, timeout_ns: int) -> bool:
        if other is not None:
            other.ring()
        with self._cond:
            return self._cond.wait_for(lambda: self.count != seen,
                                       None if timeout_ns < 0 else timeout_ns / 1e9)


Bell = NativeBell if NativeBell is not None else PyBell
"""The bell type in use: the C one where it was built."""

_spin: tuple = (None, None, 0)       # (thread-count generation, the settings, ns)


def worker_spin_ns() -> int:
    """How long a stream worker spins for new work before it sleeps (ns): ``AIRCC_SPIN_US``
    microseconds, or 0 with the C bell missing or one thread allowed."""
    global _spin
    generation, current = threads.generation(), settings()
    if _spin[0] != generation or _spin[1] is not current:    # the count or the settings changed
        spin = current.spin_us * 1000 if NativeBell is not None and threads.threads() > 1 else 0
        _spin = (generation, current, spin)
    return _spin[2]


def host_spin_ns(expected_seconds: float | None) -> int:
    """How long the host spins for a run expected to take ``expected_seconds`` (None: not
    known yet) before it sleeps: twice that and 20 us more, when it is under
    ``HOST_SPIN_FACTOR`` worker spins; else 0."""
    limit = HOST_SPIN_FACTOR * worker_spin_ns()
    if expected_seconds is None or not limit:
        return 0
    expected = int(expected_seconds * 1e9)
    return min(limit, 2 * expected + 20_000) if expected <= limit else 0

"""Streams and events.

A :class:`Stream` is an in-order queue drained by one device worker thread, which waits
for work on the stream's doorbell (:mod:`.doorbell`: it spins a little before it sleeps).
An :class:`Event` is recorded by one stream and waited on by others; a wait
really blocks the waiting stream's worker until the record has run.  Events
count generations, so a model can record the same event once per run without
resetting it.

A worker survives any task that raises (the error is kept in ``faults`` and the
queue goes on).  A new stream has no worker until its first task (a model that declares
many streams and uses few starts few threads).  A worker that waits longer than ``idle``
seconds for work ends (the stream is *parked*), and the next :meth:`Stream.submit` starts
a new one: a thread that
ran oneDNN keeps an OpenMP team of its own for as long as it lives, and once the teams'
threads outnumber the CPUs libgomp wakes every team the slow way (a loaded model that
sat idle made another one's LSTM 3.4 -> 11.9 ms).  The price: a new worker forms a new
team, and on a machine another process keeps busy its threads run slow until the
scheduler has placed them (ResNet-50 beside a spinning neighbour, in blocks alternating
with another model's: 101 ms a block parking after 0.25 s, 74 ms parking after 2 s).  So a
worker whose team is the process's only one (:func:`~.threads.lone_team`: no other team
it could wake the slow way) parks only after :data:`LONE_TEAM_IDLE_SECONDS`; every other
one after ``idle``.  (Parking after 2 s whatever the other
teams: with a BERT-style model kept loaded, the benchmark's LSTM ran 14.2 ms instead of
3.6.)

A worker stuck inside a task cannot be stopped (a thread cannot be killed): the device
*retires* its stream instead (:meth:`Stream.retire`), so that the stuck task and
everything queued behind it run to their end on the old thread, after which the thread
ends, while a new stream takes the old one's place.
"""
from __future__ import annotations

import collections
import itertools
import os
import threading
import time
from typing import Callable, Collection

import numpy as np

from aircc.errors import StreamSyncTimeoutError
from .compute_units import ComputeUnits, Holder
from .doorbell import Bell, worker_spin_ns
from .threads import lone_team, mark_device_worker, team_gone

#: The stream whose worker is the calling thread (its unit holder), for event waits.
_worker = threading.local()

#: Errors a worker keeps from tasks that raised (the newest ones).
MAX_FAULTS = 16
#: Seconds a stream's worker waits for work before it ends (see the module doc).
IDLE_SECONDS = 0.25
#: ... and one whose OpenMP team is the process's only one, after this many.
LONE_TEAM_IDLE_SECONDS = 30.0


class Signal:
    """A task that only signals (tells the host the stream got this far, records an
    event): it computes nothing, so it runs without a compute unit.  A stream whose work
    is done answers even while a stuck kernel holds every unit, and a caching
    allocator's events run as soon as the stream reaches them."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]):
        self.fn = fn

    def __call__(self) -> None:
        self.fn()


def current_stream() -> "Stream | None":
    """The stream whose worker is the calling thread (None on any other thread)."""
    return getattr(_worker, "stream", None)


def in_device_worker() -> bool:
    """Is the calling thread a stream's worker?"""
    return getattr(_worker, "stream", None) is not None


def worker_holder() -> Holder | None:
    """The compute-unit holder of the stream whose worker is the calling thread (None on
    a host thread, or on a stream without compute units)."""
    stream = getattr(_worker, "stream", None)
    return stream.holder if stream is not None and stream.units is not None else None


class Event:
    """A device event: ``record(gen)`` on one stream, ``wait(gen)`` on another."""

    def __init__(self, event_id: int):
        self.id = event_id
        self._cond = threading.Condition()
        self._generation = 0

    def record(self, generation: int) -> None:
        with self._cond:
            self._generation = max(self._generation, generation)
            self._cond.notify_all()

    def wait(self, generation: int, cancelled: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until the record of ``generation`` ran; False if cancelled or timed out.
        A stream worker gives its compute unit back while it waits."""
        if self._generation >= generation:
            return True
        stream = getattr(_worker, "stream", None)
        if stream is None or stream.units is None:
            return self._wait(generation, cancelled, timeout)
        with stream.units.released_while(stream.holder):
            return self._wait(generation, cancelled, timeout)

    def _wait(self, generation: int, cancelled: Callable[[], bool], timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._generation >= generation or cancelled(),
                                       timeout=timeout) and self._generation >= generation

    def cancel(self) -> None:
        """Wake every waiter so it can see that its run was cancelled."""
        with self._cond:
            self._cond.notify_all()

    @property
    def generation(self) -> int:
        return self._generation


class Stream:
    """An in-order task queue with its own device worker (on ``cpus`` if given).

    With ``units`` (the device's :class:`~.compute_units.ComputeUnits`) the worker holds
    a compute unit while it runs a task, and tasks of all the device's streams are
    served by ``priority`` (higher first), then by the order they were queued in
    (``order``: the device's sequence of submissions)."""

    def __init__(self, stream_id: int, priority: int = 0, name: str = "device",
                 cpus: Collection[int] | None = None, idle: float | None = IDLE_SECONDS,
                 units: ComputeUnits | None = None, order: itertools.count | None = None):
        self.id = stream_id
        self.priority = priority
        self.name = name
        self.cpus = frozenset(cpus) if cpus else None
        self.units = units
        self.holder = Holder(priority)
        self._host_holder = Holder(priority)
        """The holder of a task the host runs in the worker's place (:meth:`run_here`): the
        worker's own may be given back by the worker meanwhile (as it parks)."""
        self._order = order if order is not None else itertools.count()
        self._queue: "collections.deque[tuple[int, Callable[[], None] | None]]" = collections.deque()
        self.bell = Bell()
        """Rung for every task queued (:mod:`.doorbell`): the worker waits on it."""
        self._ring_when_idle: Bell | None = None
        self.tasks_run = 0
        self.running: Callable[[], None] | None = None
        """The task the worker is inside now (None when it waits for work)."""
        self.running_since = 0.0
        self.faults: list[BaseException] = []
        """Errors of tasks that raised (a task should catch its own; these are the rest)."""
        self.retired = False
        self.drained = threading.Event()
        """Set when the worker thread has ended (after :meth:`close` or :meth:`retire`)."""
        self._ending = False
        self._on_end: list[Callable[[], None]] = []
        self._end_lock = threading.Lock()
        self.idle = idle
        """Seconds the worker waits for work before it ends (None: it never parks)."""
        self.parked = True                # no worker until the first task comes
        self.workers_started = 0
        self._worker: threading.Thread | None = None

    def _start_worker(self) -> threading.Thread:
        worker = threading.Thread(target=self._drain, name=f"{self.name}-stream{self.id}",
                                  daemon=True)
        self.workers_started += 1
        worker.start()
        return worker

    def submit(self, task: Callable[[], None], ring: bool = True) -> None:
        """Queue ``task``; it runs after everything queued before it on this stream (a parked
        stream gets a new worker first; a :class:`Signal` on a parked stream with nothing
        queued runs at once, in the caller's thread: everything before it has run).
        ``ring`` False: the caller rings :attr:`bell` itself, e.g. in the ``ring_wait``
        with which it waits for the task's result."""
        if self.parked and type(task) is Signal and self._idle():
            task()
            return
        self._queue.append((next(self._order), task))
        if ring:
            self.bell.ring()
        if self.parked:
            self._unpark()

    def run_here(self, task: Callable[[Holder | None], None]) -> bool:
        """Run ``task(holder)`` on the calling thread in the worker's place, when the stream
        is idle (nothing queued, its worker inside no task) and a compute unit is free;
        False, and nothing run, otherwise (it never waits for a unit).  The task holds a
        unit as a worker's task would, at the stream's priority (``holder``, for its yield
        points; None without units), and numpy's floating-point warnings are off
        meanwhile, as in a worker.  For a short task the host would hand
        to the worker and then wait for: the two thread wake-ups are saved.  The task's
        errors are the caller's."""
        units, holder = self.units, self._host_holder
        if self.running is not None or self._queue or self._ending or self.holder.holding:
            return False
        if units is not None:
            holder.seq = next(self._order)
            if not units.try_acquire(holder):
                return False
        self.running_since = time.monotonic()
        self.running = task
        try:
            with np.errstate(all="ignore"):
                task(holder if units is not None else None)
        finally:
            self.running = None
            self.tasks_run += 1
            if units is not None:
                units.release(holder)
        return True

    def ring_when_idle(self, bell: Bell) -> None:
        """Called from a task on this stream's worker: ring ``bell`` once the worker has
        nothing left to run, as it starts to wait (its GIL released, so that the thread
        woken does not sleep again on the GIL); at once if another bell was pending."""
        pending, self._ring_when_idle = self._ring_when_idle, bell
        if pending is not None:
            pending.ring()

    def _idle(self) -> bool:
        """Parked with nothing queued (no worker will start for a signal)."""
        with self._end_lock:
            return self.parked and not self._queue and not self._ending

    def _unpark(self) -> None:
        with self._end_lock:
            if self.parked:
                self.parked = False
                self._worker = self._start_worker()

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait until every task queued so far has run (on a retired stream: until its
        worker has finished everything it still had)."""
        if self._ending:
            if not self.drained.wait(timeout):
                raise StreamSyncTimeoutError(f"retired stream {self.id} is still inside a task "
                                             f"after {timeout} s")
            return
        done = threading.Event()
        self.submit(Signal(done.set))
        if not done.wait(timeout):
            raise StreamSyncTimeoutError(f"stream {self.id} did not drain within {timeout} s")

    def busy(self) -> bool:
        """Is the worker inside a task (as opposed to waiting for one)?"""
        return self.running is not None

    def close(self, timeout: float = 5.0) -> bool:
        """End the worker after what is queued; False if it is still inside a task after
        ``timeout`` seconds (it then ends when that task returns)."""
        self._end()
        self.drained.wait(timeout=timeout)
        return self.drained.is_set()

    def retire(self, then: Callable[[], None] | None = None) -> None:
        """Take no more work: the worker finishes the task it is in and everything queued
        behind it, then ends and calls ``then`` (at once if it has ended already).  For a
        stream whose worker is stuck."""
        with self._end_lock:
            self.retired = True
            ended = self.drained.is_set()
            if then is not None and not ended:
                self._on_end.append(then)
        self._end()
        if then is not None and ended:
            then()

    def _end(self) -> None:
        with self._end_lock:
            if self._ending:
                return
            self._ending = True
            idle = self.parked and not self._queue
            if idle:                      # no worker and nothing queued: it ends here, with
                self.parked = False       # no thread started just to end (none can start
                then, self._on_end = self._on_end, []   # while the interpreter shuts down)
                self.drained.set()
        if idle:
            for fn in then:
                fn()
            return
        self.submit(None)                 # the worker takes it after the queued work and ends

    @property
    def alive(self) -> bool:
        """The stream can run work: its worker runs or waits, or it is parked."""
        return not self.drained.is_set()

    def _drain(self) -> None:
        mark_device_worker()
        _worker.stream = self
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)   # this thread only (checked by the device)
        pop, bell = self._queue.popleft, self.bell
        units, holder = self.units, self.holder
        idle_ns = -1 if self.idle is None else int(self.idle * 1e9)
        ended = True
        item = None
        waited = 0.0
        try:
            while True:
                if item is None:
                    seen = bell.count             # before the look: a later ring ends the wait
                    try:
                        item = pop()
                    except IndexError:
                        ring, self._ring_when_idle = self._ring_when_idle, None
                        if bell.ring_wait(ring, seen, worker_spin_ns(), idle_ns):
                            waited = 0.0
                            continue
                        waited += self.idle
                        if waited < LONE_TEAM_IDLE_SECONDS and lone_team():
                            continue              # no other team to wake the slow way
                        if self._park():
                            ended = False
                            return
                        continue
                seq, task = item
                if task is None:
                    return
                if units is not None and not holder.holding and type(task) is not Signal:
                    holder.seq = seq
                    units.acquire(holder)
                self.running_since = time.monotonic()
                self.running = task
                try:
                    task()
                except BaseException as e:   # the worker outlives any task
                    self.faults.append(e)
                    del self.faults[:-MAX_FAULTS]
                self.running = None
                self.tasks_run += 1
                try:
                    item = pop()
                except IndexError:
                    item = None
                else:
                    if self._ring_when_idle is not None:   # not idle yet: ring now
                        ring, self._ring_when_idle = self._ring_when_idle, None
                        ring.ring()
                if units is not None and holder.holding:   # a Signal took no unit
                    if item is None or item[1] is None:
                        units.release(holder)
                    else:
                        units.pass_or_keep(holder, item[0])
        finally:
            ring, self._ring_when_idle = self._ring_when_idle, None
            if ring is not None:
                ring.ring()
            team_gone()
            if units is not None and holder.holding:
                units.release(holder)
            if ended:
                with self._end_lock:
                    then, self._on_end = self._on_end, []
                    self.drained.set()
                for fn in then:
                    fn()

    def _park(self) -> bool:
        """Called by the worker after ``idle`` seconds without work: True if it may end
        (the stream is parked; the next submit starts a worker), False if work came."""
        with self._end_lock:
            if self._ending:
                return False              # an end is coming: wait for it
            self.parked = True
        if not self._queue:               # anything put from here on sees ``parked``
            return True
        with self._end_lock:              # work came in between: keep it, unless a
            if self.parked:               # submit already started a new worker
                self.parked = False
                return False
            return True

"""A program as the device keeps it, and the record of one execution in flight."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from .doorbell import Bell
from .stream import Event, Stream, current_stream

#: A device task: called by a stream worker with the run it belongs to; a control
#: task returns the index of the next task to run (None: the next one in the list).
Task = Callable[["Run"], "int | None"]


class Cancelled(Exception):
    """Raised inside a stream walk when its run was cancelled."""


class Run:
    """One model execution in flight on the device.

    The record is made once per program and re-armed for every execution: the
    host hands over the feeds and the result slots, notes the count of the ``done``
    bell and clears the last execution's error (:meth:`arm`: a cancel from then on
    stops this one); the model-execute task clears the rest (:meth:`start`) before any
    stream sees the run, and the last stream to finish rings ``done``.  A run
    whose walk is stuck in a kernel is *abandoned* (:meth:`abandon`): its record stays
    with the stuck walk, which stops at its next task, and the program gets a new one.
    """

    __slots__ = ("feeds", "results", "pending", "done", "error", "cancelled", "faults",
                 "base", "records", "waits", "at", "walking", "abandoned", "_lock",
                 "_streams", "_released", "_seen", "kick", "submitted", "parallel_calls",
                 "execution", "host_walk")

    def __init__(self, streams: int):
        self.feeds: list = []
        self.results: list = []
        self._streams = self.pending = streams
        self.done = Bell()
        """Rung when the run is over (its last stream finished, or it was abandoned)."""
        self._seen = 0
        self.kick: Bell | None = None
        """A stream's bell the host rings as it starts to wait (:meth:`wait_done`): the
        submission queued the run's first task without ringing."""
        self.submitted = 0.0
        """When the host submitted it (``time.perf_counter()``)."""
        self.parallel_calls = 0
        """:data:`~.threads.parallel_calls` then."""
        self.host_walk = False
        """The host may walk the run itself as it starts to wait (nothing was queued on a
        stream): see :meth:`~.execution.ProgramExecution.submit`."""
        self.error: BaseException | None = None
        self.cancelled = False
        self.faults: dict | None = None
        """Faults that may fire in this run, by node (``aircc.faults.for_run``); None: none."""
        self.base: list[int] = []
        """Each event's generation when the run started."""
        self.records: list[int] = []
        """Records of each event so far in this run (a loop records once per iteration)."""
        self.waits: list[int] = []
        self.at = [0] * streams
        """Per stream: the index of the task its walk is in (or last ran)."""
        self.walking = [False] * streams
        """Per stream: its walk has not finished."""
        self.abandoned = False
        self._lock = threading.Lock()
        self._released = True
        self.execution = 0
        """Which execution of the program the record holds now (counted by :meth:`arm`):
        a cancel meant for an earlier one must not stop the next (:meth:`fail`)."""

    def arm(self, feeds: list, results: list, faults: dict | None = None) -> None:
        """Host side of a new execution: its feeds, its result slots, and ``done`` taken."""
        self.feeds, self.results, self.faults = feeds, results, faults
        self._seen = self.done.count
        with self._lock:              # a cancel from now on stops this execution
            self.execution += 1
            self.error, self.cancelled = None, False
            self._released = False

    def start(self, events: list[Event]) -> None:
        """Device side: clear what the last execution left (by the model-execute task)."""
        self.pending = self._streams
        self.base = [ev._generation for ev in events]
        self.records = [0] * len(events)
        self.waits = [0] * len(events)
        self.walking = [True] * self._streams

    def wait_done(self, timeout: float | None, spin_ns: int = 0) -> bool:
        """Wait for the run to end (ringing :attr:`kick` first); spin up to ``spin_ns``
        before sleeping; False after ``timeout`` seconds (None: no limit)."""
        kick, self.kick = self.kick, None
        if kick is None and self.done.count != self._seen:
            return True            # over already (a walk the host ran itself): no wait
        return self.done.ring_wait(kick, self._seen, spin_ns,
                                   -1 if timeout is None else int(max(0.0, timeout) * 1e9))

    def release(self) -> None:
        """The run is over: ring ``done`` (from a stream worker, as it starts to wait for
        more work: :meth:`~.stream.Stream.ring_when_idle`)."""
        stream = current_stream()
        if stream is None:
            self.done.ring()
        else:
            stream.ring_when_idle(self.done)

    def record(self, event: Event, e: int) -> None:
        """The n-th record of event e in this run marks generation base + n."""
        self.records[e] += 1
        event.record(self.base[e] + self.records[e])

    def wait(self, event: Event, e: int) -> None:
        """The n-th wait on event e in this run waits for the n-th record."""
        self.waits[e] += 1
        if not event.wait(self.base[e] + self.waits[e], lambda: self.cancelled):
            raise Cancelled()

    def fail(self, error: BaseException, events: list[Event], execution: int | None = None) -> bool:
        """Stop the run with ``error`` (the first error stays).  ``execution`` (from another
        thread, which saw the run in flight): only if the record still holds that
        execution; False, and nothing done, when it has moved on to the next one."""
        with self._lock:
            if execution is not None and execution != self.execution:
                return False
            if self.error is None:
                self.error = error
            self.cancelled = True
        for e in events:
            e.cancel()
        return True

    def stream_finished(self, index: int) -> None:
        with self._lock:
            self.walking[index] = False
            self.pending -= 1
            last = self.pending == 0 and not self._released
            if last:
                self._released = True
        if last:
            self.release()

    def abandon(self) -> None:
        """Give up on the walks still going (the run must have failed): whoever waits for
        the run is released now; the walks stop at their next task."""
        with self._lock:
            self.abandoned = self.cancelled = True
            release = not self._released
            self._released = True
        if release:
            self.done.ring()

    def stuck(self) -> list[int]:
        """The streams whose walk has not finished."""
        return [i for i, w in enumerate(self.walking) if w]


@dataclass(eq=False)
class DeviceProgram:
    """A loaded static model as the device keeps it: task lists bound to streams."""

    streams: list[Stream]
    events: list[Event]
    lists: list[list[tuple[Task, dict]]]
    """Per stream: (callable, task description) in order."""
    name: str = "program"
    """Who it belongs to (a model's name), for errors."""
    run: "Run | None" = None
    """The run record, reused by every execution (one at a time: ``lock``)."""
    dispatch: "Callable[[], None] | None" = None
    host_dispatch: "Callable[[object], None] | None" = None
    """:attr:`dispatch` for the host's thread (given the compute-unit holder it walks with)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    profile: "object | None" = None
    """A :class:`~aircc.executor.runtime.profiling.Profiler` recording each task, or None."""
    expected: "float | None" = None
    """How long a run takes, from submission to its end (seconds, a moving average; None
    before the first): the host spins for a short one (:func:`~.doorbell.host_spin_ns`)..."""
    one_cpu: bool = False
    """... that used one CPU at a time (one stream, no kernel on a team of more threads;
    else a spinning host would take a CPU the run wants).  Such a program, when it is
    short, the host walks itself (:meth:`~.execution.ProgramExecution.submit`)."""
    worker_walked: float = 0.0
    """When a stream worker last walked it (``time.perf_counter()``): :attr:`one_cpu` is
    what such a walk saw, so the host leaves a walk to the worker now and then."""

    def in_kernel(self, run: Run, stream: int) -> bool:
        """Is ``stream``'s walk at a kernel task (rather than a wait or a copy)?"""
        tasks = self.lists[stream] if stream < len(self.lists) else []
        pc = run.at[stream] if stream < len(run.at) else 0
        return pc < len(tasks) and bool(tasks[pc][1].get("node"))

    def where(self, run: Run, stream: int) -> str:
        """``stream 1, task 7 (kernel of node 'conv', op Conv)``."""
        tasks = self.lists[stream] if stream < len(self.lists) else []
        pc = run.at[stream] if stream < len(run.at) else 0
        if pc >= len(tasks):
            return f"stream {stream}, after its last task"
        desc = tasks[pc][1]
        what = (f"{desc.get('kind', 'task')} of node '{desc['node']}', op {desc.get('op')}"
                if desc.get("node") else desc.get("kind", "task"))
        return f"stream {stream}, task {pc} ({what})"

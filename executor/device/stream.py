"""Streams and events.

A :class:`Stream` is an in-order queue drained by one device worker thread.
An :class:`Event` is recorded by one stream and waited on by others; a wait
really blocks the waiting stream's worker until the record has run.  Events
count generations, so a model can record the same event once per run without
resetting it.

A worker survives any task that raises (the error is kept in ``faults`` and the
queue goes on).  A worker stuck inside a task cannot be stopped (a thread cannot be
killed): the device *retires* its stream instead (:meth:`Stream.retire`), so that the
stuck task and everything queued behind it run to their end on the old thread, after
which the thread ends, while a new stream takes the old one's place.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from typing import Callable, Collection

from aircc.errors import StreamSyncTimeoutError
from .threads import mark_device_worker

#: Errors a worker keeps from tasks that raised (the newest ones).
MAX_FAULTS = 16


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
        """Block until the record of ``generation`` ran; False if cancelled or timed out."""
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
    """An in-order task queue with its own device worker (on ``cpus`` if given)."""

    def __init__(self, stream_id: int, priority: int = 0, name: str = "device",
                 cpus: Collection[int] | None = None):
        self.id = stream_id
        self.priority = priority
        self.name = name
        self.cpus = frozenset(cpus) if cpus else None
        self._queue: "queue.SimpleQueue[Callable[[], None] | None]" = queue.SimpleQueue()
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
        self._worker = threading.Thread(target=self._drain, name=f"{name}-stream{stream_id}",
                                        daemon=True)
        self._worker.start()

    def submit(self, task: Callable[[], None]) -> None:
        """Queue ``task``; it runs after everything queued before it on this stream."""
        self._queue.put(task)

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait until every task queued so far has run (on a retired stream: until its
        worker has finished everything it still had)."""
        if self._ending:
            if not self.drained.wait(timeout):
                raise StreamSyncTimeoutError(f"retired stream {self.id} is still inside a task "
                                             f"after {timeout} s")
            return
        done = threading.Event()
        self.submit(done.set)
        if not done.wait(timeout):
            raise StreamSyncTimeoutError(f"stream {self.id} did not drain within {timeout} s")

    def busy(self) -> bool:
        """Is the worker inside a task (as opposed to waiting for one)?"""
        return self.running is not None

    def close(self, timeout: float = 5.0) -> bool:
        """End the worker after what is queued; False if it is still inside a task after
        ``timeout`` seconds (it then ends when that task returns)."""
        self._end()
        self._worker.join(timeout=timeout)
        return not self._worker.is_alive()

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
        self._queue.put(None)

    @property
    def alive(self) -> bool:
        return self._worker.is_alive()

    def _drain(self) -> None:
        mark_device_worker()
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)   # this thread only (checked by the device)
        get = self._queue.get
        try:
            while True:
                task = get()
                if task is None:
                    return
                self.running_since = time.monotonic()
                self.running = task
                try:
                    task()
                except BaseException as e:   # the worker outlives any task
                    self.faults.append(e)
                    del self.faults[:-MAX_FAULTS]
                self.running = None
                self.tasks_run += 1
        finally:
            with self._end_lock:
                then, self._on_end = self._on_end, []
                self.drained.set()
            for fn in then:
                fn()

"""Streams and events.

A :class:`Stream` is an in-order queue drained by one device worker thread.
An :class:`Event` is recorded by one stream and waited on by others; a wait
really blocks the waiting stream's worker until the record has run.  Events
count generations, so a model can record the same event once per run without
resetting it.
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Callable, Collection

from aircc.errors import StreamSyncTimeoutError


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
        self.cpus = frozenset(cpus) if cpus else None
        self._queue: "queue.SimpleQueue[Callable[[], None] | None]" = queue.SimpleQueue()
        self.tasks_run = 0
        self._worker = threading.Thread(target=self._drain, name=f"{name}-stream{stream_id}",
                                        daemon=True)
        self._worker.start()

    def submit(self, task: Callable[[], None]) -> None:
        """Queue ``task``; it runs after everything queued before it on this stream."""
        self._queue.put(task)

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait until every task queued so far has run."""
        done = threading.Event()
        self.submit(done.set)
        if not done.wait(timeout):
            raise StreamSyncTimeoutError(f"stream {self.id} did not drain within {timeout} s")

    def close(self) -> None:
        self._queue.put(None)
        self._worker.join(timeout=5)

    def _drain(self) -> None:
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)   # this thread only (checked by the device)
        while True:
            task = self._queue.get()
            if task is None:
                return
            task()
            self.tasks_run += 1

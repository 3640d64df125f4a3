"""Requests in flight: ``run_async`` queues runs onto a loaded model's execution contexts.

A :class:`RequestQueue` holds at most ``max_in_flight`` requests, queued or running; a
``run_async`` past that waits for room (backpressure), by the request's deadline.  One
worker thread per execution context takes requests in the order they came and runs each
with ``LoadedModel.run`` in what is left of its deadline (counted from ``run_async``), so
results are those of ``run``.  A request still queued can be cancelled (its future's
``cancel()``); every future resolves exactly once: with the outputs, the run's error,
``RunTimeoutError`` (its deadline passed while it waited), ``ModelClosedError`` (the
model was closed before it ran) or as cancelled.  The workers start with the first
request and end when the model closes.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError, Future

from aircc.errors import ModelClosedError, RunTimeoutError
from aircc.executor.device.doorbell import Bell, host_spin_ns, worker_spin_ns
from aircc.log import get as get_log

from .recovery import RunDeadline

#: ``callback(outputs, error)``: outputs (None on an error) and the error (None on success).
Callback = Callable[[dict | None, BaseException | None], None]


class RequestFuture(Future):
    """A request's future, whose ``result()`` and ``exception()`` spin a while before they
    sleep, when the model's recent requests were short: waking a thread that slept costs
    5-40 us on a virtual machine, longer than a small model's run
    (:func:`~aircc.executor.device.doorbell.host_spin_ns`, the policy of the host waiting
    for a run)."""

    def __init__(self, queue: "RequestQueue"):
        super().__init__()
        self._queue = queue

    def _spin(self) -> None:
        if self.done():
            return
        bell, spin = self._queue.finished, host_spin_ns(self._queue.expected)
        end = time.perf_counter_ns() + spin
        while spin > 0:
            seen = bell.count
            if self.done():
                return
            bell.ring_wait(None, seen, spin, spin)     # a request ended, or the spin did
            spin = end - time.perf_counter_ns()

    def result(self, timeout: float | None = None):
        self._spin()
        return super().result(timeout)

    def exception(self, timeout: float | None = None):
        self._spin()
        return super().exception(timeout)


class Request:
    """One queued run: its feeds, the outputs asked for, its deadline and its future."""

    __slots__ = ("feeds", "output_names", "deadline", "future", "device_outputs")

    def __init__(self, feeds: dict, output_names: list[str] | None, deadline: RunDeadline,
                 future: Future, device_outputs: frozenset[str] = frozenset()):
        self.feeds, self.output_names, self.deadline = feeds, output_names, deadline
        self.device_outputs = device_outputs
        self.future = future


class RequestQueue:
    """The requests of one model (see the module doc); ``run(feeds, output_names, timeout)``
    is the model's own run, ``max_in_flight`` as the model checked it."""

    def __init__(self, run: Callable[..., dict], workers: int, max_in_flight: int, name: str):
        self._run, self._name = run, name
        self.max_in_flight = max_in_flight
        self._queue: deque[Request] = deque()
        self._in_flight = 0
        self._cond = threading.Condition()
        self.finished = Bell()
        """Rung as each request ends (its future's waiters spin on it)."""
        self.expected: float | None = None
        """How long a request runs (seconds, a moving average; None before the first)."""
        self._bell = Bell()
        """Rung for every request queued and at close: idle workers wait on it, spinning
        a while first (:func:`~aircc.executor.device.doorbell.worker_spin_ns`), so that a
        request queued as the last one ends finds its worker awake."""
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"aircc-{name}-request-{k}",
                                          daemon=True) for k in range(workers)]
        for t in self._threads:
            t.start()

    @property
    def in_flight(self) -> int:
        """Requests queued or running."""
        return self._in_flight

    def submit(self, feeds: dict, output_names: list[str] | None, deadline: RunDeadline,
               callback: Callback | None, device_outputs: frozenset[str] = frozenset()) -> Future:
        """Queue a run, waiting for room by ``deadline``; its future."""
        request = Request(feeds, output_names, deadline, RequestFuture(self), device_outputs)
        if callback is not None:
            request.future.add_done_callback(lambda f: _call_back(callback, f))
        with self._cond:
            room = self._cond.wait_for(lambda: self._closed or self._in_flight < self.max_in_flight,
                                       timeout=max(0.0, deadline.left()))
            if self._closed:
                request.future.set_exception(ModelClosedError(
                    f"model '{self._name}' is closed; load it again to run it"))
            elif not room:
                request.future.set_exception(RunTimeoutError(
                    f"model '{self._name}': the request passed its deadline of "
                    f"{deadline.budget:g} s waiting for room among the {self.max_in_flight} "
                    f"requests in flight"))
            else:
                self._in_flight += 1
                self._queue.append(request)
        self._bell.ring()
        return request.future

    def _work(self) -> None:
        bell = self._bell
        while True:
            seen = bell.count
            with self._cond:
                request = self._queue.popleft() if self._queue else None
                if request is None and self._closed:
                    return                          # closed, nothing left
            if request is None:                     # until a submit (or close) rings
                bell.ring_wait(None, seen, worker_spin_ns(), -1)
                continue
            try:
                self._serve(request)
            finally:
                with self._cond:
                    self._in_flight -= 1
                    self._cond.notify_all()

    def _serve(self, request: Request) -> None:
        future = request.future
        if not future.set_running_or_notify_cancel():
            return                                  # cancelled while it waited
        left = request.deadline.left()
        start = time.perf_counter()
        try:
            if self._closed:
                raise ModelClosedError(f"model '{self._name}' is closed; load it again to run it")
            if left <= 0:
                raise RunTimeoutError(f"model '{self._name}': the request passed its deadline "
                                      f"of {request.deadline.budget:g} s waiting in the queue")
            outputs = self._run(request.feeds, request.output_names, left,
                                device_outputs=request.device_outputs)
        except BaseException as e:                  # the run's own error, for the caller
            future.set_exception(e)
        else:
            took = time.perf_counter() - start
            self.expected = took if self.expected is None else 0.75 * self.expected + 0.25 * took
            future.set_result(outputs)
        self.finished.ring()

    def close(self) -> None:
        """Fail every queued request with ModelClosedError and end the workers once the
        running ones return."""
        with self._cond:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._in_flight -= len(pending)
            self._cond.notify_all()
        self._bell.ring()                           # idle workers: the queue is closed
        error = ModelClosedError(f"model '{self._name}' was closed before the request ran; "
                                 f"load it again to run it")
        for request in pending:
            if request.future.set_running_or_notify_cancel():
                request.future.set_exception(error)

    def join(self, timeout: float) -> None:
        for t in self._threads:
            t.join(timeout)


def _call_back(callback: Callback, future: Future) -> None:
    """``callback(outputs, error)`` for a done future (a callback's own error is logged)."""
    try:
        if future.cancelled():
            callback(None, CancelledError())
        elif future.exception() is not None:
            callback(None, future.exception())
        else:
            callback(future.result(), None)
    except Exception:                              # noqa: BLE001  (the caller's code)
        get_log("requests").exception("a run_async callback raised")

"""A loaded model's execution contexts and which of them a run holds.

Each context is an engine (its own arena, streams and events over the weights every
context on the device shares).  A run takes a free one (:meth:`ContextPool.take`, waiting
by its deadline while every context runs) and gives it back; closing waits for every
context to come back, cancels the runs that do not, and leaves the last one out to free
the model when even that is not enough.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from aircc.errors import RunTimeoutError
from aircc.executor.device.device import CANCEL_GRACE

from .engine import Engine, RunStats
from .recovery import RunDeadline


class ContextPool:
    """The engines of a model's execution contexts (see the module doc)."""

    def __init__(self, engines: list[Engine]):
        self._engines = engines
        self._free = list(range(len(engines)))
        """The contexts no run holds, the most recently used last (taken first)."""
        self._cond = threading.Condition()
        self.closing = False
        self.close_pending = False
        """close() gave up waiting: the last run to give its context back frees the model."""

    def __len__(self) -> int:
        return len(self._engines)

    def __getitem__(self, k: int) -> Engine:
        return self._engines[k]

    def __setitem__(self, k: int, engine: Engine) -> None:
        self._engines[k] = engine

    def __iter__(self) -> Iterator[Engine]:
        return iter(list(self._engines))

    @property
    def lock(self) -> threading.Condition:
        """Held to act on what several contexts share (a device's reset)."""
        return self._cond

    def take(self, deadline: RunDeadline, name: str) -> int | None:
        """A free context, waiting for one by ``deadline`` (RunTimeoutError past it); None
        once the model is closing."""
        with self._cond:
            if self._free and not self.closing:
                return self._free.pop()
            if not self._cond.wait_for(lambda: self._free or self.closing,
                                       timeout=max(0.0, deadline.left())):
                n = len(self._engines)
                raise RunTimeoutError(
                    f"model '{name}': the run passed its deadline of {deadline.budget:g} s "
                    f"waiting for the model (its {n} context{'s' if n > 1 else ''} ran the "
                    f"runs before it all that time)")
            return self._free.pop() if self._free else None

    def give(self, k: int) -> bool:
        """Context ``k`` is free again; True when it was the last one a pending close waited for."""
        with self._cond:
            self._free.append(k)
            self._cond.notify()
            return self.close_pending and len(self._free) == len(self._engines)

    def each_free(self, act: Callable[[Engine], int]) -> int:
        """``act`` on every context no run holds (none is taken meanwhile); the sum."""
        with self._cond:
            return sum(act(self._engines[k]) for k in self._free)

    def close(self, timeout: float, cancel: Callable[[Engine], None]) -> bool:
        """Refuse new runs, wait ``timeout`` seconds for the runs in flight, then ``cancel``
        those and wait a little more; True when every context came back (else the last
        run to come back frees the model)."""
        with self._cond:
            self.closing = True
            self._cond.notify_all()             # runs waiting for a context: closed
            every = lambda: len(self._free) == len(self._engines)   # noqa: E731
            if not self._cond.wait_for(every, timeout=timeout):
                for k, engine in enumerate(self._engines):
                    if k not in self._free:
                        cancel(engine)
                self._cond.wait_for(every, timeout=4 * CANCEL_GRACE + 1.0)
            self.close_pending = not every()
            return not self.close_pending


class ClosedEngine:
    """What a closed model keeps of an engine: its description and statistics, not its
    resources."""

    def __init__(self, engine):
        self.name, self.inputs, self.outputs = engine.name, engine.inputs, engine.outputs
        self.device = engine.device
        self.streams: list = []
        self.profiler = None
        self.last_host_seconds = engine.last_host_seconds
        self._stats = engine.run_stats()

    def run_stats(self) -> RunStats:
        return self._stats

    def release_cached(self) -> int:
        return 0

    def close(self) -> None:
        pass

    def cancel(self, error: BaseException, wait: bool = True) -> None:
        pass

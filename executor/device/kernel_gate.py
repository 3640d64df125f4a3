"""The kernels running on a device, and the writing over of a lost device's memory, which
waits until none runs.

A device that is lost loses its memory contents: :meth:`VirtualDevice.lose` writes a
pattern over every allocation.  A kernel still running on another stream at that moment
may keep state of its own in device memory (oneDNN keeps pointers in its scratchpad, which
is the task's workspace): written over under it, the process crashes.  So the device
writes over its memory only once no kernel runs on it:

- every kernel passes the gate (:meth:`KernelGate.enter` before it runs,
  :meth:`KernelGate.leave` after);
- once the device is lost (:meth:`KernelGate.lose`) the gate refuses new kernels
  (``DeviceLostError``), and the memory is written over by whoever sees the last running
  kernel leave (at once when none runs);
- a reset (:meth:`KernelGate.reopen`) before that moment drops the writing over: a kernel
  that has not returned by then is stuck, its memory stays in quarantine, and every model
  writes its weights again after a loss anyway.

Cost: a list append and pop and two attribute reads per kernel (no lock: under the GIL a
list's append and pop are atomic, and each side reads the other's flag after writing its
own, so a writing over never starts while a kernel runs); the lock only once a device is
lost.
"""
from __future__ import annotations

import threading
from typing import Callable

from aircc.errors import DeviceLostError


class KernelGate:
    """The kernels running on one device."""

    __slots__ = ("_inside", "lost", "_pending", "_lock", "poisonings")

    def __init__(self):
        self._inside: list[None] = []
        """One entry per kernel running now."""
        self.lost: str | None = None
        """What a refused kernel is told, e.g. ``device 0 is lost (reason)`` (None: the
        device is not lost)."""
        self._pending: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self.poisonings = 0
        """How often the memory was written over (for tests and statistics)."""

    @property
    def running(self) -> int:
        """Kernels running now."""
        return len(self._inside)

    def enter(self) -> None:
        """A kernel starts (DeviceLostError if the device is lost)."""
        self._inside.append(None)
        if self.lost is not None:
            self._inside.pop()
            self._settle()
            raise DeviceLostError(f"{self.lost}: no kernel starts on it until it is reset")

    def leave(self) -> None:
        """A kernel that entered returned."""
        self._inside.pop()
        if self._pending is not None:
            self._settle()

    def lose(self, why: str, poison: Callable[[], None]) -> None:
        """Refuse kernels from now on (telling them ``why``) and call ``poison`` (write over
        the memory) once none runs: now, or when the last running one leaves."""
        with self._lock:
            self.lost = why
            self._pending = poison
        self._settle()

    def reopen(self) -> None:
        """The device was reset: kernels may start again; a writing over still waiting for a
        stuck kernel is dropped."""
        with self._lock:
            self.lost = None
            self._pending = None

    def _settle(self) -> None:
        """Write over the memory if it is due and no kernel runs (no kernel enters meanwhile:
        one that tries waits here for the lock, then is refused)."""
        if self._inside:
            return
        with self._lock:
            if self._pending is None or self._inside:
                return
            poison, self._pending = self._pending, None
            poison()
            self.poisonings += 1

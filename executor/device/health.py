"""A device's state, the faults it has seen, and memory kept from reuse while a stuck
kernel may still write it.

States (after the runtime this project models):

- ``HEALTHY``: found at start-up, answering, and idle;
- ``RUNNING``: healthy with work in flight (a model's run, a copy);
- ``FAULT``: the device stopped answering (a fault raised by a kernel or injected, or
  heartbeats missed: :mod:`.heartbeat`): its memory contents are gone and every
  submission fails with ``DeviceLostError`` until :meth:`VirtualDevice.reset` brings it
  back to ``HEALTHY``;
- ``UNAVAILABLE``: it failed its start-up probe (unhealthy, or answered too late) and
  is never used.

A stream found stuck in a task is not a state: the device replaces the stuck workers
and stays ``HEALTHY`` (the stuck kernel's memory is quarantined, a ``timeout``
:class:`FaultRecord` says what happened).  Callbacks registered with
:meth:`VirtualDevice.on_state_change` hear every change into or out of ``FAULT`` and
``UNAVAILABLE`` (``RUNNING`` comes and goes with every run: read it, it calls nobody).
"""
from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field
from typing import Callable


class DeviceState(str, enum.Enum):
    HEALTHY = "healthy"
    RUNNING = "running"
    FAULT = "fault"
    UNAVAILABLE = "unavailable"

    @property
    def usable(self) -> bool:
        """Can the device take work (HEALTHY or RUNNING)?"""
        return self is DeviceState.HEALTHY or self is DeviceState.RUNNING


@dataclass(frozen=True)
class FaultRecord:
    """One thing that went wrong on the device, for its log (``device.faults``)."""

    kind: str
    """``timeout`` (a stuck stream replaced), ``lost``, ``reset``, ``probe``, ``heartbeat``
    (beats missed: :mod:`.heartbeat`)."""
    detail: str
    at: float = field(default_factory=time.time)


class Quarantine:
    """Memory held back until the streams that may still write it have finished.

    ``release`` runs once, when every one of ``streams`` (retired streams whose worker
    is stuck in a task) has ended; until then the memory stays allocated and nothing
    else can be given it.
    """

    def __init__(self, streams: list, release: Callable[[], None], nbytes: int,
                 on_done: Callable[["Quarantine"], None]):
        self.nbytes = nbytes
        self._left = len(streams)
        self._release, self._on_done = release, on_done
        self._lock = threading.Lock()
        self.done = threading.Event()
        if not streams:
            self._finish()

    def stream_ended(self) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self._finish()

    def _finish(self) -> None:
        try:
            self._release()
        finally:
            self.done.set()
            self._on_done(self)


#: A state-change callback: ``callback(device, old_state, new_state, reason)``.
StateCallback = Callable[[object, DeviceState, DeviceState, str], None]


class HealthMonitor:
    """A device's health (HEALTHY, FAULT or UNAVAILABLE), its runs in flight (RUNNING is
    healthy with work in flight) and the callbacks that hear its changes."""

    def __init__(self, device: object):
        self._device = device
        self.health = DeviceState.HEALTHY
        self._runs: list[None] = []
        """One entry per run in flight (append and pop are atomic: no lock on the hot path)."""
        self._lock = threading.Lock()
        self._callbacks: dict[int, StateCallback] = {}
        self._next_id = 0

    @property
    def state(self) -> DeviceState:
        if self.health is DeviceState.HEALTHY and self.in_flight:
            return DeviceState.RUNNING
        return self.health

    @property
    def in_flight(self) -> int:
        """Runs started and not finished."""
        return len(self._runs)

    def started(self) -> None:
        self._runs.append(None)

    def finished(self) -> None:
        self._runs.pop()

    def on_change(self, callback: StateCallback) -> Callable[[], None]:
        """Call ``callback`` on every change of health; returns a function that removes it."""
        with self._lock:
            key = self._next_id
            self._next_id += 1
            self._callbacks[key] = callback
        return lambda: self._callbacks.pop(key, None)

    def change(self, new: DeviceState, reason: str) -> bool:
        """Set the health to ``new`` and tell the callbacks (False: it already was).  A
        callback that raises is ignored: the device's state must not depend on it."""
        with self._lock:
            old = self.health
            if old is new:
                return False
            self.health = new
            callbacks = list(self._callbacks.values())
        for cb in callbacks:
            try:
                cb(self._device, old, new, reason)
            except Exception:       # a listener's bug must not stop the device's transition
                pass
        return True

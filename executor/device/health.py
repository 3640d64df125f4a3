"""A device's state, the faults it has seen, and memory kept from reuse while a stuck
kernel may still write it.

States (after the runtime this project models):

- ``HEALTHY``: serving work;
- ``FAULT``: a watchdog found a stream stuck in a task; the device replaces the stuck
  workers and goes back to ``HEALTHY`` (the stuck kernel's memory is quarantined);
- ``LOST``: the device stopped answering and its memory contents are gone; every
  submission fails with ``DeviceLostError`` until :meth:`VirtualDevice.reset`.
"""
from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field
from typing import Callable


class DeviceState(str, enum.Enum):
    HEALTHY = "healthy"
    FAULT = "fault"
    LOST = "lost"


@dataclass(frozen=True)
class FaultRecord:
    """One thing that went wrong on the device, for its log (``device.faults``)."""

    kind: str
    """``timeout`` (a stuck stream replaced), ``lost``, ``reset``."""
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

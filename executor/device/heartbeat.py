"""Fault detection: a periodic heartbeat on a device's control processor.

At start-up discovery probes every device once (:mod:`.discovery`).  Afterwards, with
fault detection on (``device.enable_fault_detection(interval, misses)``,
``$AIR_FAULT_DETECTION_MS``, ``airrun --fault-detection MS``), a scheduler thread of the
device queues one *beat* on its control processor every ``interval`` seconds (ticks a
whole interval apart, however late one was).  A beat is a task made once that sets one
attribute; one is out at a time.  A beat still unanswered at the next tick (its
deadline: at least one interval) is a *miss*; ``misses`` in a
row (default 3) put the device in FAULT: a ``heartbeat``
:class:`~.health.FaultRecord`, its state callbacks run (on the scheduler thread), and
a model with a run in flight on it stops that run, which recovers as its policy says
(fail over to a healthy device, reset, or fail).  A device that stops answering is thus
FAULT between ``misses`` and ``misses + 1`` intervals later (``misses`` intervals after
the first beat it leaves unanswered).

A beat answered late after misses ends the count: the device answers again (logged).
It stays FAULT until :meth:`~.device.VirtualDevice.reset` (the heartbeat does not reset
a device by itself).  Misses are not counted while the device is FAULT or UNAVAILABLE,
and are counted again from a reset on: a device reset while it still does not answer
is FAULT again ``misses - 1`` to ``misses`` intervals later.

Cost: one thread per device that sleeps between ticks, and per beat a hand-off to the
control processor's worker (which then spins ``AIRCC_SPIN_US`` before it sleeps); the
control processor has no compute unit, so a beat never waits for a busy device's
kernels nor delays them.  At intervals above the control worker's idle time (0.25 s)
each beat starts that worker again (a thread start).  Measured on a busy device:
docs/runtime.md ("Fault detection").
"""
from __future__ import annotations

import math
import threading
import weakref
from typing import TYPE_CHECKING

from aircc.errors import ConfigError, DeviceError
from aircc.log import get as get_log

from .health import DeviceState

if TYPE_CHECKING:
    from .device import VirtualDevice

#: Seconds between two beats by default (the cost at this interval: docs/runtime.md).
DEFAULT_INTERVAL = 0.1
#: Beats missed in a row that put a device in FAULT by default.
DEFAULT_MISSES = 3
#: The shortest and longest interval allowed (seconds).  On two busy vCPUs a control task
#: waited up to 32 ms for its turn (once 165 ms, docs/runtime.md): beats 10 ms apart
#: faulted a device that was only slow.
MIN_INTERVAL = 0.05
MAX_INTERVAL = 3600.0
#: Seconds ``stop()`` waits for the scheduler thread (it may be running callbacks).
STOP_TIMEOUT = 5.0

_start_lock = threading.Lock()


def check_interval(seconds: object, what: str = "fault detection interval") -> float:
    """``seconds`` as a float if it is a number from :data:`MIN_INTERVAL` to
    :data:`MAX_INTERVAL`; else ValueError naming ``what`` and the range."""
    ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) \
        and math.isfinite(seconds) and MIN_INTERVAL <= seconds <= MAX_INTERVAL
    if not ok:
        raise ValueError(f"{what} must be a number of seconds from {MIN_INTERVAL:g} to "
                         f"{MAX_INTERVAL:g} ({MIN_INTERVAL * 1e3:.0f} to "
                         f"{MAX_INTERVAL * 1e3:.0f} ms), got {seconds!r}")
    return float(seconds)


def interval_from_ms(text: str, what: str) -> float | None:
    """A heartbeat interval given in milliseconds as text (``$AIR_FAULT_DETECTION_MS``,
    ``--fault-detection``) -> seconds; ``0`` or ``off``: None (fault detection off).
    ValueError naming ``what`` and the values it allows."""
    raw = text.strip().lower()
    try:
        ms = 0.0 if raw == "off" else float(raw)
    except ValueError:
        ms = math.nan
    if ms == 0:
        return None
    if not (math.isfinite(ms) and MIN_INTERVAL * 1e3 <= ms <= MAX_INTERVAL * 1e3):
        raise ValueError(f"{what}={text!r}: expected a heartbeat interval in milliseconds from "
                         f"{MIN_INTERVAL * 1e3:.0f} to {MAX_INTERVAL * 1e3:.0f} (e.g. "
                         f"{DEFAULT_INTERVAL * 1e3:g}), or 0 / off")
    return ms / 1e3


def hang_control(device: "VirtualDevice", seconds: float,
                 release: threading.Event | None = None) -> threading.Event:
    """Make ``device``'s control processor stop answering for ``seconds`` or until the
    returned event (``release``, if given) is set: a drill for fault detection.  The
    ``unresponsive`` fault (:mod:`aircc.faults`) does this and hangs its kernel too."""
    release = release if release is not None else threading.Event()
    device.run_on_control(lambda: release.wait(seconds))
    return release


def start_heartbeat(device: "VirtualDevice", interval: float = DEFAULT_INTERVAL,
                    misses: int = DEFAULT_MISSES) -> "Heartbeat":
    """``device``'s heartbeat (``device.fault_detection``) at ``interval`` and ``misses``: the
    one running, reconfigured, or a new one.  DeviceError on a closed device, ConfigError
    on a bad value."""
    if device.closed:
        raise DeviceError(f"device {device.id} is closed; fault detection needs an open device")
    with _start_lock:
        beat = device.fault_detection
        if beat is not None and beat.running:
            beat.configure(interval, misses)
        else:
            beat = device.fault_detection = Heartbeat(device, interval, misses)
    return beat


class Heartbeat:
    """A device's fault detection (see the module doc): made by
    ``device.enable_fault_detection``, ended by ``device.disable_fault_detection`` or
    ``device.close``.

    ``sent`` and ``answered`` count beats; ``missed``: misses in a row now;
    ``missed_total``: every miss; ``faults``: the FAULTs it raised."""

    def __init__(self, device: "VirtualDevice", interval: float = DEFAULT_INTERVAL,
                 misses: int = DEFAULT_MISSES):
        self.interval = DEFAULT_INTERVAL
        self.misses = DEFAULT_MISSES
        self.configure(interval, misses)
        self.sent = self.answered = 0
        self.missed = self.missed_total = self.faults = 0
        self._device = weakref.ref(device)      # the thread does not keep a device alive
        self._name = device.name
        self._beat = self._answer                # made once: a beat allocates nothing more
        self._stop = threading.Lock()
        self._stop.acquire()                     # released by stop(): the scheduler ends
        self._stopped = False
        self._late = False                       # a beat passed its deadline unanswered
        self._resets = device.stats["resets"]
        self._thread = threading.Thread(target=self._loop, name=f"{device.name}-heartbeat",
                                        daemon=True)
        self._thread.start()

    def configure(self, interval: float = DEFAULT_INTERVAL, misses: int = DEFAULT_MISSES) -> None:
        """Change the interval (seconds) and the misses that fault the device (from the
        next tick on); ConfigError naming what is wrong."""
        try:
            interval = check_interval(interval)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if isinstance(misses, bool) or not isinstance(misses, int) or not 1 <= misses <= 1000:
            raise ConfigError(f"fault detection misses must be a whole number from 1 to 1000 "
                              f"(beats missed in a row that put the device in FAULT), "
                              f"got {misses!r}")
        self.interval, self.misses = interval, misses

    @property
    def running(self) -> bool:
        """Is the scheduler thread alive (not stopped, its device not closed)?"""
        return self._thread.is_alive() and not self._stopped

    @property
    def answering(self) -> bool:
        """Did the device answer its last beat (or has none been sent yet)?"""
        return self.answered == self.sent

    def stats(self) -> dict:
        """``interval``, ``misses``, ``sent``, ``answered``, ``missed`` (in a row now),
        ``missed_total``, ``faults``, ``running``."""
        return {"interval": self.interval, "misses": self.misses, "sent": self.sent,
                "answered": self.answered, "missed": self.missed,
                "missed_total": self.missed_total, "faults": self.faults,
                "running": self.running}

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """End the scheduler thread (a beat out stays queued); False if it is still busy
        (in a state callback) after ``timeout`` seconds."""
        if not self._stopped:
            self._stopped = True
            self._stop.release()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive() or self._thread is threading.current_thread()

    # ------------------------------------------------------------ the scheduler
    def _answer(self) -> None:
        """The beat, on the control processor: the one task it runs."""
        self.answered = self.sent

    def _loop(self) -> None:
        wait = self._stop.acquire
        while not wait(timeout=self.interval):   # a whole interval from one tick to the next:
            device = self._device()              # a late tick never shortens a beat's deadline
            if device is None or device.closed:
                return
            self._tick(device)
            device = None

    def _tick(self, device: "VirtualDevice") -> None:
        """Count a miss if the last beat is still out (FAULT after ``misses``), else send
        the next one."""
        resets = device.stats["resets"]
        if resets != self._resets:                # misses are counted again from a reset on
            self._resets, self.missed = resets, 0
        if self.answered != self.sent:
            self._late = True
            if device.health.health is not DeviceState.HEALTHY:
                return
            self.missed += 1
            self.missed_total += 1
            if self.missed >= self.misses and device.enter_fault(
                    "heartbeat", f"device {device.id} missed {self.missed} heartbeats in a row "
                                 f"({self.interval * 1e3:g} ms apart): its control processor "
                                 f"does not answer"):
                self.faults += 1
                get_log("devices").warning("device %d (%s) is FAULT: %d heartbeats missed",
                                           device.id, self._name, self.missed)
            return
        if self._late:
            self._late = False
            get_log("devices").info("device %d (%s) answers its heartbeat again (%s)",
                                    device.id, self._name, device.state.value)
        self.missed = 0
        self.sent += 1
        device.run_on_control(self._beat)

"""Events in the CUDA sense, for the host: record on a stream, wait on another.

:meth:`DeviceEvent.record` queues a record on a stream and returns its
:class:`EventMark`; :func:`stream_wait` makes a stream wait for a mark (or for an
event's latest record issued before the call: a wait for an event never recorded does
not block); the host waits with ``synchronize`` and asks with ``query``.  A mark can
be reserved before it is issued (:meth:`DeviceEvent.reserve`), so a consumer's wait
can be queued before the producer's work and its record.

Each record has its own stream :class:`~.stream.Event` (recorded as generation 1):
records of one event issued on different streams may run in any order, and a waiter
must be released by its own record, not by a later one that happened to run first
(which a shared event counting generations would do).  A wait runs on the waiting
stream's worker and gives its compute unit back meanwhile; after
:data:`WAIT_TIMEOUT` seconds it fails, and the error is kept for the stream
(:func:`take_errors`) instead of blocking the stream for ever.
"""
from __future__ import annotations

import itertools
import threading
import weakref

from aircc.errors import DeviceError, StreamSyncTimeoutError

from .stream import Event, Stream

#: Seconds a stream waits for an event's record before the wait fails.
WAIT_TIMEOUT = 60.0

_ids = itertools.count(1)
_errors_lock = threading.Lock()
_errors: "weakref.WeakKeyDictionary[Stream, list[BaseException]]" = weakref.WeakKeyDictionary()


def note_error(stream: Stream, error: BaseException) -> None:
    """Keep ``error`` (of work that failed on ``stream``) for :func:`take_errors`."""
    with _errors_lock:
        _errors.setdefault(stream, []).append(error)


def take_errors(stream: Stream) -> list[BaseException]:
    """The errors kept for ``stream`` since the last call (oldest first)."""
    with _errors_lock:
        return _errors.pop(stream, [])


def check_open(stream: Stream, what: str) -> None:
    """DeviceError unless ``stream`` is a stream that still takes work."""
    if not isinstance(stream, Stream):
        raise DeviceError(f"{what}: expected a stream, got {type(stream).__name__}")
    if stream.retired or not stream.alive:
        raise DeviceError(f"{what}: stream {stream.id} ({stream.name}) is closed")


class EventMark:
    """One record of a :class:`DeviceEvent`: reserved by the host, issued on a stream
    (:attr:`stream`), done when that stream reaches it."""

    def __init__(self, owner: "DeviceEvent", index: int):
        self.owner = owner
        self.index = index
        self.event = Event(index)
        self.stream: Stream | None = None

    def __repr__(self) -> str:
        where = f"on stream {self.stream.id}" if self.stream is not None else "not issued"
        return f"<record #{self.index} of event '{self.owner.name}', {where}>"

    @property
    def issued(self) -> bool:
        return self.stream is not None

    def query(self) -> bool:
        """Has the record run?"""
        return self.event.generation >= 1

    def synchronize(self, timeout: float | None = None) -> None:
        """Block the host until the record has run."""
        if not self.issued:
            raise DeviceError(f"{self!r}: nothing to wait for until it is recorded on a stream")
        if not self.event.wait(1, cancelled=lambda: False, timeout=timeout):
            raise StreamSyncTimeoutError(f"{self!r} did not run within {timeout} s")


class DeviceEvent:
    """An event: recorded on streams, waited for by streams and the host."""

    def __init__(self, name: str = ""):
        self.name = name or f"event{next(_ids)}"
        self._lock = threading.Lock()
        self._reserved = 0
        self.latest: EventMark | None = None
        """The record issued last (what a wait for the event waits for); None: never recorded."""

    def reserve(self) -> EventMark:
        """A record to issue later with :meth:`record`; streams may be made to wait for it
        before then."""
        with self._lock:
            self._reserved += 1
            return EventMark(self, self._reserved)

    def record(self, stream: Stream, mark: EventMark | None = None) -> EventMark:
        """Queue a record on ``stream`` (``mark``: one reserved before); it runs after
        everything queued on the stream so far.  Returns the mark."""
        check_open(stream, f"record of event '{self.name}'")
        with self._lock:
            if mark is None:
                self._reserved += 1
                mark = EventMark(self, self._reserved)
            elif mark.owner is not self:
                raise DeviceError(f"{mark!r} belongs to another event than '{self.name}'")
            elif mark.issued:
                raise DeviceError(f"{mark!r} is recorded already; reserve a new one")
            mark.stream = stream
            self.latest = mark
        event = mark.event
        stream.submit(lambda: event.record(1))
        return mark

    def query(self) -> bool:
        """Has the latest record run (True if there is none)?"""
        mark = self.latest
        return mark is None or mark.query()

    def synchronize(self, timeout: float | None = None) -> None:
        """Block the host until the latest record has run (at once if there is none)."""
        mark = self.latest
        if mark is not None:
            mark.synchronize(timeout)


def stream_wait(stream: Stream, what: DeviceEvent | EventMark,
                timeout: float = WAIT_TIMEOUT) -> EventMark | None:
    """Make ``stream`` wait, before the work queued on it after this call, for a record:
    ``what``'s latest issued now if it is an event (none: no wait, returns None), or the
    mark ``what`` (issued or only reserved).  A wait longer than ``timeout`` seconds ends
    with an error kept for the stream (:func:`take_errors`)."""
    check_open(stream, "stream_wait")
    mark = what.latest if isinstance(what, DeviceEvent) else what
    if mark is None:
        return None
    if not isinstance(mark, EventMark):
        raise DeviceError(f"stream_wait: expected a DeviceEvent or an EventMark, got "
                          f"{type(what).__name__}")
    event = mark.event

    def wait():
        if not event.wait(1, cancelled=lambda: False, timeout=timeout):
            note_error(stream, DeviceError(
                f"stream {stream.id} ({stream.name}) waited {timeout} s for {mark!r}, which "
                f"has not run"))
    stream.submit(wait)
    return mark

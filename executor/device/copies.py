"""Copies between host and device memory, within a device and between devices.

Synchronous copies (:func:`copy_h2d`, :func:`copy_d2h`, :func:`copy_d2d`,
:func:`copy_peer`) return when the bytes have arrived.  Without a stream they copy at
once on the calling thread, ordered with nothing queued on the device's streams; with
one they are queued on it (after its earlier work) and waited for.

Asynchronous copies (``*_async``) queue a task on a stream and return a
:class:`CopyHandle` at once.  Host bytes go through a buffer of the pinned host pool
(:mod:`.pinned`): an H2D copy stages its source before it returns, so the caller may
reuse its array at once; a D2H copy fills the caller's array when the stream reaches
it, so the caller synchronizes (the handle, the stream, an event) before reading it.
A peer copy stages through a pinned buffer too: the source stream copies device ->
pinned and records an event; the destination stream, if given, waits for that record
and copies pinned -> device (without one, the source stream does both halves).

Streams are ordered with each other by events (:mod:`.events`).
A copy that fails on its stream leaves the worker running: the error is kept, and
``handle.wait()`` and :func:`synchronize` of that stream raise it.  Bad arguments
(ranges outside device memory, a size the host array does not have, a non-contiguous
array, a closed or lost device, a stream of another device) raise ``DeviceError`` at
the call.  :func:`copy_stats` counts calls and bytes per device, direction and mode.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from aircc.errors import AirccError, DeviceError, StreamSyncTimeoutError

from .copy_counters import (DIRECTIONS, ModelCopies, copy_stats,  # noqa: F401
                            count, count_failed, reset_copy_stats)
from .events import WAIT_TIMEOUT, DeviceEvent, check_open, note_error, take_errors
from .pinned import pinned_pool
from .stream import Stream

_halves_lock = threading.Lock()



class CopyHandle:
    """An issued copy: :meth:`query` says whether it has run, :meth:`wait` blocks until it
    has and raises its error, if it failed."""

    def __init__(self, what: str, nbytes: int):
        self.what = what
        self.nbytes = nbytes
        self.error: BaseException | None = None
        self.done = threading.Event()

    def query(self) -> bool:
        return self.done.is_set()

    def wait(self, timeout: float | None = None) -> None:
        if not self.done.wait(timeout):
            raise StreamSyncTimeoutError(f"{self.what} did not finish within {timeout} s")
        if self.error is not None:
            raise self.error


# ------------------------------------------------------------------ checks
def _check_range(device, offset: int, nbytes: int, what: str, role: str) -> None:
    cap = device.memory.capacity
    if not isinstance(offset, (int, np.integer)) or isinstance(offset, bool):
        raise DeviceError(f"{what}: the {role} offset must be an integer, got {offset!r}")
    if offset < 0 or nbytes < 0 or offset + nbytes > cap:
        raise DeviceError(f"{what}: the {role} range [{offset}, {offset + nbytes}) ({nbytes} bytes "
                          f"at offset {offset}) is outside device {device.id}'s memory of "
                          f"{cap} bytes")


def _host_bytes(arr, what: str, nbytes: int | None, writable: bool) -> np.ndarray:
    """``arr``'s bytes as a flat uint8 view."""
    if not isinstance(arr, np.ndarray):
        raise DeviceError(f"{what}: the host side must be a numpy array, got {type(arr).__name__}")
    desc = f"host array (dtype {arr.dtype}, shape {arr.shape})"
    if arr.dtype.hasobject:
        raise DeviceError(f"{what}: {desc} holds Python objects, which have no bytes to copy")
    if not arr.flags.c_contiguous:
        raise DeviceError(f"{what}: {desc} is not C-contiguous (strides {arr.strides}); pass "
                          f"np.ascontiguousarray(...) of it")
    if writable and not arr.flags.writeable:
        raise DeviceError(f"{what}: {desc} is read-only")
    if nbytes is not None and nbytes != arr.nbytes:
        raise DeviceError(f"{what}: {nbytes} bytes asked, but the {desc} holds {arr.nbytes} "
                          f"bytes ({arr.size} x {arr.dtype.itemsize})")
    return arr.reshape(-1).view(np.uint8)


def _check_stream(device, stream: Stream, what: str) -> None:
    check_open(stream, what)
    if stream not in device.streams:
        raise DeviceError(f"{what}: stream {stream.id} ({stream.name}) is not a stream of device "
                          f"{device.id} (make one with device.create_stream())")


# ------------------------------------------------------------------ running
def _fail(handle: CopyHandle, stream: Stream, device, error: BaseException) -> None:
    if not isinstance(error, AirccError):
        wrapped = DeviceError(f"{handle.what} failed: {type(error).__name__}: {error}")
        wrapped.__cause__ = error
        error = wrapped
    if handle.error is None:
        handle.error = error
    count_failed(device)
    note_error(stream, error)


def _submit(stream: Stream, device, handle: CopyHandle, body: Callable[[], None],
            then: Callable[[], None] | None = None, done: bool = True) -> None:
    """Queue ``body`` on ``stream``; its error goes to ``handle``; ``then`` runs after it
    either way, and the handle is done after that (unless ``done`` is False)."""
    def task():
        try:
            body()
        except BaseException as e:     # the worker must go on; the caller gets the error
            _fail(handle, stream, device, e)
        finally:
            if then is not None:
                then()
            if done:
                handle.done.set()
    stream.submit(task)


def synchronize(stream: Stream, timeout: float | None = None) -> None:
    """Wait until ``stream`` ran everything queued so far, then raise the first error of a
    copy (or an event wait) that failed on it since the last call."""
    stream.synchronize(timeout)
    errors = take_errors(stream)
    if errors:
        raise errors[0]


def _staging(nbytes: int) -> tuple[np.ndarray, Callable[[], None]]:
    """``nbytes`` of a pinned buffer, and the function that gives the buffer back."""
    pool = pinned_pool()
    buf = pool.acquire(nbytes)
    return buf.array[:nbytes], lambda: pool.give_back(buf)


# ------------------------------------------------------------------ host <-> device
def _h2d(device, dst_offset: int, src: np.ndarray, stream: Stream | None, nbytes: int | None,
         staged: bool) -> CopyHandle | None:
    what = f"h2d copy to device {device.id} offset {dst_offset}"
    device.check_usable()
    flat = _host_bytes(src, what, nbytes, writable=False)
    n = flat.size
    _check_range(device, dst_offset, n, what, "destination")
    mem = device.memory.data
    if stream is None:
        mem[dst_offset:dst_offset + n] = flat
        count(device, "h2d", "sync", n)
        return None
    _check_stream(device, stream, what)
    handle = CopyHandle(what, n)
    then = None
    if staged:
        host, (flat, then) = flat, _staging(n)
        flat[:] = host
    count(device, "h2d", "async" if staged else "sync", n, n if staged else 0)

    def body():
        device.check_usable()
        mem[dst_offset:dst_offset + n] = flat
    _submit(stream, device, handle, body, then)
    return handle


def copy_h2d(device, dst_offset: int, src: np.ndarray, stream: Stream | None = None,
             nbytes: int | None = None, timeout: float | None = None) -> None:
    """Copy ``src``'s bytes to device memory at ``dst_offset``; returns when they are there
    (with ``stream``: after the stream's earlier work).  ``nbytes``, if given, must be
    ``src.nbytes``."""
    handle = _h2d(device, dst_offset, src, stream, nbytes, staged=False)
    if handle is not None:
        handle.wait(timeout)


def copy_h2d_async(device, dst_offset: int, src: np.ndarray, stream: Stream,
                   nbytes: int | None = None) -> CopyHandle:
    """Queue a copy of ``src``'s bytes to device memory at ``dst_offset`` on ``stream``.  The
    bytes are staged in a pinned buffer before this returns: ``src`` may be reused at once."""
    return _h2d(device, dst_offset, src, stream, nbytes, staged=True)


def _d2h(device, src_offset: int, dst: np.ndarray, stream: Stream | None, nbytes: int | None,
         staged: bool) -> CopyHandle | None:
    what = f"d2h copy from device {device.id} offset {src_offset}"
    device.check_usable()
    flat = _host_bytes(dst, what, nbytes, writable=True)
    n = flat.size
    _check_range(device, src_offset, n, what, "source")
    mem = device.memory.data
    if stream is None:
        flat[:] = mem[src_offset:src_offset + n]
        count(device, "d2h", "sync", n)
        return None
    _check_stream(device, stream, what)
    handle = CopyHandle(what, n)
    count(device, "d2h", "async" if staged else "sync", n, n if staged else 0)
    staging, then = _staging(n) if staged else (flat, None)

    def body():
        device.check_usable()
        staging[:] = mem[src_offset:src_offset + n]
        if staging is not flat:
            flat[:] = staging
    _submit(stream, device, handle, body, then)
    return handle


def copy_d2h(device, src_offset: int, dst: np.ndarray, stream: Stream | None = None,
             nbytes: int | None = None, timeout: float | None = None) -> None:
    """Copy ``dst.nbytes`` bytes of device memory at ``src_offset`` into ``dst``; returns
    when they are there (with ``stream``: after the stream's earlier work)."""
    handle = _d2h(device, src_offset, dst, stream, nbytes, staged=False)
    if handle is not None:
        handle.wait(timeout)


def copy_d2h_async(device, src_offset: int, dst: np.ndarray, stream: Stream,
                   nbytes: int | None = None) -> CopyHandle:
    """Queue a copy of device memory at ``src_offset`` into ``dst`` (through a pinned
    buffer) on ``stream``.  ``dst`` is filled when the stream reaches the copy: wait for
    the handle, the stream or an event recorded after it before reading ``dst``."""
    return _d2h(device, src_offset, dst, stream, nbytes, staged=True)


# ------------------------------------------------------------------ device <-> device
def _d2d(device, dst_offset: int, src_offset: int, nbytes: int, stream: Stream | None,
         mode: str) -> CopyHandle | None:
    what = f"d2d copy on device {device.id} from offset {src_offset} to {dst_offset}"
    device.check_usable()
    nbytes = int(nbytes)
    _check_range(device, src_offset, nbytes, what, "source")
    _check_range(device, dst_offset, nbytes, what, "destination")
    mem = device.memory.data

    def body():
        device.check_usable()
        mem[dst_offset:dst_offset + nbytes] = mem[src_offset:src_offset + nbytes]
    if stream is not None:
        _check_stream(device, stream, what)
    count(device, "d2d", mode, nbytes)
    if stream is None:
        body()
        return None
    handle = CopyHandle(what, nbytes)
    _submit(stream, device, handle, body)
    return handle


def copy_d2d(device, dst_offset: int, src_offset: int, nbytes: int,
             stream: Stream | None = None, timeout: float | None = None) -> None:
    """Copy ``nbytes`` of device memory from ``src_offset`` to ``dst_offset`` (the ranges may
    overlap: the destination gets the source's bytes as they were)."""
    handle = _d2d(device, dst_offset, src_offset, nbytes, stream, "sync")
    if handle is not None:
        handle.wait(timeout)


def copy_d2d_async(device, dst_offset: int, src_offset: int, nbytes: int,
                   stream: Stream) -> CopyHandle:
    """Queue :func:`copy_d2d` on ``stream``."""
    return _d2d(device, dst_offset, src_offset, nbytes, stream, "async")


def _peer_checks(src_device, src_offset, dst_device, dst_offset, nbytes, src_stream,
                 dst_stream) -> str:
    what = (f"peer copy of {nbytes} bytes from device {src_device.id} offset {src_offset} "
            f"to device {dst_device.id} offset {dst_offset}")
    src_device.check_usable()
    dst_device.check_usable()
    _check_range(src_device, src_offset, nbytes, what, "source")
    _check_range(dst_device, dst_offset, nbytes, what, "destination")
    if src_stream is not None:
        _check_stream(src_device, src_stream, what)
    if dst_stream is not None:
        _check_stream(dst_device, dst_stream, what)
    return what


def copy_peer_async(src_device, src_offset: int, dst_device, dst_offset: int, nbytes: int,
                    src_stream: Stream, dst_stream: Stream | None = None) -> CopyHandle:
    """Queue a copy of ``nbytes`` from ``src_device`` to ``dst_device``, staged through a
    pinned buffer.  ``src_stream`` copies device -> pinned; with ``dst_stream`` it records
    an event that ``dst_stream`` waits for before it copies pinned -> device (work queued
    on ``dst_stream`` later sees the bytes), without one ``src_stream`` does both."""
    return _peer(src_device, src_offset, dst_device, dst_offset, int(nbytes), src_stream,
                 dst_stream, "async")


def _peer(src_device, src_offset, dst_device, dst_offset, nbytes, src_stream, dst_stream,
          mode: str) -> CopyHandle:
    what = _peer_checks(src_device, src_offset, dst_device, dst_offset, nbytes, src_stream,
                        dst_stream)
    handle = CopyHandle(what, nbytes)
    staging, give_back = _staging(nbytes)
    src_mem, dst_mem = src_device.memory.data, dst_device.memory.data
    count(src_device, "peer_out", mode, nbytes, nbytes)
    count(dst_device, "peer_in", mode, nbytes)

    def to_pinned():
        src_device.check_usable()
        staging[:] = src_mem[src_offset:src_offset + nbytes]

    def to_device():
        dst_device.check_usable()
        dst_mem[dst_offset:dst_offset + nbytes] = staging

    if dst_stream is None:
        def both():
            to_pinned()
            to_device()
        _submit(src_stream, src_device, handle, both, give_back)
        return handle

    halves = [2]                 # the buffer goes back once both halves have run

    def half_done():
        with _halves_lock:
            halves[0] -= 1
            last = halves[0] == 0
        if last:
            give_back()
    _submit(src_stream, src_device, handle, to_pinned, half_done, done=False)
    staged = DeviceEvent(f"peer copy {src_device.id}->{dst_device.id}").record(src_stream)

    def second():
        if not staged.event.wait(1, cancelled=lambda: False, timeout=WAIT_TIMEOUT):
            raise DeviceError(f"{what}: the destination stream waited {WAIT_TIMEOUT} s for the "
                              f"source stream {src_stream.id}, which has not copied its half")
        if handle.error is None:
            to_device()
    _submit(dst_stream, dst_device, handle, second, half_done)
    return handle


def copy_peer(src_device, src_offset: int, dst_device, dst_offset: int, nbytes: int,
              src_stream: Stream | None = None, dst_stream: Stream | None = None,
              timeout: float | None = None) -> None:
    """Copy ``nbytes`` from ``src_device`` to ``dst_device``; returns when they are there.
    Without streams the bytes are copied at once; with ``src_stream`` (and maybe
    ``dst_stream``) as :func:`copy_peer_async`, then waited for."""
    nbytes = int(nbytes)
    if src_stream is None and dst_stream is not None:
        raise DeviceError("copy_peer with a dst_stream needs a src_stream too")
    if src_stream is not None:
        _peer(src_device, src_offset, dst_device, dst_offset, nbytes, src_stream, dst_stream,
              "sync").wait(timeout)
        return
    _peer_checks(src_device, src_offset, dst_device, dst_offset, nbytes, None, None)
    dst_device.memory.data[dst_offset:dst_offset + nbytes] = \
        src_device.memory.data[src_offset:src_offset + nbytes]
    count(src_device, "peer_out", "sync", nbytes)
    count(dst_device, "peer_in", "sync", nbytes)


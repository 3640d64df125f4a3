"""Pinned host memory: page-locked staging buffers for copies, cached by size class.

An asynchronous copy between host and device is staged through a pinned buffer: the
host bytes are copied into it at once (so the caller may reuse its array), and the
stream moves them on later.  A buffer is an anonymous ``mmap`` region locked with
``mlock`` (libc, through ctypes), so the OS never pages it out.  Where the OS refuses
(``RLIMIT_MEMLOCK`` reached, no permission, no ``mlock`` on this OS) the buffer stays
pageable: the pool works on and says why (:attr:`PinnedHostPool.fallback_reason`).

Sizes are rounded up to a power of two, at least :data:`MIN_BUFFER_BYTES`.  A buffer
given back is cached for the next request of its class, up to ``max_cached_bytes``
(the least recently given back go first); :meth:`PinnedHostPool.release` unlocks and
unmaps the cache.  Thread-safe; one pool per process (:func:`pinned_pool`).
"""
from __future__ import annotations

import collections
import ctypes
import ctypes.util
import errno
import functools
import mmap
import os
import sys
import threading

import numpy as np

from aircc.errors import DeviceError

#: The smallest buffer (one page): every request is rounded up to a power of two from here.
MIN_BUFFER_BYTES = 4096
#: Bytes of free buffers a pool keeps for reuse by default.
DEFAULT_MAX_CACHED_BYTES = 64 << 20


def size_class(nbytes: int) -> int:
    """The buffer size that serves a request of ``nbytes``: the next power of two, at
    least :data:`MIN_BUFFER_BYTES`."""
    n = max(int(nbytes), MIN_BUFFER_BYTES)
    return 1 << (n - 1).bit_length()


@functools.lru_cache(maxsize=1)
def _libc():
    """(libc with mlock/munlock, "") or (None, why page locking is unavailable)."""
    if not hasattr(mmap, "MAP_ANONYMOUS") or sys.platform.startswith("win"):
        return None, f"page locking needs mlock, which {sys.platform} does not have"
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        for name in ("mlock", "munlock"):
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            fn.restype = ctypes.c_int
    except (OSError, AttributeError) as e:
        return None, f"page locking needs mlock from libc, which could not be loaded ({e})"
    return lib, ""


def memlock_limit() -> str:
    """This process's ``RLIMIT_MEMLOCK`` as text (soft and hard limit, in bytes)."""
    try:
        import resource
    except ImportError:
        return "RLIMIT_MEMLOCK unknown (no resource module)"
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)

    def text(v: int) -> str:
        return "unlimited" if v == resource.RLIM_INFINITY else f"{v} bytes"
    return f"RLIMIT_MEMLOCK is {text(soft)} (hard limit {text(hard)})"


def _lock_failure(nbytes: int, err: int) -> str:
    name = errno.errorcode.get(err, str(err))
    cause = f"mlock of {nbytes} bytes failed with {name} ({os.strerror(err)})"
    if err in (errno.ENOMEM, errno.EPERM, errno.EAGAIN):
        return (f"{cause}: {memlock_limit()} and the process lacks CAP_IPC_LOCK; raise the "
                f"limit (ulimit -l) to page-lock staging buffers; they stay pageable")
    return f"{cause}; staging buffers stay pageable"


class PinnedBuffer:
    """``capacity`` bytes of host memory from an anonymous mapping, page-locked when
    :attr:`locked`.  :attr:`array` is the whole buffer as uint8."""

    def __init__(self, capacity: int, lock: bool):
        self.capacity = capacity
        try:
            self._map = mmap.mmap(-1, capacity)
        except OSError as e:
            raise DeviceError(f"the pinned host pool could not map {capacity} bytes: {e}") from None
        self.array = np.frombuffer(self._map, dtype=np.uint8)
        self.locked = False
        self.lock_error = ""
        """Why the buffer is not page-locked ("" when it is, or when locking was off)."""
        self.in_use = False
        if lock:
            lib, why = _libc()
            if lib is None:
                self.lock_error = why
            elif lib.mlock(ctypes.c_void_p(self.address), ctypes.c_size_t(capacity)) == 0:
                self.locked = True
            else:
                self.lock_error = _lock_failure(capacity, ctypes.get_errno())

    @property
    def address(self) -> int:
        return self.array.ctypes.data

    def close(self) -> None:
        """Unlock and unmap (a view of :attr:`array` still alive keeps the mapping until
        it goes)."""
        if self.array is None:
            return
        if self.locked:
            _libc()[0].munlock(ctypes.c_void_p(self.address), ctypes.c_size_t(self.capacity))
            self.locked = False
        self.array = None
        try:
            self._map.close()
        except BufferError:
            pass


class PinnedHostPool:
    """Staging buffers by size class, cached up to ``max_cached_bytes``.

    ``lock_pages=False`` hands out pageable buffers (what the pool falls back to when the
    OS refuses to lock)."""

    def __init__(self, max_cached_bytes: int = DEFAULT_MAX_CACHED_BYTES, lock_pages: bool = True):
        if max_cached_bytes < 0:
            raise DeviceError(f"max_cached_bytes must be >= 0, got {max_cached_bytes}")
        self.max_cached_bytes = int(max_cached_bytes)
        self.lock_pages = lock_pages
        self._lock = threading.Lock()
        self._cached: dict[int, list[PinnedBuffer]] = {}
        self._lru: "collections.OrderedDict[int, PinnedBuffer]" = collections.OrderedDict()
        self._reserved: set[int] = set()       # ids of every buffer the pool holds
        self._pageable: dict[int, str] = {}    # id -> why, of held buffers that are not locked
        self._reason = "" if lock_pages else ("page locking is off (lock_pages=False): "
                                               "staging buffers are pageable")
        if lock_pages and _libc()[0] is None:
            self._reason = _libc()[1]
        self.buffers = 0
        self.reserved_bytes = 0
        self.in_use_bytes = 0
        self.cached_bytes = 0
        self.locked_bytes = 0
        self.peak_reserved_bytes = 0
        self.peak_in_use_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    # ------------------------------------------------------------- state
    @property
    def page_locked(self) -> bool:
        """Are the pool's buffers page-locked: locking is on and works, and every buffer it
        holds now is locked."""
        with self._lock:
            return self._page_locked()

    def _page_locked(self) -> bool:
        return self.lock_pages and _libc()[0] is not None and not self._pageable

    @property
    def fallback_reason(self) -> str:
        """Why buffers are pageable ("" while :attr:`page_locked`): the mlock error with the
        memlock limit, or that locking is off or unavailable."""
        with self._lock:
            return "" if self._page_locked() else self._reason

    # ------------------------------------------------------------- buffers
    def acquire(self, nbytes: int) -> PinnedBuffer:
        """A buffer of at least ``nbytes`` (its size class), from the cache if one is free."""
        size = size_class(nbytes)
        with self._lock:
            free = self._cached.get(size)
            if free:
                buf = free.pop()
                del self._lru[id(buf)]
                self.cached_bytes -= size
                self.hits += 1
                self._hand_out(buf)
                return buf
            self.misses += 1
        buf = PinnedBuffer(size, self.lock_pages)      # outside the lock: mlock faults pages in
        with self._lock:
            self.buffers += 1
            self.reserved_bytes += size
            self.peak_reserved_bytes = max(self.peak_reserved_bytes, self.reserved_bytes)
            self._reserved.add(id(buf))
            if buf.locked:
                self.locked_bytes += size
            elif self.lock_pages:
                self._pageable[id(buf)] = buf.lock_error
                self._reason = buf.lock_error
            self._hand_out(buf)
        return buf

    def _hand_out(self, buf: PinnedBuffer) -> None:
        buf.in_use = True
        self.in_use_bytes += buf.capacity
        self.peak_in_use_bytes = max(self.peak_in_use_bytes, self.in_use_bytes)

    def give_back(self, buf: PinnedBuffer) -> None:
        """Return ``buf`` for reuse (cached, or unmapped when the cache is full)."""
        close = []
        with self._lock:
            if id(buf) not in self._reserved or not buf.in_use:
                raise DeviceError(f"pinned buffer of {buf.capacity} bytes given back twice, or "
                                  f"to a pool it does not belong to")
            buf.in_use = False
            self.in_use_bytes -= buf.capacity
            if buf.capacity > self.max_cached_bytes:
                close.append(buf)
            else:
                while self.cached_bytes + buf.capacity > self.max_cached_bytes:
                    _, old = self._lru.popitem(last=False)
                    self._cached[old.capacity].remove(old)
                    self.cached_bytes -= old.capacity
                    self.evictions += 1
                    close.append(old)
                self._cached.setdefault(buf.capacity, []).append(buf)
                self._lru[id(buf)] = buf
                self.cached_bytes += buf.capacity
            for b in close:
                self._forget(b)
        for b in close:
            b.close()

    def _forget(self, buf: PinnedBuffer) -> None:
        self._reserved.discard(id(buf))
        self._pageable.pop(id(buf), None)
        self.buffers -= 1
        self.reserved_bytes -= buf.capacity
        if buf.locked:
            self.locked_bytes -= buf.capacity

    def release(self) -> int:
        """Unlock and unmap every cached buffer; returns the bytes given back to the OS."""
        with self._lock:
            bufs = list(self._lru.values())
            self._lru.clear()
            self._cached.clear()
            self.cached_bytes = 0
            for b in bufs:
                self._forget(b)
        for b in bufs:
            b.close()
        return sum(b.capacity for b in bufs)

    def stats(self) -> dict:
        """buffers held, bytes reserved / in use / cached / locked, their peaks, cache hits
        and misses, evictions, and whether buffers are page-locked (with the fallback
        reason when not)."""
        with self._lock:
            return {"buffers": self.buffers, "reserved_bytes": self.reserved_bytes,
                    "in_use_bytes": self.in_use_bytes, "cached_bytes": self.cached_bytes,
                    "locked_bytes": self.locked_bytes,
                    "peak_reserved_bytes": self.peak_reserved_bytes,
                    "peak_in_use_bytes": self.peak_in_use_bytes,
                    "hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                    "max_cached_bytes": self.max_cached_bytes,
                    "page_locked": self._page_locked(),
                    "fallback_reason": "" if self._page_locked() else self._reason}


_pool: PinnedHostPool | None = None
_pool_lock = threading.Lock()


def pinned_pool() -> PinnedHostPool:
    """The process's pinned host pool (created on first use)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = PinnedHostPool()
    return _pool

"""Device memory: one real buffer of fixed capacity, and an allocator over it.

Allocations are first-fit over a sorted free list, aligned to 64 bytes, and
freed blocks coalesce with their neighbours.  A request that does not fit
raises :class:`DeviceOutOfMemoryError` saying how much is available.
"""
from __future__ import annotations

import bisect
import resource
import threading
import weakref

import numpy as np

from aircc.errors import DeviceError, DeviceOutOfMemoryError
from aircc.formats.alignment import ALIGNMENT, align_up

#: The buffer's base address is aligned to a page, so that every 64-byte-aligned
#: offset is a 64-byte-aligned address (a vector load never straddles two cache
#: lines); numpy's own allocation only guarantees 16 bytes.
BASE_ALIGNMENT = 4096


class DeviceMemory:
    """``capacity`` bytes of device memory (pages are committed on first touch), ``label``
    naming it in errors.  :meth:`close` gives the buffer back; using it after that is a
    ``DeviceError``."""

    def __init__(self, capacity: int, label: str = "device memory"):
        if capacity <= 0:
            raise DeviceError(f"device memory capacity must be positive, got {capacity}")
        self.capacity = int(capacity)
        self.label = label
        self.closed = False
        try:
            raw = np.zeros(self.capacity + BASE_ALIGNMENT, dtype=np.uint8)
        except MemoryError:
            raise DeviceError(_refused(self.capacity, label)) from None
        start = -raw.ctypes.data % BASE_ALIGNMENT
        self.data = raw[start:start + self.capacity]
        self._free: list[tuple[int, int]] = [(0, self.capacity)]   # (offset, size), sorted
        self._used: dict[int, int] = {}
        self._used_bytes = 0
        self._lock = threading.Lock()
        self.peak_used = 0
        self.cached = 0
        """Bytes of :attr:`used` that caching allocators hold free for reuse (reserved
        but not allocated); they report it (:meth:`note_cached`)."""
        self.peak_allocated = 0
        self.pools: "weakref.WeakSet" = weakref.WeakSet()
        """The caching allocators over this memory (for statistics and release)."""

    @property
    def used(self) -> int:
        """Bytes reserved from this memory (by models, copies and caching allocators)."""
        return self._used_bytes

    @property
    def allocated(self) -> int:
        """Bytes in use: :attr:`used` minus what caching allocators hold free."""
        return self._used_bytes - self.cached

    def note_cached(self, delta: int) -> None:
        """A caching allocator's free (cached) bytes changed by ``delta``."""
        with self._lock:
            self.cached += delta
            self.peak_allocated = max(self.peak_allocated, self._used_bytes - self.cached)

    def reset_peaks(self) -> None:
        """Set the peaks to the current totals."""
        with self._lock:
            self.peak_used = self._used_bytes
            self.peak_allocated = self._used_bytes - self.cached

    def free_bytes_fragmentation(self) -> float:
        """How scattered the free bytes are: 1 - largest free block / free bytes (0: one
        block, or no free bytes; near 1: many small holes)."""
        with self._lock:
            free = sum(s for _, s in self._free)
            largest = max((s for _, s in self._free), default=0)
        return 0.0 if free == 0 else 1.0 - largest / free

    @property
    def available(self) -> int:
        return self.capacity - self.used

    def size_of(self, offset: int) -> int:
        """Bytes of the allocation at ``offset`` (0 if there is none)."""
        with self._lock:
            return self._used.get(offset, 0)

    def allocations(self) -> list[tuple[int, int]]:
        """(offset, size) of every allocation, in offset order (none once closed)."""
        with self._lock:
            return [] if self.closed else sorted(self._used.items())

    def close(self) -> None:
        """Give the buffer back now (not when the garbage collector finds the device): a
        numpy view made before keeps its own part alive, so a kernel still running is
        safe; anything asked of the memory afterwards is a ``DeviceError``."""
        with self._lock:
            self.closed = True
            self.data = None

    def _check_open(self) -> None:
        if self.closed:
            raise DeviceError(f"{self.label} is closed (its device was closed); use an open "
                              f"device")

    def largest_free_block(self) -> int:
        return max((s for _, s in self._free), default=0)

    def malloc(self, size: int, what: str = "", cached: bool = False) -> int:
        """Reserve ``size`` bytes; returns the offset.  ``cached``: for a caching
        allocator's segment, which counts as cached (free for reuse) until it hands
        parts of it out."""
        size = max(ALIGNMENT, align_up(size))
        with self._lock:
            self._check_open()
            for k, (off, free) in enumerate(self._free):
                if free >= size:
                    if free == size:
                        del self._free[k]
                    else:
                        self._free[k] = (off + size, free - size)
                    self._used[off] = size
                    self._used_bytes += size
                    if cached:
                        self.cached += size
                    self.peak_used = max(self.peak_used, self._used_bytes)
                    self.peak_allocated = max(self.peak_allocated, self._used_bytes - self.cached)
                    return off
            raise DeviceOutOfMemoryError(size, self.capacity - self._used_bytes,
                                         self.capacity, what)

    def free(self, offset: int, cached: bool = False) -> None:
        """Give the allocation at ``offset`` back (``cached``: a caching allocator's
        wholly free segment)."""
        with self._lock:
            if self.closed:
                return                  # everything went with the buffer
            size = self._used.pop(offset, None)
            if size is None:
                raise DeviceError(f"free of offset {offset}, which is not an allocation")
            self._used_bytes -= size
            if cached:
                self.cached -= size
            k = bisect.bisect_left(self._free, (offset, 0))
            self._free.insert(k, (offset, size))
            # coalesce with the next and the previous block
            if k + 1 < len(self._free) and offset + size == self._free[k + 1][0]:
                self._free[k] = (offset, size + self._free[k + 1][1])
                del self._free[k + 1]
            if k > 0 and self._free[k - 1][0] + self._free[k - 1][1] == offset:
                self._free[k - 1] = (self._free[k - 1][0], self._free[k - 1][1] + self._free[k][1])
                del self._free[k]

    def view(self, offset: int, dtype, shape) -> np.ndarray:
        """A numpy view of device bytes at ``offset`` (no copy)."""
        self._check_open()
        dt = np.dtype(dtype)
        count = 1
        for d in shape:
            count *= int(d)
        end = offset + count * dt.itemsize
        if offset < 0 or end > self.capacity:
            raise DeviceError(f"view [{offset}, {end}) is outside device memory of {self.capacity} bytes")
        return self.data[offset:end].view(dt).reshape(tuple(int(d) for d in shape))


def _refused(capacity: int, label: str) -> str:
    """Why a device's memory could not be had from the host, and what to change."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    why = "the host could not provide it"
    if limit != resource.RLIM_INFINITY:
        why += (f" (the process's address space is limited to {limit} bytes: ulimit -v "
                f"{limit // 1024})")
    return (f"cannot reserve {capacity} bytes ({capacity / (1 << 30):.3g} GiB) of host memory "
            f"for {label}: {why}; give the device less memory with AIR_DEVICE_MEMORY "
            f"(airrun --device-memory, or the 'memory' of its entry in AIR_DEVICE_CONFIG), "
            f"e.g. AIR_DEVICE_MEMORY=1G")

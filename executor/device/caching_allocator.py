"""A stream-aware caching allocator over :class:`DeviceMemory` (dynamic-shape mode).

Segments are reserved from device memory and kept: freed blocks are cached,
split and coalesced.  Requests of at most ``small_limit`` bytes share
``page_bytes`` small-pool segments; larger ones get their own segment rounded
up to whole pages.  Every block is a multiple of 512 bytes at a 512-aligned
offset.

A block freed after use on stream S is reusable at once by S.  Another stream
T may take it only once the events the allocator recorded on every other
stream that used it have run (polled, never waited on).
"""
from __future__ import annotations

import bisect
import itertools
import threading
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from aircc.errors import DeviceError, DeviceOutOfMemoryError, StreamSyncTimeoutError
from aircc.formats.alignment import align_up

from .memory import DeviceMemory
from .stream import Event, Signal, Stream

BLOCK_ALIGN = 512

#: Per stream that still has to finish a last use: (event, generation to reach).
Pending = dict[Stream, tuple[Event, int]]


@dataclass(eq=False)
class _Segment:
    """One reservation from device memory."""

    raw: int        # offset DeviceMemory returned (freed with it)
    offset: int     # 512-aligned start of the usable bytes
    size: int
    small: bool


@dataclass(eq=False)
class Block:
    """A piece of a segment: a caller's allocation, or a cached free block."""

    offset: int
    size: int
    requested: int
    stream: Stream | None
    _segment: _Segment | None = field(default=None, repr=False)
    _prev: "Block | None" = field(default=None, repr=False)
    _next: "Block | None" = field(default=None, repr=False)
    _allocated: bool = field(default=False, repr=False)
    _pending: Pending = field(default_factory=dict, repr=False)




def _prune(pending: Pending) -> None:
    """Drop entries whose event has already run."""
    for s in [s for s, (ev, gen) in pending.items() if ev.generation >= gen]:
        del pending[s]


def _union(into: Pending, other: Pending) -> None:
    """``into`` |= ``other``: per stream the later generation (records run in order)."""
    for s, (ev, gen) in other.items():
        cur = into.get(s)
        if cur is None or gen > cur[1]:
            into[s] = (ev, gen)


class _Pool:
    """Free blocks of one size class, best-fit ordered by (size, offset)."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, int]] = []
        self.blocks: dict[tuple[int, int], Block] = {}

    def add(self, b: Block) -> None:
        key = (b.size, b.offset)
        bisect.insort(self.keys, key)
        self.blocks[key] = b

    def remove(self, b: Block) -> None:
        key = (b.size, b.offset)
        del self.keys[bisect.bisect_left(self.keys, key)]
        del self.blocks[key]

    def fitting(self, size: int) -> Iterable[Block]:
        for k in range(bisect.bisect_left(self.keys, (size, -1)), len(self.keys)):
            yield self.blocks[self.keys[k]]


@dataclass(frozen=True)
class PoolOptions:
    """Settings of a device's caching allocator (device configuration ``pool``)."""

    initial_bytes: int = 0
    """Reserved at once when the pool is created (kept until released)."""
    growth_bytes: int = 2 << 20
    """The pool grows by segments of this many bytes (a multiple of 512): the small
    pool's segment, and the unit a large request is rounded up to."""
    reuse: bool = True
    """False: never hand out a freed block again (segments go back to device memory
    once free), to find use-after-free bugs at the price of speed."""

    def __post_init__(self):
        if not (isinstance(self.initial_bytes, int) and self.initial_bytes >= 0):
            raise DeviceError(f"pool initial_bytes must be an int >= 0, got {self.initial_bytes!r}")
        if not (isinstance(self.growth_bytes, int) and self.growth_bytes >= BLOCK_ALIGN
                and self.growth_bytes % BLOCK_ALIGN == 0):
            raise DeviceError(f"pool growth_bytes must be a positive multiple of {BLOCK_ALIGN}, "
                              f"got {self.growth_bytes!r}")
        if not isinstance(self.reuse, bool):
            raise DeviceError(f"pool reuse must be true or false, got {self.reuse!r}")

    def make(self, memory: DeviceMemory) -> "CachingAllocator":
        return CachingAllocator(memory, page_bytes=self.growth_bytes,
                                small_limit=min(1 << 20, self.growth_bytes), reuse=self.reuse,
                                initial_bytes=self.initial_bytes)


class CachingAllocator:
    """Caching, splitting, coalescing, stream-aware allocator of device blocks."""

    def __init__(self, memory: DeviceMemory, *, page_bytes: int = 2 << 20,
                 small_limit: int = 1 << 20, sync_timeout: float | None = 30.0,
                 same_stream_only: bool = False, reuse: bool = True, initial_bytes: int = 0):
        if page_bytes <= 0 or page_bytes % BLOCK_ALIGN:
            raise DeviceError(f"page_bytes must be a positive multiple of {BLOCK_ALIGN}, got {page_bytes}")
        if not 0 < small_limit <= page_bytes:
            raise DeviceError(f"small_limit must be in (0, page_bytes={page_bytes}], got {small_limit}")
        self.memory = memory
        self.page_bytes = int(page_bytes)
        self.small_limit = align_up(int(small_limit), BLOCK_ALIGN)
        self.sync_timeout = sync_timeout
        self.same_stream_only = same_stream_only
        self.reuse = reuse
        """False: a freed block is never handed out again; its segment goes back to device
        memory once its streams are done with it (for finding use-after-free bugs)."""
        """Never reuse a block across streams, even after its events ran (for recorded
        launch sequences that are replayed later, when those events are not there)."""
        self.recorded = False
        """A recorded run's pool (:meth:`mark_recorded`)."""
        self._lock = threading.Lock()
        self._small, self._large = _Pool(), _Pool()
        self._segments: list[_Segment] = []
        self._live: dict[int, Block] = {}
        self._events: dict[Stream, tuple[Event, itertools.count]] = {}
        self._event_ids = itertools.count()
        self._c = dict(allocated_bytes=0, reserved_bytes=0, peak_allocated_bytes=0,
                       peak_reserved_bytes=0, requested_bytes=0, mallocs=0, frees=0,
                       cache_hits=0, segment_allocs=0, segment_releases=0, splits=0,
                       merges=0, cross_stream_waits_avoided=0, oom_syncs=0)
        memory.pools.add(self)
        if initial_bytes > 0:
            with self._lock:
                self._reserve(align_up(int(initial_bytes), self.page_bytes), False,
                              "the caching allocator's initial segment")

    # ------------------------------------------------------------ public API
    def malloc(self, size: int, stream: Stream, what: str = "") -> Block:
        """A block of at least ``size`` bytes usable by kernels on ``stream``."""
        if size < 0:
            raise DeviceError(f"malloc of a negative size ({size} bytes) for {what or 'a buffer'}")
        alloc = align_up(max(int(size), 1), BLOCK_ALIGN)
        small = alloc <= self.small_limit
        with self._lock:
            block = self._find_or_grow(alloc, small, stream, what)
            if block is not None:
                return self._take(block, alloc, int(size), stream)
            waits = self._streams_with_pending()
        # last resort: let the streams that owe us frees drain (without the lock)
        for s in waits:
            if s.retired:       # stuck in a task: its blocks come back when it ends
                continue
            try:
                s.synchronize(self.sync_timeout)
            except StreamSyncTimeoutError:
                pass
        with self._lock:
            self._c["oom_syncs"] += bool(waits)
            block = self._find_or_grow(alloc, small, stream, what)
            if block is None:
                label = what or f"a {size}-byte buffer on stream {getattr(stream, 'id', None)}"
                raise DeviceOutOfMemoryError(
                    int(size), self.memory.available, self.memory.capacity,
                    f"{label} (caching allocator: {self._c['reserved_bytes']} bytes reserved, "
                    f"{self._c['allocated_bytes']} allocated, largest free device block "
                    f"{self.memory.largest_free_block()} bytes)")
            return self._take(block, alloc, int(size), stream)

    def free(self, block: Block, used_on: Iterable[Stream] = ()) -> None:
        """Return ``block`` to the cache once its last kernel is launched on ``used_on``."""
        with self._lock:
            if not block._allocated or self._live.get(block.offset) is not block:
                raise DeviceError(f"free of device block at offset {block.offset}, which is not "
                                  "allocated by this caching allocator (double free?)")
            del self._live[block.offset]
            block._allocated = False
            self._c["frees"] += 1
            self._c["allocated_bytes"] -= block.size
            self._c["requested_bytes"] -= block.requested
            self.memory.note_cached(block.size)
            streams = [block.stream] + [s for s in used_on if s is not block.stream]
            pending: Pending = {}
            for s in streams:
                if s is None or s in pending:
                    continue
                ev, gens = self._events.get(s) or self._events.setdefault(
                    s, (Event(next(self._event_ids)), itertools.count(1)))
                gen = next(gens)
                s.submit(Signal(lambda ev=ev, gen=gen: ev.record(gen)))
                pending[s] = (ev, gen)
            # the handle stays as the caller saw it; a fresh free block takes its place
            free = Block(block.offset, block.size, 0, block.stream, block._segment,
                         block._prev, block._next, False, pending)
            self._relink(block, free)
            block._segment = block._prev = block._next = None
            self._insert_free(free)
            if not self.reuse:
                self._release_locked()

    def mark_recorded(self) -> None:
        """The pool's blocks are a recorded run's from now on (each replay writes them): they
        count as allocated, and the device's ``release_cached()`` leaves them to the owner."""
        with self._lock:
            if self.recorded:
                return
            self.recorded = True
            held = sum(self.memory.size_of(seg.raw) for seg in self._segments)
            self.memory.note_cached(-(held - self._c["allocated_bytes"]))

    def release_cached(self) -> int:
        """Return wholly free segments with no pending events to device memory; bytes released."""
        with self._lock:
            return self._release_locked()

    def stats(self) -> dict:
        """Byte totals (current and peak), segment/block counts, and event counters."""
        with self._lock:
            out = dict(self._c)
            out["segments"] = len(self._segments)
            out["cached_blocks"] = len(self._small.keys) + len(self._large.keys)
            out["cached_bytes"] = out["reserved_bytes"] - out["allocated_bytes"]
            return out

    def largest_cached_block(self) -> int:
        """Bytes of the largest free block the pool holds."""
        with self._lock:
            return max((b.size for pool in (self._small, self._large)
                        for b in pool.blocks.values()), default=0)

    def reset_peaks(self) -> None:
        """Set the peaks to the current totals."""
        with self._lock:
            self._c["peak_allocated_bytes"] = self._c["allocated_bytes"]
            self._c["peak_reserved_bytes"] = self._c["reserved_bytes"]

    def view(self, block: Block, dtype, shape) -> np.ndarray:
        """A numpy view of the block's bytes (valid also for a kernel running after free)."""
        nbytes = int(np.prod([int(d) for d in shape], dtype=np.int64)) * np.dtype(dtype).itemsize
        if nbytes > block.size:
            raise DeviceError(f"view of {nbytes} bytes exceeds the {block.size}-byte block "
                              f"at offset {block.offset}")
        return self.memory.view(block.offset, dtype, shape)

    # ------------------------------------------------------------ internals
    def _pool(self, b: Block) -> _Pool:
        return self._small if b._segment.small else self._large

    def _prune(self, b: Block) -> None:
        """Forget the events of ``b`` that have run; never for a recorded launch sequence
        (``same_stream_only``): a replay has no such events, so a block another stream used
        must stay that stream's even after the recording run's event ran."""
        if not self.same_stream_only:
            _prune(b._pending)

    def _ready(self, b: Block, stream: Stream) -> bool:
        """May ``stream`` take ``b`` now (every other stream's last use finished)?"""
        self._prune(b)
        return all(s is stream for s in b._pending)

    def _find_or_grow(self, alloc: int, small: bool, stream: Stream, what: str) -> Block | None:
        pool = self._small if small else self._large
        if not self.reuse:
            self._release_locked()
        for b in pool.fitting(alloc) if self.reuse else ():
            if self._ready(b, stream):
                self._c["cache_hits"] += 1
                return b
            self._c["cross_stream_waits_avoided"] += 1
        seg_size = self.page_bytes if small else align_up(alloc, self.page_bytes)
        try:
            return self._reserve(seg_size, small, what)
        except DeviceOutOfMemoryError:
            if not self._release_locked():
                return None
        try:
            return self._reserve(seg_size, small, what)
        except DeviceOutOfMemoryError:
            return None

    def _reserve(self, size: int, small: bool, what: str) -> Block:
        """A new segment as one free block (already in its pool)."""
        raw = self.memory.malloc(size, what, cached=True)
        if raw % BLOCK_ALIGN:
            self.memory.free(raw, cached=True)
            raw = self.memory.malloc(size + BLOCK_ALIGN, what, cached=True)
        seg = _Segment(raw, align_up(raw, BLOCK_ALIGN), size, small)
        self._segments.append(seg)
        c = self._c
        c["segment_allocs"] += 1
        c["reserved_bytes"] += size
        c["peak_reserved_bytes"] = max(c["peak_reserved_bytes"], c["reserved_bytes"])
        b = Block(seg.offset, size, 0, None, seg)
        self._pool(b).add(b)
        return b

    def _take(self, b: Block, alloc: int, requested: int, stream: Stream) -> Block:
        """Hand out ``alloc`` bytes of the free block ``b``, splitting off the rest."""
        pool = self._pool(b)
        pool.remove(b)
        rest = b.size - alloc
        if rest >= BLOCK_ALIGN if b._segment.small else rest > self.small_limit:
            tail = Block(b.offset + alloc, rest, 0, None, b._segment, b, b._next,
                         False, dict(b._pending))    # its bytes still owe b's events
            if b._next is not None:
                b._next._prev = tail
            b._next = tail
            b.size = alloc
            pool.add(tail)
            self._c["splits"] += 1
        out = Block(b.offset, b.size, requested, stream, b._segment, b._prev, b._next, True)
        self._relink(b, out)
        self._live[out.offset] = out
        c = self._c
        c["mallocs"] += 1
        c["allocated_bytes"] += out.size
        self.memory.note_cached(-out.size)
        c["requested_bytes"] += requested
        c["peak_allocated_bytes"] = max(c["peak_allocated_bytes"], c["allocated_bytes"])
        return out

    @staticmethod
    def _relink(old: Block, new: Block) -> None:
        if old._prev is not None:
            old._prev._next = new
        if old._next is not None:
            old._next._prev = new

    def _insert_free(self, b: Block) -> None:
        """Cache a free block, merging free neighbours (pending events are united)."""
        pool = self._pool(b)
        self._prune(b)
        for nb in (b._prev, b._next):
            if nb is None or nb._allocated:
                continue
            pool.remove(nb)
            self._prune(nb)
            _union(b._pending, nb._pending)
            if nb is b._prev:
                b.offset = nb.offset
                b._prev = nb._prev
                if nb._prev is not None:
                    nb._prev._next = b
            else:
                b._next = nb._next
                if nb._next is not None:
                    nb._next._prev = b
            b.size += nb.size
            self._c["merges"] += 1
        pool.add(b)

    def _release_locked(self) -> int:
        """Give wholly free segments back; the bytes device memory got back."""
        released = returned = 0
        for seg in list(self._segments):
            pool = self._small if seg.small else self._large
            b = pool.blocks.get((seg.size, seg.offset))
            if b is None or b._segment is not seg:
                continue
            if any(ev.generation < gen for ev, gen in b._pending.values()):
                continue          # a stream has still to finish with it
            pool.remove(b)
            self._segments.remove(seg)
            returned += self.memory.size_of(seg.raw)
            self.memory.free(seg.raw, cached=not self.recorded)
            released += seg.size
            self._c["segment_releases"] += 1
        self._c["reserved_bytes"] -= released
        return returned

    def _streams_with_pending(self) -> list[Stream]:
        found: dict[Stream, None] = {}
        for pool in (self._small, self._large):
            for b in pool.blocks.values():
                found.update(dict.fromkeys(s for s, (ev, gen) in b._pending.items()
                                            if ev.generation < gen))
        return list(found)

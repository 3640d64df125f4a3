"""The stream-aware caching allocator of dynamic-shape mode."""
from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from aircc.errors import DeviceError, DeviceOutOfMemoryError
from aircc.executor.device.caching_allocator import CachingAllocator
from aircc.executor.device.memory import DeviceMemory
from aircc.executor.device.stream import Event, Stream

KiB, MiB = 1 << 10, 1 << 20


@pytest.fixture
def streams():
    made: list[Stream] = []

    def make(n: int) -> list[Stream]:
        new = [Stream(len(made) + k, name="calloc") for k in range(n)]
        made.extend(new)
        return new

    yield make
    for s in made:
        s.close()


def block_stream(s: Stream) -> threading.Event:
    """Hold ``s`` until the returned event is set (bounded, so a failing test cannot hang)."""
    gate = threading.Event()
    s.submit(lambda: gate.wait(5))
    return gate


def overlaps(a, b) -> bool:
    return a.offset < b.offset + b.size and b.offset < a.offset + a.size


def test_same_stream_reuse_is_immediate(streams):
    (s,) = streams(1)
    alloc = CachingAllocator(DeviceMemory(16 * MiB))
    gate = block_stream(s)                      # the free's event cannot have run
    x = alloc.malloc(1000, s, "x")
    assert x.size == 1024 and x.requested == 1000 and x.offset % 512 == 0
    alloc.free(x, [s])
    y = alloc.malloc(1000, s, "y")
    st = alloc.stats()
    assert y.offset == x.offset
    assert st["cache_hits"] == 1 and st["segment_allocs"] == 1 and st["segments"] == 1
    assert st["cross_stream_waits_avoided"] == 0
    gate.set()


def test_no_cross_stream_reuse_before_the_freeing_streams_event(streams):
    a, b = streams(2)
    alloc = CachingAllocator(DeviceMemory(16 * MiB))
    gate = block_stream(a)
    x = alloc.malloc(2 * MiB, a, "x")
    alloc.free(x, [a])                          # the record is queued behind the blocker
    y = alloc.malloc(2 * MiB, b, "y")
    assert not overlaps(x, y)
    assert alloc.stats()["cross_stream_waits_avoided"] >= 1
    assert alloc.stats()["segments"] == 2
    gate.set()
    a.synchronize(5)
    z = alloc.malloc(2 * MiB, b, "z")           # the event has run: X's bytes are reusable
    assert (z.offset, z.size) == (x.offset, x.size)
    assert alloc.stats()["segments"] == 2


def test_split_remainder_keeps_the_pending_event(streams):
    a, b = streams(2)
    alloc = CachingAllocator(DeviceMemory(16 * MiB))
    gate = block_stream(a)
    x = alloc.malloc(1 * MiB, a)
    alloc.free(x, [a])                          # merged with the free tail: 2 MiB pending on A
    head = alloc.malloc(512 * KiB, a)           # A may split it at once ...
    assert head.offset == x.offset
    other = alloc.malloc(512 * KiB, b)          # ... but the rest of X's bytes still owe A's event
    assert not overlaps(x, other)
    gate.set()
    a.synchronize(5)
    assert overlaps(x, alloc.malloc(512 * KiB, b))


def test_block_used_on_two_streams_waits_for_both(streams):
    a, b, c = streams(3)
    alloc = CachingAllocator(DeviceMemory(32 * MiB))
    gate_a, gate_b = block_stream(a), block_stream(b)
    x = alloc.malloc(2 * MiB, a, "x")
    alloc.free(x, [a, b])
    held = [alloc.malloc(2 * MiB, c), alloc.malloc(2 * MiB, a)]   # neither may take X
    assert not any(overlaps(x, h) for h in held)
    gate_b.set()
    b.synchronize(5)
    held.append(alloc.malloc(2 * MiB, c))       # A's last use still pending
    assert not overlaps(x, held[-1])
    again = alloc.malloc(2 * MiB, a)            # B done, A's own use is implied by order
    assert again.offset == x.offset
    alloc.free(again, [a])                      # still behind A's blocker
    assert not overlaps(x, alloc.malloc(2 * MiB, c))
    gate_a.set()
    a.synchronize(5)
    assert alloc.malloc(2 * MiB, c).offset == x.offset
    assert alloc.stats()["cross_stream_waits_avoided"] >= 4


def test_split_and_coalesce(streams):
    (s,) = streams(1)
    alloc = CachingAllocator(DeviceMemory(32 * MiB))
    p, q, r = (alloc.malloc(512 * KiB, s) for _ in range(3))
    assert q.offset == p.offset + 512 * KiB and r.offset == q.offset + 512 * KiB
    assert alloc.stats()["splits"] == 3          # the remainder moved down each time
    alloc.free(p, [s])
    alloc.free(q, [s])
    assert alloc.stats()["merges"] == 1
    both = alloc.malloc(1 * MiB, s)
    assert both.offset == p.offset and alloc.stats()["segments"] == 1
    # a large cached block serves two smaller large requests
    big = alloc.malloc(8 * MiB, s)
    alloc.free(big, [s])
    one, two = alloc.malloc(3 * MiB, s), alloc.malloc(3 * MiB, s)
    assert (one.offset, two.offset) == (big.offset, big.offset + 3 * MiB)
    assert alloc.stats()["segments"] == 2
    # freeing everything coalesces each segment back into one cached block
    for blk in (one, two, both, r):
        alloc.free(blk, [s])
    st = alloc.stats()
    assert st["cached_blocks"] == 2 and st["allocated_bytes"] == 0


def test_rounding_pools_and_exact_peaks(streams):
    (s,) = streams(1)
    mem = DeviceMemory(64 * MiB)
    alloc = CachingAllocator(mem)
    a = alloc.malloc(1000, s)                   # small: 1024 from a 2 MiB small segment
    b = alloc.malloc(300 * KiB, s)              # shares it
    assert a.size == 1024 and b.size == 300 * KiB and b.offset == a.offset + 1024
    big = alloc.malloc(3 * MiB, s)              # large: own 4 MiB segment; 1 MiB tail not split
    assert big.size == 4 * MiB and big.requested == 3 * MiB
    odd = alloc.malloc(MiB + 1, s)              # large: 2 MiB segment
    assert odd.size == 2 * MiB
    st = alloc.stats()
    assert st["segments"] == 3 and st["reserved_bytes"] == 8 * MiB == mem.used
    assert st["allocated_bytes"] == 1024 + 300 * KiB + 6 * MiB
    assert st["requested_bytes"] == 1000 + 300 * KiB + 3 * MiB + MiB + 1
    alloc.free(big, [s])
    alloc.free(odd, [s])
    c = alloc.malloc(5 * MiB, s)                # no cached block fits: new 6 MiB segment
    st = alloc.stats()
    assert c.size == 6 * MiB
    assert st["peak_allocated_bytes"] == 1024 + 300 * KiB + 6 * MiB
    assert st["peak_reserved_bytes"] == 14 * MiB == st["reserved_bytes"]
    alloc.free(c, [s])
    s.synchronize(5)
    assert alloc.release_cached() == 12 * MiB
    alloc.reset_peaks()
    st = alloc.stats()
    assert st["reserved_bytes"] == st["peak_reserved_bytes"] == 2 * MiB == mem.used
    assert st["peak_allocated_bytes"] == 1024 + 300 * KiB


def test_oom_releases_cache_then_syncs_then_raises(streams):
    a, b = streams(2)
    mem = DeviceMemory(8 * MiB)
    alloc = CachingAllocator(mem)
    # fill memory with 4 small segments; free them behind a blocked stream
    gate = block_stream(a)
    smalls = [alloc.malloc(MiB, a) for _ in range(8)]
    assert alloc.stats()["segments"] == 4 and mem.available == 0
    for blk in smalls:
        alloc.free(blk, [a])
    assert alloc.release_cached() == 0          # events pending: nothing may go
    threading.Timer(0.05, gate.set).start()
    big = alloc.malloc(8 * MiB, b, "big")       # needs the sync path
    st = alloc.stats()
    assert st["oom_syncs"] == 1 and st["segments"] == 1 and st["reserved_bytes"] == 8 * MiB
    # a different size class: the cached large segment is released without any sync
    alloc.free(big, [b])
    b.synchronize(5)
    synced = []
    b.synchronize = lambda timeout=None: synced.append(b)    # type: ignore[method-assign]
    small = alloc.malloc(MiB, b, "small")
    st = alloc.stats()
    assert not synced and st["segments"] == 1 and st["reserved_bytes"] == 2 * MiB
    assert st["segment_releases"] == 5
    with pytest.raises(DeviceOutOfMemoryError) as err:
        alloc.malloc(16 * MiB, b, "huge tensor")
    assert err.value.available == mem.available == 6 * MiB
    assert "huge tensor" in str(err.value) and str(6 * MiB) in str(err.value)
    del b.synchronize
    after = alloc.malloc(4 * MiB, b)            # still works
    st = alloc.stats()
    assert st["allocated_bytes"] == small.size + after.size == st["reserved_bytes"] - MiB
    assert st["mallocs"] == 8 + 1 + 1 + 1 and mem.used == st["reserved_bytes"]


def test_blocks_are_512_aligned_when_device_memory_is_shared(streams):
    (s,) = streams(1)
    mem = DeviceMemory(16 * MiB)
    static = mem.malloc(64, "weights")          # DeviceMemory aligns to 64 only
    alloc = CachingAllocator(mem)
    x = alloc.malloc(100, s)
    assert x.offset % 512 == 0 and not overlaps(x, type(x)(static, 64, 64, None))
    alloc.view(x, np.uint8, (512,))[:] = 7
    with pytest.raises(DeviceError):
        alloc.view(x, np.uint8, (513,))
    alloc.free(x, [s])
    s.synchronize(5)
    assert alloc.release_cached() == 2 * MiB + 512 and mem.used == 64   # with its alignment slack


def test_double_free_and_foreign_blocks_raise(streams):
    (s,) = streams(1)
    alloc = CachingAllocator(DeviceMemory(8 * MiB))
    x = alloc.malloc(4096, s)
    alloc.free(x, [s])
    with pytest.raises(DeviceError, match=f"offset {x.offset}"):
        alloc.free(x, [s])
    y = alloc.malloc(4096, s)                   # same bytes, new handle
    assert y.offset == x.offset
    with pytest.raises(DeviceError):
        alloc.free(x, [s])                      # the stale handle cannot free y
    alloc.free(y, [s])
    assert alloc.stats()["frees"] == 2


def test_stress_no_live_block_is_overwritten(streams):
    a, b = streams(2)
    both = (a, b)
    alloc = CachingAllocator(DeviceMemory(128 * MiB))
    rng = random.Random(1234)
    errors: list[str] = []
    live: list = []
    ids = iter(range(1, 1 << 30))

    def write(blk, tag):
        def task():
            alloc.view(blk, np.uint32, (blk.requested // 4,))[:] = tag
        return task

    def check(blk, tag):
        def task():
            if rng_task.random() < 0.3:
                time.sleep(0.0003)              # let the host run ahead of the device
            got = alloc.view(blk, np.uint32, (blk.requested // 4,))
            if not (got == tag).all():
                errors.append(f"block {tag} at {blk.offset} overwritten")
        return task

    rng_task = random.Random(99)
    for _ in range(400):
        if live and (len(live) > 12 or rng.random() < 0.45):
            blk, tag, owner, other = live.pop(rng.randrange(len(live)))
            used = [owner]
            owner.submit(check(blk, tag))
            if other is not None:               # read on the other stream after the write
                ev = Event(tag)
                owner.submit(lambda ev=ev: ev.record(1))
                other.submit(lambda ev=ev: ev.wait(1, lambda: False, 5))
                other.submit(check(blk, tag))
                used.append(other)
            alloc.free(blk, used)
        else:
            owner = rng.choice(both)
            size = rng.choice([256, 4 * KiB, 64 * KiB, 700 * KiB, 1536 * KiB, 3 * MiB])
            blk = alloc.malloc(size, owner, "stress")
            tag = next(ids)
            owner.submit(write(blk, tag))
            other = (b if owner is a else a) if rng.random() < 0.4 else None
            live.append((blk, tag, owner, other))
    for blk, tag, owner, _ in live:
        owner.submit(check(blk, tag))
        alloc.free(blk, [owner])
    a.synchronize(5)
    b.synchronize(5)
    st = alloc.stats()
    assert not errors, errors[:5]
    assert st["allocated_bytes"] == 0 and st["requested_bytes"] == 0
    assert st["mallocs"] == st["frees"] and st["cache_hits"] > st["segment_allocs"]
    assert st["cross_stream_waits_avoided"] > 0     # the hazard was really exercised

"""Copies H2D, D2H, D2D and between devices, ordered by streams and events, staged
through the pinned host pool; their errors, statistics, and the pool itself."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from aircc.errors import DeviceError, DeviceLostError
from aircc.executor.device.copies import (
    copy_d2d, copy_d2d_async, copy_d2h, copy_d2h_async, copy_h2d, copy_h2d_async, copy_peer,
    copy_peer_async, copy_stats, reset_copy_stats, synchronize)
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.events import DeviceEvent, stream_wait
from aircc.executor.device.pinned import PinnedHostPool, pinned_pool, size_class

MAX_COPY = 256 << 10


@pytest.fixture
def dev():
    d = VirtualDevice(1 << 20, name="copies")
    yield d
    d.close()


@pytest.fixture
def two_devices():
    a, b = VirtualDevice(64 << 20, 0, name="copy-a"), VirtualDevice(64 << 20, 1, name="copy-b")
    yield a, b
    a.close()
    b.close()


def _gate(stream) -> threading.Event:
    """Hold ``stream`` until the returned event is set."""
    gate = threading.Event()
    stream.submit(lambda: gate.wait(5))
    return gate


def _spin(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


# ------------------------------------------------------------------ host <-> device
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int64",
                                   "uint16", "bool", "complex64"])
def test_sync_h2d_d2h_round_trip(dev, dtype):
    rng = np.random.default_rng(7)
    arr = (rng.standard_normal((3, 5, 7)) * 100).astype(dtype)
    off = dev.memory.malloc(arr.nbytes)
    copy_h2d(dev, off, arr)
    assert np.array_equal(dev.memory.view(off, dtype, arr.shape), arr)
    back = np.zeros_like(arr)
    copy_d2h(dev, off, back)
    assert np.array_equal(back, arr) and back.tobytes() == arr.tobytes()
    # the same through a stream (queued, then waited for)
    s = dev.create_stream()
    arr2 = arr[::-1].copy()
    copy_h2d(dev, off, arr2, stream=s, timeout=5)
    back2 = np.zeros_like(arr)
    copy_d2h(dev, off, back2, stream=s, timeout=5)
    assert np.array_equal(back2, arr2)


def test_async_h2d_stages_the_source_so_the_caller_may_overwrite_it(dev):
    s = dev.create_stream()
    src = np.arange(1, 4097, dtype=np.int32)
    old = src.copy()
    off = dev.memory.malloc(src.nbytes)
    gate = _gate(s)
    handle = copy_h2d_async(dev, off, src, s)
    src[:] = -1                                   # reused at once, before the stream copies
    assert not handle.query()
    assert not dev.memory.view(off, np.int32, src.shape).any()    # nothing arrived yet
    gate.set()
    handle.wait(5)
    assert np.array_equal(dev.memory.view(off, np.int32, src.shape), old)


def test_async_d2h_fills_the_array_when_the_stream_reaches_it(dev):
    s = dev.create_stream()
    data = np.linspace(-1, 1, 999, dtype=np.float32)
    off = dev.memory.malloc(data.nbytes)
    copy_h2d(dev, off, data)
    dst = np.zeros_like(data)
    gate = _gate(s)
    handle = copy_d2h_async(dev, off, dst, s)
    done = DeviceEvent("d2h done")
    done.record(s)
    assert not handle.query() and not done.query() and not dst.any()
    gate.set()
    done.synchronize(5)                          # an event recorded after the copy
    assert handle.query() and np.array_equal(dst, data)
    handle.wait(5)


def test_d2d_within_a_device_sync_async_and_overlapping(dev):
    rng = np.random.default_rng(3)
    off = dev.memory.malloc(4096)
    before = rng.integers(0, 256, 4096, dtype=np.uint8)
    copy_h2d(dev, off, before)
    copy_d2d(dev, off + 2048, off, 1000)
    expected = before.copy()
    expected[2048:3048] = before[:1000]
    assert np.array_equal(dev.memory.data[off:off + 4096], expected)
    s = dev.create_stream()
    copy_d2d_async(dev, off + 100, off, 500, s).wait(5)     # overlapping ranges
    expected[100:600] = expected[:500].copy()
    assert np.array_equal(dev.memory.data[off:off + 4096], expected)


def test_peer_copy_with_a_destination_stream(two_devices):
    a, b = two_devices
    sa, sb = a.create_stream(), b.create_stream()
    data = np.random.default_rng(5).integers(0, 256, 70_000, dtype=np.uint8)
    src, dst = a.memory.malloc(data.size), b.memory.malloc(data.size)
    copy_h2d(a, src, data)
    in_use = pinned_pool().stats()["in_use_bytes"]
    gate = _gate(sa)
    handle = copy_peer_async(a, src, b, dst, data.size, sa, sb)
    seen = []
    sb.submit(lambda: seen.append(b.memory.data[dst:dst + data.size].copy()))
    time.sleep(0.05)
    assert not seen and not handle.query()       # the destination stream waits for the source
    gate.set()
    handle.wait(5)
    synchronize(sb, 5)
    assert np.array_equal(seen[0], data)
    synchronize(sa, 5)
    assert pinned_pool().stats()["in_use_bytes"] == in_use    # the staging buffer went back
    copy_peer(b, dst, a, src + 0, 10)            # sync, no streams
    assert np.array_equal(a.memory.data[src:src + 10], data[:10])


# ------------------------------------------------------------------ errors
def test_bad_copies_raise_device_errors_naming_the_problem(dev, two_devices):
    cap = dev.memory.capacity
    off = dev.memory.malloc(256)
    with pytest.raises(DeviceError, match=rf"destination range \[{cap - 10}, {cap + 54}\) .*"
                                          rf"outside device 0's memory of {cap} bytes"):
        copy_h2d(dev, cap - 10, np.zeros(64, np.uint8))
    with pytest.raises(DeviceError, match=r"source range \[-8, 56\)"):
        copy_d2h(dev, -8, np.zeros(64, np.uint8))
    with pytest.raises(DeviceError, match=rf"source range \[{cap - 4}, {cap + 96}\)"):
        copy_d2d(dev, off, cap - 4, 100)
    with pytest.raises(DeviceError, match=r"not C-contiguous \(strides"):
        copy_h2d(dev, off, np.zeros((4, 8), np.float32)[:, ::2])
    with pytest.raises(DeviceError, match=r"16 bytes asked, but the host array \(dtype float32, "
                                          r"shape \(3,\)\) holds 12 bytes"):
        copy_h2d(dev, off, np.zeros(3, np.float32), nbytes=16)
    with pytest.raises(DeviceError, match="Python objects"):
        copy_h2d(dev, off, np.array([object()]))
    with pytest.raises(DeviceError, match="read-only"):
        ro = np.zeros(4, np.uint8)
        ro.flags.writeable = False
        copy_d2h(dev, off, ro)
    a, b = two_devices
    with pytest.raises(DeviceError, match=r"is not a stream of device 0"):
        copy_h2d_async(dev, off, np.zeros(4, np.uint8), b.create_stream())
    with pytest.raises(DeviceError, match=r"destination range \[67108800, 67108928\) .* device 1"):
        copy_peer_async(a, 0, b, (64 << 20) - 64, 128, a.create_stream())
    # nothing was counted as a failure, and the next copy works
    x = np.arange(64, dtype=np.uint8)
    copy_h2d(dev, off, x)
    assert np.array_equal(dev.memory.data[off:off + 64], x)
    dev.close()
    with pytest.raises(DeviceError, match="device 0 is closed"):
        copy_h2d(dev, off, x)


def test_a_copy_failing_on_its_stream_reaches_the_caller_and_the_stream_goes_on(dev):
    s = dev.create_stream()
    reset_copy_stats(dev)
    off = dev.memory.malloc(1024)
    in_use = pinned_pool().stats()["in_use_bytes"]
    gate = _gate(s)
    handle = copy_h2d_async(dev, off, np.ones(1024, np.uint8), s)
    dev.lose("test: lost while a copy is queued")
    gate.set()
    with pytest.raises(DeviceLostError, match="lost while a copy is queued"):
        handle.wait(5)
    with pytest.raises(DeviceLostError):
        synchronize(s, 5)
    synchronize(s, 5)                            # reported once
    assert s.alive and not s.faults
    assert copy_stats(dev)["failed"] == 1
    assert pinned_pool().stats()["in_use_bytes"] == in_use
    dev.reset()
    y = np.full(1024, 7, np.uint8)
    copy_h2d_async(dev, off, y, s).wait(5)
    assert np.array_equal(dev.memory.data[off:off + 1024], y)


def test_a_peer_copy_whose_source_fails_leaves_the_destination_alone(two_devices):
    a, b = two_devices
    sa, sb = a.create_stream(), b.create_stream()
    dst = b.memory.malloc(512)
    b.memory.data[dst:dst + 512] = 9
    gate = _gate(sa)
    handle = copy_peer_async(a, 0, b, dst, 512, sa, sb)
    a.lose("test: source lost")
    gate.set()
    with pytest.raises(DeviceLostError, match="source lost"):
        handle.wait(5)
    assert (b.memory.data[dst:dst + 512] == 9).all()
    with pytest.raises(DeviceLostError):
        synchronize(sa, 5)
    synchronize(sb, 5)                           # the destination half only skipped


# ------------------------------------------------------------------ statistics
def test_statistics_count_calls_and_bytes_per_direction_and_mode(two_devices):
    a, b = two_devices
    reset_copy_stats(a)
    reset_copy_stats(b)
    s = a.create_stream()
    x, y = np.ones(1000, np.float32), np.ones(333, np.int16)
    off = a.memory.malloc(8192)
    copy_h2d(a, off, x)
    copy_h2d(a, off, y, stream=s)
    copy_h2d_async(a, off, y, s)
    copy_d2h_async(a, off, np.empty(77, np.uint8), s)
    copy_d2d(a, off + 4096, off, 100)
    copy_peer_async(a, off, b, 0, 500, s, b.create_stream()).wait(5)
    copy_peer(a, off, b, 0, 10, src_stream=s, timeout=5)
    copy_peer(a, off, b, 0, 20)
    synchronize(s, 5)
    st = copy_stats(a)
    assert st["h2d"] == {"sync": {"calls": 2, "bytes": x.nbytes + y.nbytes},
                         "async": {"calls": 1, "bytes": y.nbytes}}
    assert st["d2h"]["async"] == {"calls": 1, "bytes": 77} and st["d2h"]["sync"]["calls"] == 0
    assert st["d2d"]["sync"] == {"calls": 1, "bytes": 100}
    assert st["peer_out"]["async"] == {"calls": 1, "bytes": 500}
    assert st["peer_out"]["sync"] == {"calls": 2, "bytes": 30}
    assert st["staged_bytes"] == y.nbytes + 77 + 500 + 10 and st["failed"] == 0
    assert copy_stats(b)["peer_in"]["async"] == {"calls": 1, "bytes": 500}
    assert copy_stats(b)["h2d"]["sync"]["calls"] == 0
    assert st["device"] == 0 and st["pinned_pool"]["hits"] + st["pinned_pool"]["misses"] >= 3


# ------------------------------------------------------------------ events
def test_events_never_recorded_reserved_and_out_of_order(dev):
    s0, s1, s2 = dev.create_stream(), dev.create_stream(), dev.create_stream()
    ev = DeviceEvent("e")
    assert stream_wait(s1, ev) is None and ev.query()
    ev.synchronize(1)                            # never recorded: no wait
    # a wait queued before the record it waits for was issued
    order: list[str] = []
    mark = ev.reserve()
    stream_wait(s1, mark)
    s1.submit(lambda: order.append("consumer"))
    with pytest.raises(DeviceError, match="nothing to wait for until it is recorded"):
        mark.synchronize(1)
    time.sleep(0.02)
    s0.submit(lambda: (time.sleep(0.02), order.append("producer")))
    ev.record(s0, mark)
    synchronize(s1, 5)
    assert order == ["producer", "consumer"]
    with pytest.raises(DeviceError, match="is recorded already"):
        ev.record(s0, mark)
    with pytest.raises(DeviceError, match="belongs to another event"):
        DeviceEvent("other").record(s0, ev.reserve())
    # records on two streams running out of order: a waiter is released by its own record
    gate = _gate(s0)
    first = ev.record(s0)
    second = ev.record(s1)
    passed = threading.Event()
    stream_wait(s2, first)
    s2.submit(passed.set)
    second.synchronize(5)
    time.sleep(0.05)
    assert not passed.is_set() and not first.query() and ev.latest is second
    gate.set()
    assert passed.wait(5) and first.query()


def test_a_wait_for_a_record_that_never_comes_fails_on_its_stream(dev):
    s = dev.create_stream()
    stream_wait(s, DeviceEvent("never").reserve(), timeout=0.05)
    with pytest.raises(DeviceError, match=r"waited 0.05 s for <record #1 of event 'never', "
                                          r"not issued>"):
        synchronize(s, 5)
    assert s.alive


def test_async_peer_copies_ordered_by_an_event_arrive_before_the_consumer_reads():
    """1,000 randomized orderings: sizes, offsets, which side the host issues first, busy
    tasks on either stream, and whether the destination stream does the copy's second half."""
    a, b = VirtualDevice(64 << 20, 0, name="peer-a"), VirtualDevice(64 << 20, 1, name="peer-b")
    try:
        rng = np.random.default_rng(20240607)
        sa, sb = a.create_stream(), b.create_stream()
        region = 4 << 20
        src_base, dst_base = a.memory.malloc(region), b.memory.malloc(region)
        produced, consumed = DeviceEvent("produced"), DeviceEvent("consumed")
        results: list[tuple[int, bool]] = []
        consumed_marks = []
        start = time.monotonic()
        for i in range(1000):
            n = int(min(MAX_COPY, max(1, 2 ** rng.uniform(0, 18.01))))
            src = src_base + int(rng.integers(0, region - n + 1))
            dst = dst_base + int(rng.integers(0, region - n + 1))
            payload = rng.integers(0, 256, n, dtype=np.uint8)
            producer_first = bool(rng.integers(2))
            via_dst_stream = producer_first and bool(rng.integers(2))
            busy = [[float(u) for u in rng.uniform(0, 20, rng.integers(0, 3))] for _ in range(4)]
            sleep_us = float(rng.uniform(1, 30))
            mark = produced.reserve()
            previous = consumed.latest           # the consumer before this one read its bytes
            if i >= 8:
                consumed_marks[i - 8].synchronize(10)   # keep the host a few iterations ahead

            def producer(n=n, src=src, dst=dst, payload=payload, previous=previous, mark=mark,
                         busy=busy[0], busy_after=busy[1], sleep_us=sleep_us, via=via_dst_stream):
                for us in busy:
                    sa.submit(lambda us=us: _spin(us))
                if previous is not None:
                    stream_wait(sa, previous)    # do not overwrite what is still being read

                def write():
                    _spin(sleep_us)
                    a.memory.data[src:src + n] = payload
                sa.submit(write)
                copy_peer_async(a, src, b, dst, n, sa, sb if via else None)
                produced.record(sa, mark)
                for us in busy_after:
                    sa.submit(lambda us=us: _spin(us))

            def consumer(i=i, n=n, dst=dst, payload=payload, mark=mark, busy=busy[2],
                         busy_after=busy[3]):
                for us in busy:
                    sb.submit(lambda us=us: _spin(us))
                stream_wait(sb, mark)
                sb.submit(lambda: results.append(
                    (i, np.array_equal(b.memory.data[dst:dst + n], payload))))
                consumed_marks.append(consumed.record(sb))
                for us in busy_after:
                    sb.submit(lambda us=us: _spin(us))

            if producer_first:
                producer()
                consumer()
            else:
                consumer()
                producer()
        synchronize(sa, 30)
        synchronize(sb, 30)
        elapsed = time.monotonic() - start
        assert [i for i, _ in results] == list(range(1000))
        bad = [i for i, ok in results if not ok]
        assert not bad, f"{len(bad)} of 1000 consumers read before the bytes arrived: {bad[:10]}"
        assert copy_stats(b)["peer_in"]["async"]["calls"] == 1000
        assert elapsed < 30
    finally:
        a.close()
        b.close()


# ------------------------------------------------------------------ the pinned host pool
def test_pinned_pool_size_classes_reuse_cap_and_release():
    assert [size_class(n) for n in (0, 1, 4096, 4097, 65536, 65537)] == \
        [4096, 4096, 4096, 8192, 65536, 131072]
    pool = PinnedHostPool(max_cached_bytes=64 << 10)
    b1 = pool.acquire(5000)
    assert b1.capacity == 8192 and b1.array.size == 8192
    b1.array[:5] = [1, 2, 3, 4, 5]
    pool.give_back(b1)
    b2 = pool.acquire(6000)
    assert b2 is b1 and pool.stats()["hits"] == 1 and pool.stats()["misses"] == 1
    pool.give_back(b2)
    with pytest.raises(DeviceError, match="given back twice"):
        pool.give_back(b2)
    bufs = [pool.acquire(32 << 10) for _ in range(4)]
    st = pool.stats()
    assert st["in_use_bytes"] == 4 * (32 << 10) and st["peak_in_use_bytes"] == st["in_use_bytes"]
    for buf in bufs:
        pool.give_back(buf)
    st = pool.stats()
    assert st["cached_bytes"] <= 64 << 10 and st["evictions"] == 3   # the 8K one, then two 32K
    assert st["reserved_bytes"] == st["cached_bytes"] == 64 << 10 and st["in_use_bytes"] == 0
    big = pool.acquire(100 << 10)              # bigger than the cap: never cached
    pool.give_back(big)
    assert pool.stats()["reserved_bytes"] == 64 << 10
    assert pool.release() == 64 << 10
    st = pool.stats()
    assert st["buffers"] == st["reserved_bytes"] == st["cached_bytes"] == 0
    pool.acquire(32 << 10)
    assert pool.stats()["misses"] == st["misses"] + 1


def test_pinned_pool_is_thread_safe():
    pool = PinnedHostPool(max_cached_bytes=96 << 10)
    errors = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            buf = pool.acquire(int(rng.integers(1, 40_000)))
            buf.array[:16] = seed
            if not (buf.array[:16] == seed).all():
                errors.append(seed)               # two threads were handed one buffer
            pool.give_back(buf)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    st = pool.stats()
    assert not errors and st["in_use_bytes"] == 0 and st["hits"] + st["misses"] == 800
    assert st["reserved_bytes"] == st["cached_bytes"] <= 96 << 10
    assert pool.release() == st["cached_bytes"]


def _locked_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmLck:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_pinned_pool_locks_pages_or_says_why():
    pool = PinnedHostPool()
    before = _locked_kib()
    buf = pool.acquire(1 << 20)
    buf.array[:] = 1
    if pool.page_locked:
        assert buf.locked and pool.fallback_reason == ""
        assert _locked_kib() - before >= 1024 and pool.stats()["locked_bytes"] == 1 << 20
    else:                                      # this process may not lock a MiB
        assert "RLIMIT_MEMLOCK" in pool.fallback_reason and not buf.locked
    pool.give_back(buf)
    pool.release()
    assert _locked_kib() == before


def test_pinned_pool_falls_back_to_pageable_when_told_to():
    pool = PinnedHostPool(lock_pages=False)
    buf = pool.acquire(10_000)
    buf.array[:] = 3
    assert int(buf.array.sum()) == 3 * buf.capacity
    assert not pool.page_locked and not buf.locked and pool.stats()["locked_bytes"] == 0
    assert "lock_pages=False" in pool.fallback_reason == pool.stats()["fallback_reason"]


SUBPROCESS = textwrap.dedent("""
    import ctypes, json, resource
    import numpy as np
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
    # root may lock regardless of the limit: give up CAP_IPC_LOCK (capability 14)
    libc = ctypes.CDLL(None, use_errno=True)
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    header, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) == 0:
        data[0].effective &= ~(1 << 14)
        data[0].permitted &= ~(1 << 14)
        libc.capset(ctypes.byref(header), data)
    from aircc.executor.device.copies import copy_h2d_async, copy_stats
    from aircc.executor.device.device import VirtualDevice
    from aircc.executor.device.pinned import pinned_pool
    dev = VirtualDevice(1 << 20)
    s = dev.create_stream()
    x = np.arange(5000, dtype=np.int32)
    copy_h2d_async(dev, 4096, x, s).wait(5)
    ok = bool((dev.memory.view(4096, np.int32, x.shape) == x).all())
    pool = copy_stats(dev)["pinned_pool"]
    print(json.dumps({"ok": ok, "page_locked": pool["page_locked"],
                      "reason": pool["fallback_reason"], "same": pinned_pool().fallback_reason}))
    dev.close()
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_MEMLOCK, capabilities")
def test_pinned_pool_falls_back_under_a_zero_memlock_limit():
    out = subprocess.run([sys.executable, "-c", SUBPROCESS], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ok"] and not got["page_locked"]
    assert "RLIMIT_MEMLOCK is 0 bytes (hard limit 0 bytes)" in got["reason"]
    assert "mlock of 32768 bytes failed with E" in got["reason"] and got["same"] == got["reason"]

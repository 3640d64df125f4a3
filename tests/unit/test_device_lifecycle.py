"""A device's life from creation to close, and its loss: a lost device's memory is written
over only once no kernel runs on it, and no kernel starts on it until it is reset; a closed
device gives its memory back at once and refuses use after close; a device too large for
the process's address space is a clear error; a stream starts its thread only for work."""
from __future__ import annotations

import gc
import os
import shlex
import subprocess
import sys
import threading

import numpy as np
import pytest

from aircc.errors import DeviceError, DeviceLostError
from aircc.executor.device.device import LOST_BYTE, VirtualDevice
from aircc.ops import KernelImpl


def blocking_kernel(inside: threading.Event, go_on: threading.Event, seen: list):
    """A kernel that tells it started, waits to be let go, then notes its output's bytes."""
    def kernel(ins, outs, attrs, tiling, ws):
        inside.set()
        go_on.wait(10)
        seen.append(bytes(outs[0][:4]))
    return KernelImpl("Blocking", 1, kernel=kernel)


def kernel_running(dev: VirtualDevice):
    """A 4096-byte allocation of ones, and a blocking kernel on a stream of ``dev`` writing
    it, now inside: (the allocation, the kernel's call, the stream, the event that lets it
    return, what it saw of its output at the end)."""
    out = dev.memory.view(dev.memory.malloc(4096), np.uint8, (4096,))
    out[:] = 1
    inside, go_on, seen = threading.Event(), threading.Event(), []
    call = dev.engine_call(blocking_kernel(inside, go_on, seen), "vector", [], [out], {}, {}, None)
    s = dev.create_stream()
    s.submit(call)
    assert inside.wait(10)
    return out, call, s, go_on, seen


def test_a_lost_device_is_written_over_only_once_its_running_kernel_returned():
    dev = VirtualDevice(1 << 20)
    try:
        out, call, s, go_on, seen = kernel_running(dev)
        dev.lose("test: lost while a kernel runs")
        assert dev.state.value == "fault"
        assert (out == 1).all()                 # the running kernel's memory is left alone
        go_on.set()
        s.synchronize(10)
        assert seen == [b"\x01" * 4]            # the kernel saw its own bytes to its end
        assert (out == LOST_BYTE).all()         # and then the contents were gone
        with pytest.raises(DeviceLostError, match="device 0 is lost"):
            call()                              # no kernel starts on a lost device
        dev.reset()
        out[:] = 2
        call_after = dev.engine_call(KernelImpl("Fill", 1, kernel=lambda i, o, a, t, w: o[0].fill(3)),
                                     "vector", [], [out], {}, {}, None)
        call_after()
        assert (out == 3).all()
    finally:
        dev.close()


def test_a_reset_before_a_stuck_kernel_returns_leaves_its_memory_alone():
    """A kernel that never returned before the reset: the device never writes over memory it
    may still use (its owner quarantines that memory) and works again after the reset."""
    dev = VirtualDevice(1 << 20)
    try:
        out, _, s, go_on, seen = kernel_running(dev)
        dev.lose("test: lost while a kernel is stuck")
        dev.reset()
        go_on.set()
        s.synchronize(10)
        assert (out == 1).all() and seen == [b"\x01" * 4]
        assert dev.state.value == "healthy"
    finally:
        dev.close()


def address_space_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmSize")) / 1024


def test_a_closed_device_gives_its_memory_back_at_once_and_refuses_use():
    gc.collect()
    gc.disable()                            # freed on close, not by the garbage collector
    try:
        before = address_space_mb()
        for _ in range(6):
            dev = VirtualDevice(512 << 20)
            dev.create_stream().synchronize(5)
            dev.close()
        grown = address_space_mb() - before
    finally:
        gc.enable()
    assert grown < 1024, f"address space grew by {grown:.0f} MB over 6 closed 512 MiB devices"
    for use in (lambda: dev.memory.malloc(64), lambda: dev.memory.view(0, np.float32, (4,)),
                lambda: dev.create_stream()):
        with pytest.raises(DeviceError, match="closed"):
            use()
    dev.lose("after close")                 # nothing to write over: no crash
    dev.close()                             # twice is harmless


LIMITED = """
import resource, sys
limit = 3 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import aircc
from aircc.errors import AirccError
try:
    aircc.VirtualDevice(8 << 30)
except AirccError as e:
    print(type(e).__name__, e.exit_code, e)
"""


def test_a_device_larger_than_the_address_space_allows_is_a_clear_error():
    out = subprocess.run([sys.executable, "-c", LIMITED], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(("DeviceError 5", "DeviceOutOfMemoryError 5")), out.stdout
    assert "8589934592" in out.stdout and "AIR_DEVICE_MEMORY" in out.stdout
    env = dict(os.environ, AIR_DEVICE_MEMORY="8G")
    env.pop("AIR_DEVICE_CONFIG", None)
    airrun = f"{shlex.quote(sys.executable)} -c 'from aircc.cli.airrun_cmd import main; main()'"
    run = subprocess.run(["bash", "-c", f"ulimit -v 3145728 && exec {airrun} --list-devices"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 5, (run.returncode, run.stderr)
    assert "AIR_DEVICE_MEMORY" in run.stderr and "internal error" not in run.stderr


def test_a_stream_starts_its_worker_only_for_work():
    dev = VirtualDevice(1 << 20)
    try:
        before = threading.active_count()
        streams = [dev.create_stream() for _ in range(64)]
        assert threading.active_count() == before
        ran = []
        streams[7].submit(lambda: ran.append(7))
        streams[7].synchronize(5)
        assert ran == [7] and threading.active_count() <= before + 1
        for s in streams:
            s.synchronize(5)                    # nothing queued: no worker starts to say so
        assert streams[7].workers_started == 1
        assert sum(s.workers_started for s in streams) == 1
        for s in streams:
            dev.destroy_stream(s)
        assert all(not s.alive for s in streams)
    finally:
        dev.close()

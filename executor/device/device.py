"""The virtual device: memory, streams, events, compute units, health, and a control
processor.

The host talks to the device through submissions (:mod:`.execution`: one per static
run).  Streams share the device's compute units, served by priority
(:mod:`.compute_units`); the device's health and its callbacks are in :mod:`.health`;
discovery finds devices and gives them logical ids (:mod:`.discovery`).

A run that passes its deadline is cancelled: walks stop at their next task and
event waits wake.  A walk still inside a kernel after a short grace is *stuck*:
the device records a fault, and the program's owner replaces the stuck streams
(:meth:`VirtualDevice.replace_streams`), keeping the memory the stuck kernel may
still write in quarantine until it returns (:mod:`.health`).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Collection
from typing import Callable

from aircc.config import settings
from aircc.errors import DeviceError, DeviceLostError
from aircc.ops import KernelImpl

from .caching_allocator import CachingAllocator, PoolOptions
from .compute_units import ComputeUnits, check_priority
from .cpus import check_cpus, parse_cpus  # noqa: F401  (parse_cpus: part of this module's API)
from .health import DeviceState, FaultRecord, HealthMonitor, Quarantine, StateCallback
from .kernel_gate import KernelGate
from .heartbeat import DEFAULT_INTERVAL, DEFAULT_MISSES, Heartbeat, start_heartbeat
from . import threads
from .execution import CANCEL_GRACE, ProgramExecution
from .memory import DeviceMemory
from .stream import Event, Stream


#: Byte written over device memory when the device is lost (its contents are gone).
LOST_BYTE = 0xA5


class VirtualDevice(ProgramExecution):
    """A device with ``memory_bytes`` of real memory and in-order streams.

    ``cpus`` (a set of CPU numbers or a list like ``"0"`` / ``"0-1"``; default
    ``$AIR_DEVICE_CPUS``, else ``aircc.set_threads`` CPUs no other process claimed when
    that is fewer than the process may use, else unpinned): the host CPUs the device's
    stream workers run on.  Handing a task from one thread to another costs a wake-up,
    and on an idle CPU of a virtual machine that is tens of microseconds; a small model
    whose host thread shares the workers' CPU hands over in a few.  The BLAS pool is not pinned: GEMMs
    still use every core.

    ``compute_units`` (default: as many as the CPUs its workers may use): how many of
    its streams run a task at once; ready tasks are served by stream priority, then in
    the order they were queued (:mod:`.compute_units`).  ``pool``: the settings of the
    device's caching allocator (:class:`~.caching_allocator.PoolOptions`).
    """

    def __init__(self, memory_bytes: int | None = None, device_id: int = 0, cpus=None, *,
                 compute_units: int | None = None, pool: PoolOptions | None = None,
                 name: str | None = None):
        if memory_bytes is None:
            memory_bytes = settings().device_memory
        if cpus is None:
            cpus = settings().device_cpus
        self.cpus = check_cpus(cpus) if cpus is not None else threads.worker_cpus()
        self.id = device_id
        """The logical id (what discovery gave it)."""
        self.physical_id = device_id
        self.name = name or f"dev{device_id}"
        self.memory = DeviceMemory(memory_bytes, f"device {self.name}'s memory")
        self.kernels = KernelGate()
        """The kernels running on the device (a lost device's memory is written over only
        once none runs: :mod:`.kernel_gate`)."""
        self.pool_options = pool or PoolOptions()
        self._pool: CachingAllocator | None = None
        if compute_units is None:
            compute_units = len(self.cpus) if self.cpus else threads.threads()
        self.units = ComputeUnits(compute_units)
        self._order = itertools.count()
        """The device's submission order (every queued task is stamped from it)."""
        self.streams: list[Stream] = []
        self.control = Stream(-1, name=f"dev{device_id}-control", cpus=self.cpus)
        """The control processor: runs programs with no task lists, and heartbeats."""
        self.stats = {"host_submissions": 0, "model_executions": 0, "tasks_run": 0,
                      "streams_replaced": 0, "resets": 0}
        self._lock = threading.Lock()
        self.cube = threading.Lock()
        """The matrix engine: kernels of ops whose engine is ``cube`` hold it while they
        run (the BLAS pool already spans every core; two at once only thrash).  Streams
        pinned to a group of CPUs take turns on that group's own (:meth:`cube_for`)."""
        self._cubes: dict[frozenset[int], threading.Lock] = {}
        self.closed = False
        self.health = HealthMonitor(self)
        self.epoch = 0
        """Bumped when the device loses its memory contents (a model that loaded before
        must write its weights again: ``LoadedModel`` does so before its next run)."""
        self.faults: list[FaultRecord] = []
        self.quarantines: list[Quarantine] = []
        """Memory held back from reuse while stuck kernels may still write it."""
        self.last_submit_seconds = 0.0
        self.fault_detection: Heartbeat | None = None    # the heartbeat (:mod:`.heartbeat`)

    def cube_for(self, cpus: Collection[int] | None) -> threading.Lock:
        """The matrix engine of streams on ``cpus`` (None: on every CPU, :attr:`cube`):
        kernels on disjoint groups of CPUs run their GEMMs side by side, each on a team
        as large as its group."""
        if not cpus:
            return self.cube
        key = frozenset(cpus)
        with self._lock:
            return self._cubes.setdefault(key, threading.Lock())

    def engine_call(self, impl: KernelImpl, engine: str, ins, outs, attrs, tiling, ws,
                    constant=None, prepared=None, cube: threading.Lock | None = None
                    ) -> Callable[[], None]:
        """``impl``'s kernel bound to its operands, on ``engine`` (the op's: ``cube`` kernels
        take turns on the matrix engine).

        ``constant`` (one flag per input: a weight, fixed for the model's life) says the
        operands stay bound as they are for many runs: the kernel's ``prepare`` then works
        out what it can once (without it, or when it declines, the kernel runs as is),
        keeping what it derives from weights in ``prepared`` (the model's
        :class:`~aircc.executor.device.prepared.PreparedConstants`).

        The call takes an optional argument it ignores, so that it serves as a device
        task itself (a task is called with its run), and returns None (a task that
        returns a number is a jump)."""
        bound = None
        if constant is not None and impl.prepare is not None:
            bound = impl.prepare(ins, outs, attrs, tiling, ws, constant, prepared=prepared)
        if bound is None:
            kernel = impl.kernel

            def bound():
                kernel(ins, outs, attrs, tiling, ws)
        gate = self.kernels
        if engine == "cube":
            cube = cube or self.cube

            def call(_run=None):
                with cube:
                    gate.enter()
                    try:
                        bound()
                    finally:
                        gate.leave()
        else:
            def call(_run=None):
                gate.enter()
                try:
                    bound()
                finally:
                    gate.leave()
        return call

    @contextlib.contextmanager
    def host_thread_on_device_cpus(self):
        """Run the calling (host) thread on the device's CPUs inside the block, then put
        its affinity back (threads it creates meanwhile inherit the pin).  No-op when
        the device is not pinned."""
        if not self.cpus:
            yield
            return
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.cpus)
        try:
            yield
        finally:
            os.sched_setaffinity(0, before)

    # ------------------------------------------------------------- resources
    def create_stream(self, priority: int | str = 0, cpus: Collection[int] | None = None) -> Stream:
        """A new stream; ``priority`` in [-7, 7] (higher is served first) or ``"low"``,
        ``"normal"``, ``"high"``; ``cpus``: its worker runs on these of the device's CPUs
        (its kernels' teams are as large as they are), else on all of them."""
        self.check_usable()
        try:
            priority = check_priority(priority)
        except ValueError as e:
            raise DeviceError(str(e)) from None
        with self._lock:
            s = self._new_stream(len(self.streams), priority, cpus)
            self.streams.append(s)
        return s

    def _new_stream(self, stream_id: int, priority: int,
                    cpus: Collection[int] | None = None) -> Stream:
        return Stream(stream_id, priority, name=self.name, cpus=cpus or self.cpus,
                      units=self.units, order=self._order)

    @property
    def caching_allocator(self) -> CachingAllocator:
        """The device's stream-aware caching allocator (created on first use with
        :attr:`pool_options`)."""
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = self.pool_options.make(self.memory)
        return self._pool

    def memory_stats(self) -> dict:
        """Device memory now: capacity, reserved (taken from device memory), allocated
        (in use), cached (held free by caching allocators), their peaks, and
        fragmentation (of the free device bytes, and of the cached bytes)."""
        mem = self.memory
        pools = [p for p in mem.pools if not p.recorded]   # a recorded run's blocks are in use
        cached_blocks = sum(p.stats()["cached_blocks"] for p in pools)
        largest_cached = max((p.largest_cached_block() for p in pools), default=0)
        return {"device": self.id, "capacity_bytes": mem.capacity,
                "reserved_bytes": mem.used, "allocated_bytes": mem.allocated,
                "cached_bytes": mem.cached, "free_bytes": mem.capacity - mem.used,
                "peak_reserved_bytes": mem.peak_used,
                "peak_allocated_bytes": mem.peak_allocated,
                "largest_free_block_bytes": mem.largest_free_block(),
                "fragmentation": round(mem.free_bytes_fragmentation(), 4),
                "cached_blocks": cached_blocks,
                "cached_fragmentation": round(0.0 if not mem.cached
                                              else 1.0 - largest_cached / mem.cached, 4),
                "pools": len(pools), "reuse": self.pool_options.reuse,
                "quarantined_bytes": self.quarantined_bytes}

    def release_cached(self) -> int:
        """Give every caching allocator's wholly free segments back to device memory (the
        ones no stream still has to finish with, and not a recorded run's: its blocks are the
        recording's); returns the bytes released."""
        return sum(p.release_cached() for p in list(self.memory.pools) if not p.recorded)

    def reset_peak_stats(self) -> None:
        self.memory.reset_peaks()
        for p in list(self.memory.pools):
            p.reset_peaks()

    def destroy_stream(self, stream: Stream) -> None:
        """End ``stream``'s worker after what it has queued (a worker stuck in a task is
        left to end when the task returns)."""
        if not stream.retired:
            stream.close(timeout=CANCEL_GRACE)
        with self._lock:
            if stream in self.streams:
                self.streams.remove(stream)

    @staticmethod
    def create_events(count: int) -> list[Event]:
        return [Event(i) for i in range(count)]

    def replace_streams(self, streams: list[Stream], indexes: list[int],
                        release: Callable[[], None] | None = None, nbytes: int = 0) -> Quarantine:
        """Put a new stream in ``streams`` in place of each one at ``indexes`` (their workers
        are stuck in a task) and :meth:`quarantine` the old ones with ``release``."""
        old = [streams[i] for i in indexes]
        with self._lock:
            for i, s in zip(indexes, old):
                new = self._new_stream(s.id, s.priority, s.cpus)
                streams[i] = new
                if s in self.streams:
                    self.streams[self.streams.index(s)] = new
                self.stats["streams_replaced"] += 1
        return self.quarantine(old, release, nbytes)

    def quarantine(self, streams: list[Stream], release: Callable[[], None] | None,
                   nbytes: int) -> Quarantine:
        """Retire ``streams`` (stuck in a task: they finish it and what is queued behind it,
        then end); ``release`` (giving back ``nbytes`` of memory those tasks may still
        write) runs once all of them have ended."""
        q = Quarantine(streams, release or (lambda: None), nbytes, self._quarantine_done)
        with self._lock:
            for s in streams:
                if s in self.streams:
                    self.streams.remove(s)
            if not q.done.is_set():
                self.quarantines.append(q)
        for s in streams:
            if s.units is not None:
                s.units.forfeit(s.holder)     # its unit is lent back until the kernel returns
            s.retire(q.stream_ended)
        return q

    def _quarantine_done(self, q: Quarantine) -> None:
        with self._lock:
            if q in self.quarantines:
                self.quarantines.remove(q)

    @property
    def quarantined_bytes(self) -> int:
        with self._lock:
            return sum(q.nbytes for q in self.quarantines)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until no memory is quarantined (every stuck kernel returned); False on
        timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                pending = list(self.quarantines)
            if not pending:
                return True
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            pending[0].done.wait(left)

    # ------------------------------------------------------------- health
    @property
    def state(self) -> DeviceState:
        """HEALTHY, RUNNING (work in flight), FAULT or UNAVAILABLE (:mod:`.health`)."""
        return self.health.state

    @property
    def usable(self) -> bool:
        """Can the device take work now (not closed, not faulted, not unavailable)?"""
        return self.health.health is DeviceState.HEALTHY and not self.closed

    def on_state_change(self, callback: StateCallback) -> Callable[[], None]:
        """Call ``callback(device, old, new, reason)`` whenever the device goes into or out
        of FAULT or UNAVAILABLE; returns a function that removes the callback."""
        return self.health.on_change(callback)

    def note_fault(self, kind: str, detail: str) -> None:
        self.faults.append(FaultRecord(kind, detail))

    def lose(self, reason: str) -> None:
        """The device stops answering and its memory contents are gone: it goes to FAULT,
        submissions fail with ``DeviceLostError`` and no kernel starts until :meth:`reset`.
        Every allocated byte is written over once no kernel runs on the device any more
        (at once if none runs: :mod:`.kernel_gate`)."""
        with self._lock:
            if self.health.health is not DeviceState.HEALTHY:
                return
            self.epoch += 1
        self.kernels.lose(f"device {self.id} is lost ({reason})", self._write_over)
        self.note_fault("lost", reason)
        self.health.change(DeviceState.FAULT, reason)

    def _write_over(self) -> None:
        """Every allocated byte becomes :data:`LOST_BYTE` (no kernel runs meanwhile)."""
        mem = self.memory
        for off, size in mem.allocations():
            mem.data[off:off + size] = LOST_BYTE

    def enter_fault(self, kind: str, reason: str) -> bool:
        """FAULT as after :meth:`lose` (``kind``: who found it, e.g. ``heartbeat``), but the
        memory left as it is; False if the device was not healthy."""
        with self._lock:
            if self.health.health is not DeviceState.HEALTHY:
                return False
            self.epoch += 1                  # models write their weights again after a reset
        self.note_fault(kind, reason)
        return self.health.change(DeviceState.FAULT, reason)

    def enable_fault_detection(self, interval: float = DEFAULT_INTERVAL,
                               misses: int = DEFAULT_MISSES) -> Heartbeat:
        """A heartbeat every ``interval`` seconds: ``misses`` missed in a row put the device
        in FAULT (:mod:`.heartbeat`; on already: the new values apply)."""
        return start_heartbeat(self, interval, misses)

    def disable_fault_detection(self) -> None:
        """Stop the heartbeat (its scheduler thread ends)."""
        beat, self.fault_detection = self.fault_detection, None
        if beat is not None:
            beat.stop()

    def inject_fault(self, reason: str = "injected fault") -> None:
        """Make the device fail now, as a hardware fault would (:meth:`lose`)."""
        self.lose(reason)

    def mark_unavailable(self, reason: str) -> None:
        """The device failed its start-up probe: it never takes work."""
        self.note_fault("probe", reason)
        self.health.change(DeviceState.UNAVAILABLE, reason)

    def reset(self) -> None:
        """Bring a faulted device back to HEALTHY: it serves work again.  Memory stays
        allocated to whom it was, but its contents are not restored: each model writes
        its weights again before its next run (it sees ``epoch`` changed).  A stream
        still stuck in a task is replaced by the model it belongs to, at that run's
        deadline.  An UNAVAILABLE device cannot be reset."""
        if self.health.health is DeviceState.UNAVAILABLE:
            raise DeviceError(f"device {self.id} is unavailable ({self.faults[-1].detail}); "
                              f"it cannot be reset")
        with self._lock:
            self.stats["resets"] += 1
        self.kernels.reopen()
        self.note_fault("reset", f"device {self.id} reset")
        self.health.change(DeviceState.HEALTHY, "reset")

    def check_usable(self) -> None:
        """DeviceError if closed or unavailable, DeviceLostError if faulted."""
        if self.closed:
            raise DeviceError(f"device {self.id} is closed")
        health = self.health.health
        if health is DeviceState.FAULT:
            raise DeviceLostError(f"device {self.id} is lost ({self.faults[-1].detail if self.faults else 'no answer'}); "
                                  f"reset it, or load the model with a recovery policy that "
                                  f"resets or fails over")
        if health is DeviceState.UNAVAILABLE:
            raise DeviceError(f"device {self.id} is unavailable: "
                              f"{self.faults[-1].detail if self.faults else 'it failed its probe'}")

    def run_on_control(self, task: Callable[[], None]) -> None:
        """Queue ``task`` on the device's control processor (probes, housekeeping)."""
        self.control.submit(task)

    def close(self, wait: bool = True) -> None:
        """End the device's workers (``wait``: up to a short grace each) and take no more
        work."""
        self.disable_fault_detection()
        grace = CANCEL_GRACE if wait else 0
        for s in list(self.streams):
            s.close(timeout=grace)
        self.streams.clear()
        self.control.close(timeout=grace)
        self.closed = True
        self.memory.close()        # its buffer goes now (a stuck kernel's views keep theirs)

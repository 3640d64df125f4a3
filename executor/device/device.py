"""The virtual device: memory, streams, events, and a control processor.

The host talks to the device through submissions.  A static model is run by
ONE submission, a model-execute task queued on the model's first stream: that
stream's worker hands every other stream its task list, then walks its own
(events order them), and the host is told when every stream is done.  (A
program with no task lists goes to the device's control processor.)
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from aircc.config import settings
from aircc.errors import AirccError, DeviceError, KernelError, StreamSyncTimeoutError
from aircc.ops import KernelImpl

from .memory import DeviceMemory
from .stream import Event, Stream

def parse_cpus(text: str) -> frozenset[int]:
    """``"0"``, ``"0,1"``, ``"0-3,6"`` -> a set of CPU numbers."""
    cpus: set[int] = set()
    text = text.replace(" ", "")
    if not text:
        raise DeviceError("empty CPU list: no CPU in it")
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise DeviceError(f"bad CPU list {text!r}: expected e.g. '0', '0,1' or '0-3'") from None
    if not cpus:
        raise DeviceError(f"bad CPU list {text!r}: no CPU in it")
    return frozenset(cpus)


def check_cpus(cpus) -> frozenset[int] | None:
    """``cpus`` (a CPU list string or numbers) checked against the CPUs this process may
    use; None stays None (no pinning)."""
    if cpus is None:
        return None
    cpus = parse_cpus(cpus) if isinstance(cpus, str) else frozenset(int(c) for c in cpus)
    if not hasattr(os, "sched_setaffinity"):
        raise DeviceError("pinning device workers to CPUs is not supported on this platform "
                          "(no sched_setaffinity)")
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed:
        raise DeviceError(f"device CPUs {sorted(cpus)} are not all available to this process "
                          f"(available: {sorted(allowed)})")
    return cpus


#: A device task: called by a stream worker with the run it belongs to; a control
#: task returns the index of the next task to run (None: the next one in the list).
Task = Callable[["Run"], "int | None"]


class Run:
    """One model execution in flight on the device.

    The record is made once per program and re-armed for every execution: the
    host only hands over the feeds and the result slots and takes the ``done``
    lock (:meth:`arm`); the model-execute task clears the rest (:meth:`start`)
    before any stream sees the run.
    """

    __slots__ = ("feeds", "results", "pending", "done", "error", "cancelled",
                 "base", "records", "waits", "_lock", "_streams")

    def __init__(self, streams: int):
        self.feeds: list = []
        self.results: list = []
        self._streams = self.pending = streams
        self.done = threading.Lock()      # held from arm() until the last stream finishes
        self.error: BaseException | None = None
        self.cancelled = False
        self.base: list[int] = []
        """Each event's generation when the run started."""
        self.records: list[int] = []
        """Records of each event so far in this run (a loop records once per iteration)."""
        self.waits: list[int] = []
        self._lock = threading.Lock()

    def arm(self, feeds: list, results: list) -> None:
        """Host side of a new execution: its feeds, its result slots, and ``done`` taken."""
        self.feeds, self.results = feeds, results
        self.done.acquire()

    def start(self, events: list[Event]) -> None:
        """Device side: clear what the last execution left (by the model-execute task)."""
        self.pending = self._streams
        self.error, self.cancelled = None, False
        self.base = [ev._generation for ev in events]
        self.records = [0] * len(events)
        self.waits = [0] * len(events)

    def wait_done(self, timeout: float | None) -> bool:
        if self.done.acquire(timeout=-1 if timeout is None else timeout):
            self.done.release()
            return True
        return False

    def record(self, event: Event, e: int) -> None:
        """The n-th record of event e in this run marks generation base + n."""
        self.records[e] += 1
        event.record(self.base[e] + self.records[e])

    def wait(self, event: Event, e: int) -> None:
        """The n-th wait on event e in this run waits for the n-th record."""
        self.waits[e] += 1
        if not event.wait(self.base[e] + self.waits[e], lambda: self.cancelled):
            raise Cancelled()

    def fail(self, error: BaseException, events: list[Event]) -> None:
        with self._lock:
            if self.error is None:
                self.error = error
            self.cancelled = True
        for e in events:
            e.cancel()

    def stream_finished(self) -> None:
        with self._lock:
            self.pending -= 1
            last = self.pending == 0
        if last:
            self.done.release()


class Cancelled(Exception):
    """Raised inside a stream walk when its run was cancelled."""


@dataclass(eq=False)
class DeviceProgram:
    """A loaded static model as the device keeps it: task lists bound to streams."""

    streams: list[Stream]
    events: list[Event]
    lists: list[list[tuple[Task, dict]]]
    """Per stream: (callable, task description) in order."""
    run: "Run | None" = None
    """The run record, reused by every execution (one at a time: ``lock``)."""
    dispatch: "Callable[[], None] | None" = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class VirtualDevice:
    """A device with ``memory_bytes`` of real memory and in-order streams.

    ``cpus`` (a set of CPU numbers or a list like ``"0"`` / ``"0-1"``; default
    ``$AIR_DEVICE_CPUS``, else unpinned): the host CPUs the device's stream workers run
    on.  Handing a task from one thread to another costs a wake-up, and on an idle CPU
    of a virtual machine that is tens of microseconds; a small model whose host thread
    shares the workers' CPU hands over in a few.  The BLAS pool is not pinned: GEMMs
    still use every core.
    """

    def __init__(self, memory_bytes: int | None = None, device_id: int = 0, cpus=None):
        if memory_bytes is None:
            memory_bytes = settings().device_memory
        if cpus is None:
            cpus = settings().device_cpus
        self.cpus = check_cpus(cpus)
        self.id = device_id
        self.memory = DeviceMemory(memory_bytes)
        self.streams: list[Stream] = []
        self._control = Stream(-1, name=f"dev{device_id}-control", cpus=self.cpus)
        self.stats = {"host_submissions": 0, "model_executions": 0, "tasks_run": 0}
        self._lock = threading.Lock()
        self.cube = threading.Lock()
        """The matrix engine: kernels of ops whose engine is ``cube`` hold it while they
        run (the BLAS pool already spans every core; two at once only thrash)."""
        self.closed = False

    def engine_call(self, impl: KernelImpl, engine: str, ins, outs, attrs, tiling, ws,
                    constant=None, prepared=None) -> Callable[[], None]:
        """``impl``'s kernel bound to its operands, on ``engine`` (the op's: ``cube`` kernels
        take turns on the matrix engine).

        ``constant`` (one flag per input: a weight, fixed for the model's life) says the
        operands stay bound as they are for many runs: the kernel's ``prepare`` then works
        out what it can once (without it, or when it declines, the kernel runs as is),
        keeping what it derives from weights in ``prepared`` (the model's
        :class:`~aircc.executor.device.prepared.PreparedConstants`)."""
        call = bound = None
        if constant is not None and impl.prepare is not None:
            bound = impl.prepare(ins, outs, attrs, tiling, ws, constant, prepared=prepared)
        if bound is not None:
            def call():                  # a task returns None (a control task, a jump)
                bound()
        else:
            kernel = impl.kernel

            def call():
                kernel(ins, outs, attrs, tiling, ws)
        if engine == "cube":
            cube, run = self.cube, call

            def call():
                with cube:
                    run()
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
    def create_stream(self, priority: int = 0) -> Stream:
        self._check_open()
        s = Stream(len(self.streams), priority, name=f"dev{self.id}", cpus=self.cpus)
        self.streams.append(s)
        return s

    def destroy_stream(self, stream: Stream) -> None:
        stream.close()
        if stream in self.streams:
            self.streams.remove(stream)

    @staticmethod
    def create_events(count: int) -> list[Event]:
        return [Event(i) for i in range(count)]

    # ------------------------------------------------------------- execution
    def execute(self, program: DeviceProgram, feeds: list, results: list,
                timeout: float | None = None) -> None:
        """Run a static program: one host submission, the device does the rest.

        ``results`` holds one slot per output binding; the program's device-to-host
        copies fill them (a slot may come preset, e.g. an output known on the host).
        """
        t0 = time.thread_time()
        run = self.submit(program, feeds, results)
        self.last_submit_seconds = time.thread_time() - t0   # host CPU spent submitting
        self.finish(program, run, timeout)

    def submit(self, program: DeviceProgram, feeds: list, results: list) -> Run:
        """The host's half of :meth:`execute`: arm the program's run record and hand it to
        the device (its first stream).  Holds ``program.lock`` until :meth:`finish`."""
        if self.closed:
            self._check_open()
        program.lock.acquire()     # one execution of a program at a time: its run record is reused
        run = program.run
        if run is None:
            run = program.run = Run(len(program.lists))
            program.dispatch = lambda: self._dispatch(program, run)
        run.arm(feeds, results)
        (program.streams[0] if program.lists else self._control).submit(program.dispatch)
        return run

    def finish(self, program: DeviceProgram, run: Run, timeout: float | None = None) -> None:
        """Wait for a submitted execution; raise what failed on the device."""
        try:
            if not run.wait_done(timeout):
                run.fail(StreamSyncTimeoutError(f"model execution did not finish within {timeout} s"),
                         program.events)
                run.wait_done(None)
            if run.error is not None:
                raise run.error
        finally:
            program.lock.release()

    def _dispatch(self, program: DeviceProgram, run: Run) -> None:
        """The model-execute task, on the first stream: start the run, give each other
        stream its task list, walk the first one here."""
        self.stats["host_submissions"] += 1
        self.stats["model_executions"] += 1
        run.start(program.events)
        if not program.lists:
            run.done.release()
            return
        for stream, tasks in zip(program.streams[1:], program.lists[1:]):
            stream.submit(lambda tasks=tasks: self._walk(tasks, run, program.events))
        self._walk(program.lists[0], run, program.events)

    def _walk(self, tasks: list[tuple[Task, dict]], run: Run, events: list[Event]) -> None:
        """A stream worker walks its task list; control tasks return the index to jump to."""
        pc, n, ran = 0, len(tasks), 0
        desc: dict = {}
        try:
            while pc < n:
                if run.cancelled:
                    break
                fn, desc = tasks[pc]
                jump = fn(run)
                pc = pc + 1 if jump is None else jump
                ran += 1
            self.stats["tasks_run"] += ran
        except Cancelled:
            pass
        except AirccError as e:
            run.fail(e, events)
        except BaseException as e:  # a kernel failed: name the node and op
            run.fail(KernelError(desc.get("node", desc.get("kind", "?")),
                                 desc.get("op", desc.get("kind", "?")), e), events)
        finally:
            run.stream_finished()

    def close(self) -> None:
        for s in list(self.streams):
            s.close()
        self.streams.clear()
        self._control.close()
        self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise DeviceError(f"device {self.id} is closed")


_default: VirtualDevice | None = None
_default_lock = threading.Lock()


def default_device() -> VirtualDevice:
    """The process-wide device 0 (created on first use)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = VirtualDevice()
        return _default

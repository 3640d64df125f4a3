"""The virtual device: memory, streams, events, and a control processor.

The host talks to the device through submissions.  A static model is run by
ONE submission, a model-execute task queued on the model's first stream: that
stream's worker hands every other stream its task list, then walks its own
(events order them), and the host is told when every stream is done.  (A
program with no task lists goes to the device's control processor.)

A run that passes its deadline is cancelled: walks stop at their next task and
event waits wake.  A walk still inside a kernel after a short grace is *stuck*:
the device records a fault, and the program's owner replaces the stuck streams
(:meth:`VirtualDevice.replace_streams`), keeping the memory the stuck kernel may
still write in quarantine until it returns (:mod:`.health`).
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Callable

from aircc import faults
from aircc.config import settings
from aircc.errors import (AirccError, DeviceError, DeviceLostError, DeviceOutOfMemoryError,
                          KernelError, RunTimeoutError)
from aircc.faults import Fault, FaultKind, InjectedFault
from aircc.ops import KernelImpl

from .cpus import check_cpus, parse_cpus  # noqa: F401  (parse_cpus: part of this module's API)
from .health import DeviceState, FaultRecord, Quarantine
from . import threads
from .memory import DeviceMemory
from .run import Cancelled, DeviceProgram, Run, Task
from .stream import Event, Stream

#: Seconds a cancelled run's walks get to stop at a task boundary before the ones still
#: inside a kernel count as stuck.
CANCEL_GRACE = 0.2

#: Byte written over device memory when the device is lost (its contents are gone).
LOST_BYTE = 0xA5


class VirtualDevice:
    """A device with ``memory_bytes`` of real memory and in-order streams.

    ``cpus`` (a set of CPU numbers or a list like ``"0"`` / ``"0-1"``; default
    ``$AIR_DEVICE_CPUS``, else the first ``aircc.set_threads`` CPUs when that is fewer
    than the process may use, else unpinned): the host CPUs the device's stream workers
    run on.  Handing a task from one thread to another costs a wake-up, and on an idle CPU
    of a virtual machine that is tens of microseconds; a small model whose host thread
    shares the workers' CPU hands over in a few.  The BLAS pool is not pinned: GEMMs
    still use every core.
    """

    def __init__(self, memory_bytes: int | None = None, device_id: int = 0, cpus=None):
        if memory_bytes is None:
            memory_bytes = settings().device_memory
        if cpus is None:
            cpus = settings().device_cpus
        self.cpus = check_cpus(cpus) if cpus is not None else threads.worker_cpus()
        self.id = device_id
        self.memory = DeviceMemory(memory_bytes)
        self.streams: list[Stream] = []
        self._control = Stream(-1, name=f"dev{device_id}-control", cpus=self.cpus)
        self.stats = {"host_submissions": 0, "model_executions": 0, "tasks_run": 0,
                      "streams_replaced": 0, "resets": 0}
        self._lock = threading.Lock()
        self.cube = threading.Lock()
        """The matrix engine: kernels of ops whose engine is ``cube`` hold it while they
        run (the BLAS pool already spans every core; two at once only thrash)."""
        self.closed = False
        self.state = DeviceState.HEALTHY
        self.epoch = 0
        """Bumped when the device loses its memory contents (a model that loaded before
        must write its weights again: ``LoadedModel`` does so before its next run)."""
        self.faults: list[FaultRecord] = []
        self.quarantines: list[Quarantine] = []
        """Memory held back from reuse while stuck kernels may still write it."""
        self.last_submit_seconds = 0.0

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
        self.check_usable()
        with self._lock:
            s = Stream(len(self.streams), priority, name=f"dev{self.id}", cpus=self.cpus)
            self.streams.append(s)
        return s

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
                new = Stream(s.id, s.priority, name=f"dev{self.id}", cpus=self.cpus)
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
    def note_fault(self, kind: str, detail: str) -> None:
        self.faults.append(FaultRecord(kind, detail))

    def lose(self, reason: str) -> None:
        """The device stops answering and its memory contents are gone (every allocated
        byte is overwritten): submissions fail with ``DeviceLostError`` until :meth:`reset`."""
        with self._lock:
            if self.state is DeviceState.LOST:
                return
            self.state = DeviceState.LOST
            self.epoch += 1
        for off, size in self.memory.allocations():
            self.memory.data[off:off + size] = LOST_BYTE
        self.note_fault("lost", reason)

    def reset(self) -> None:
        """Bring a lost device back: it serves work again.  Memory stays allocated to whom
        it was, but its contents are not restored: each model writes its weights again
        before its next run (it sees ``epoch`` changed).  A stream still stuck in a task
        is replaced by the model it belongs to, at that run's deadline."""
        with self._lock:
            self.state = DeviceState.HEALTHY
            self.stats["resets"] += 1
        self.note_fault("reset", f"device {self.id} reset")

    def check_usable(self) -> None:
        """DeviceError if closed, DeviceLostError if lost."""
        if self.closed:
            raise DeviceError(f"device {self.id} is closed")
        if self.state is DeviceState.LOST:
            raise DeviceLostError(f"device {self.id} is lost ({self.faults[-1].detail if self.faults else 'no answer'}); "
                                  f"reset it, or load the model with a recovery policy that "
                                  f"resets or fails over")

    def fire(self, fault: Fault, node: str, nbytes: int = 0) -> None:
        """Make an injected ``fault`` happen in the kernel of ``node`` (on its stream)."""
        if not faults.fire(fault):
            return
        kind = fault.kind
        if kind is FaultKind.KERNEL_ERROR:
            raise InjectedFault(f"injected kernel error in node '{node}'")
        if kind is FaultKind.HANG:
            fault.hang()
        elif kind is FaultKind.OOM:
            raise DeviceOutOfMemoryError(nbytes, 0, self.memory.capacity,
                                         f"node '{node}' (injected fault)")
        elif kind is FaultKind.DEVICE_LOST:
            self.lose(f"injected at node '{node}'")
            raise DeviceLostError(f"device {self.id} was lost while running node '{node}' "
                                  f"(injected fault)")

    # ------------------------------------------------------------- execution
    def execute(self, program: DeviceProgram, feeds: list, results: list,
                timeout: float | None = None, faults_plan: dict | None = None) -> None:
        """Run a static program: one host submission, the device does the rest.

        ``results`` holds one slot per output binding; the program's device-to-host
        copies fill them (a slot may come preset, e.g. an output known on the host).
        """
        t0 = time.thread_time()
        run = self.submit(program, feeds, results, faults_plan)
        self.last_submit_seconds = time.thread_time() - t0   # host CPU spent submitting
        self.finish(program, run, timeout)

    def submit(self, program: DeviceProgram, feeds: list, results: list,
               faults_plan: dict | None = None) -> Run:
        """The host's half of :meth:`execute`: arm the program's run record and hand it to
        the device (its first stream).  Holds ``program.lock`` until :meth:`finish`."""
        if self.state is not DeviceState.HEALTHY or self.closed:
            self.check_usable()
        program.lock.acquire()     # one execution of a program at a time: its run record is reused
        run = program.run
        if run is None:
            run = program.run = Run(len(program.lists))
            program.dispatch = lambda: self._dispatch(program, run)
        run.arm(feeds, results, faults_plan)
        (program.streams[0] if program.lists else self._control).submit(program.dispatch)
        return run

    def finish(self, program: DeviceProgram, run: Run, timeout: float | None = None) -> None:
        """Wait for a submitted execution; raise what failed on the device.

        Past ``timeout`` the run is cancelled and a :class:`RunTimeoutError` names where
        each unfinished stream was; its ``stuck`` lists the streams still inside a task
        after :data:`CANCEL_GRACE` (the run record is then abandoned to them: the
        program's owner must replace those streams before the program runs again)."""
        try:
            if not run.wait_done(timeout):
                busy = sorted(run.stuck(), key=lambda i: not program.in_kernel(run, i))
                where = [program.where(run, i) for i in busy]
                error = RunTimeoutError(
                    f"model '{program.name}': the run passed its deadline of {timeout:g} s in "
                    f"{'; '.join(where) or 'no stream'}",
                    stream=busy[0] if busy else None, task=where[0] if where else "")
                run.fail(error, program.events)
                if not run.wait_done(CANCEL_GRACE):
                    self.abandon(program, run, error)
            if run.error is not None:
                raise run.error
        finally:
            program.lock.release()

    def abandon(self, program: DeviceProgram, run: Run, error: BaseException) -> list[int]:
        """Give up on a cancelled run whose walks are stuck: a fault on the device, the run
        record left to them, and ``error`` (a RunTimeoutError) told which streams are
        stuck.  Returns them."""
        stuck = run.stuck()
        if isinstance(error, RunTimeoutError):
            error.stuck = stuck
        if stuck and not run.abandoned:
            self.note_fault("timeout", f"{program.name}: "
                                       f"{'; '.join(program.where(run, i) for i in stuck)}")
        program.run = None
        run.abandon()
        return stuck

    def _dispatch(self, program: DeviceProgram, run: Run) -> None:
        """The model-execute task, on the first stream: start the run, give each other
        stream its task list, walk the first one here."""
        self.stats["host_submissions"] += 1
        self.stats["model_executions"] += 1
        run.start(program.events)
        if not program.lists:
            run.done.release()
            return
        walk = self._walk if run.faults is None else self._walk_with_faults
        for i in range(1, len(program.lists)):
            program.streams[i].submit(lambda i=i: walk(program.lists[i], run, program.events, i))
        walk(program.lists[0], run, program.events, 0)

    def _walk(self, tasks: list[tuple[Task, dict]], run: Run, events: list[Event],
              index: int) -> None:
        """A stream worker walks its task list; control tasks return the index to jump to."""
        pc, n, ran = 0, len(tasks), 0
        at = run.at
        desc: dict = {}
        try:
            while pc < n:
                if run.cancelled:
                    break
                at[index] = pc
                fn, desc = tasks[pc]
                jump = fn(run)
                pc = pc + 1 if jump is None else jump
                ran += 1
            self.stats["tasks_run"] += ran
        except BaseException as e:
            self._failed(run, events, desc, e)
        finally:
            run.stream_finished(index)

    def _walk_with_faults(self, tasks: list[tuple[Task, dict]], run: Run, events: list[Event],
                          index: int) -> None:
        """:meth:`_walk` for a run that injected faults may hit (checked before each kernel)."""
        plan = run.faults
        pc, n = 0, len(tasks)
        desc: dict = {}
        try:
            while pc < n and not run.cancelled:
                run.at[index] = pc
                fn, desc = tasks[pc]
                node = desc.get("node")
                if node is not None:
                    fault = faults.pick(plan, node)
                    if fault is not None:
                        self.fire(fault, node)
                jump = fn(run)
                pc = pc + 1 if jump is None else jump
        except BaseException as e:
            self._failed(run, events, desc, e)
        finally:
            run.stream_finished(index)

    @staticmethod
    def _failed(run: Run, events: list[Event], desc: dict, e: BaseException) -> None:
        if isinstance(e, Cancelled):
            return
        if not isinstance(e, AirccError):       # a kernel failed: name the node and op
            e = KernelError(desc.get("node", desc.get("kind", "?")),
                            desc.get("op", desc.get("kind", "?")), e)
        run.fail(e, events)

    def close(self) -> None:
        for s in list(self.streams):
            s.close(timeout=CANCEL_GRACE)
        self.streams.clear()
        self._control.close(timeout=CANCEL_GRACE)
        self.closed = True


_default: VirtualDevice | None = None
_default_lock = threading.Lock()


def default_device() -> VirtualDevice:
    """The process-wide device 0 (created on first use)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = VirtualDevice()
        return _default

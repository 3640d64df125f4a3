"""The device's half of running a program: one host submission, then the device's
streams walk their task lists (events order them), and the host waits for the end.

A static model is run by ONE submission, a model-execute task queued on the model's
first stream: that stream's worker hands every other stream its task list, then walks
its own, and the host is told when every stream is done.  (A program with no task
lists goes to the device's control processor.)  A short program of one stream the host
may walk itself instead, in the worker's place (:meth:`ProgramExecution.submit`).  A walk
offers its compute unit to a waiting stream of higher priority at each task boundary
(:mod:`.compute_units`).

:class:`ProgramExecution` is a part of :class:`~.device.VirtualDevice` (its
``execute``, ``submit``, ``finish``, ``abandon`` and fault firing), kept here so
that the device's resources and its execution read apart.
"""
from __future__ import annotations

import time

from aircc import faults
from aircc.errors import AirccError, DeviceError, DeviceLostError, DeviceOutOfMemoryError, \
    KernelError, RunTimeoutError
from aircc.faults import Fault, FaultKind, InjectedFault

from . import threads
from .compute_units import Holder
from .doorbell import host_spin_ns
from .health import DeviceState
from .heartbeat import hang_control
from .run import Cancelled, DeviceProgram, Run, Task
from .stream import Event, worker_holder

#: Seconds a cancelled run's walks get to stop at a task boundary before the ones still
#: inside a kernel count as stuck.
CANCEL_GRACE = 0.2
#: A one-stream program on one CPU expected to take less than this many seconds is walked
#: by the host itself (:meth:`ProgramExecution.submit`) ...
HOST_WALK_SECONDS = 1e-3
#: ... when the run's deadline is at least this many times that (a walk on the host's
#: thread stops at a task boundary, never inside a kernel) ...
HOST_WALK_MARGIN = 100
#: ... and a stream worker walked it within this many seconds (what it saw of the
#: program's CPUs is what lets the host walk it).
WORKER_CHECK_SECONDS = 1.0


class ProgramExecution:
    """Running programs on the device (mixed into :class:`~.device.VirtualDevice`)."""

    def fire(self, fault: Fault, node: str, nbytes: int = 0) -> bool:
        """Make an injected ``fault`` happen in the kernel of ``node`` (on its stream);
        True when it is a ``corrupt`` fault, which the caller applies to the kernel's
        outputs once the kernel has run."""
        if not faults.fire(fault):
            return False
        kind = fault.kind
        if kind is FaultKind.CORRUPT:
            return True
        if kind is FaultKind.KERNEL_ERROR:
            raise InjectedFault(f"injected kernel error in node '{node}'")
        if kind is FaultKind.HANG:
            fault.hang()
        elif kind is FaultKind.UNRESPONSIVE:       # the control processor stops answering too
            hang_control(self, fault.seconds, fault.released)
            fault.hang()
        elif kind is FaultKind.OOM:
            raise DeviceOutOfMemoryError(nbytes, 0, self.memory.capacity,
                                         f"node '{node}' (injected fault)")
        elif kind is FaultKind.DEVICE_LOST:
            self.lose(f"injected at node '{node}'")
            raise DeviceLostError(f"device {self.id} was lost while running node '{node}' "
                                  f"(injected fault)")
        return False

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
        the device (its first stream).  Holds ``program.lock`` until :meth:`finish`.

        A short program of one stream that used one CPU (:data:`HOST_WALK_SECONDS`,
        :attr:`~.run.DeviceProgram.one_cpu`), with no fault planned and no profile, is
        left to :meth:`finish`, which walks it on the host's thread in the stream
        worker's place (:meth:`~.stream.Stream.run_here`) when the stream is idle and the
        run's deadline allows (:data:`HOST_WALK_MARGIN`), else queues it then: a run of
        some 20 us of kernels saves two thread wake-ups (25-50 us on a virtual machine
        where no thread spins, as with ``--threads 1``)."""
        if self.health.health is not DeviceState.HEALTHY or self.closed:
            self.check_usable()
        program.lock.acquire()     # one execution of a program at a time: its run record is reused
        run = program.run
        if run is None:
            run = program.run = Run(len(program.lists))
            program.dispatch = lambda: self._dispatch(program, run)
            program.host_dispatch = lambda holder: self._dispatch(program, run, holder)
        run.arm(feeds, results, faults_plan)
        self.health.started()
        run.parallel_calls = threads.parallel_calls
        run.submitted = now = time.perf_counter()
        expected = program.expected
        if faults_plan is None and program.one_cpu and program.lists and expected is not None \
                and expected < HOST_WALK_SECONDS and program.profile is None \
                and now - program.worker_walked < WORKER_CHECK_SECONDS:
            run.host_walk, run.kick = True, None
            return run
        run.host_walk = False
        stream = program.streams[0] if program.lists else self.control
        stream.submit(program.dispatch, ring=False)    # finish() rings as it starts to wait
        run.kick = stream.bell
        return run

    def finish(self, program: DeviceProgram, run: Run, timeout: float | None = None) -> None:
        """Wait for a submitted execution; raise what failed on the device.

        Past ``timeout`` the run is cancelled and a :class:`RunTimeoutError` names where
        each unfinished stream was; its ``stuck`` lists the streams still inside a task
        after :data:`CANCEL_GRACE` (the run record is then abandoned to them: the
        program's owner must replace those streams before the program runs again)."""
        try:
            walked = run.host_walk and self._walk_here(program, run, timeout)
            spin = 0 if walked or not program.one_cpu else host_spin_ns(program.expected)
            if not run.wait_done(timeout, spin):
                busy = sorted(run.stuck(), key=lambda i: not program.in_kernel(run, i))
                where = [program.where(run, i) for i in busy]
                error = RunTimeoutError(
                    f"model '{program.name}': the run passed its deadline of {timeout:g} s in "
                    f"{'; '.join(where) or 'no stream'}",
                    stream=busy[0] if busy else None, task=where[0] if where else "")
                run.fail(error, program.events)
                if not run.wait_done(CANCEL_GRACE):
                    self.abandon(program, run, error)
            took = time.perf_counter() - run.submitted
            program.expected = took if program.expected is None else \
                0.75 * program.expected + 0.25 * took
            if not walked:
                program.one_cpu = len(program.lists) <= 1 and threads.one_cpu_kernels() \
                    and threads.parallel_calls == run.parallel_calls
                program.worker_walked = run.submitted
            elif timeout is not None and took > timeout and run.error is None:
                raise RunTimeoutError(f"model '{program.name}': the run passed its deadline of "
                                      f"{timeout:g} s (it took {took:.3g} s on the host's thread)",
                                      stream=0, task=program.where(run, 0))
            if run.error is not None:
                raise run.error
            for k, r in enumerate(run.results):   # never an answer with a hole in it
                if r is None:
                    raise DeviceError(f"model '{program.name}': the run ended without copying "
                                      f"out output {k} and without an error")
        finally:
            self.health.finished()
            program.lock.release()

    def _walk_here(self, program: DeviceProgram, run: Run, timeout: float | None) -> bool:
        """The start of :meth:`finish` for a run :meth:`submit` left to the host: walk it on
        this thread (True), or queue it on its stream now (False)."""
        run.host_walk = False
        stream = program.streams[0]
        if (timeout is None or timeout >= HOST_WALK_MARGIN * program.expected) \
                and stream.run_here(program.host_dispatch):
            return True
        stream.submit(program.dispatch, ring=False)    # wait_done rings it
        run.kick = stream.bell
        return False

    def faulted(self) -> DeviceLostError | None:
        """What a run on the device is told once the device is in FAULT (None: it is not).
        A model registers its run only after submitting it; one that finds the device
        faulted then stops its run itself (the device's callbacks may have come too early)."""
        if self.health.health is not DeviceState.FAULT:
            return None
        why = self.faults[-1].detail if self.faults else "no answer"
        return DeviceLostError(f"device {self.id} faulted during the run ({why})")

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

    def _dispatch(self, program: DeviceProgram, run: Run, holder: Holder | None = None) -> None:
        """The model-execute task, on the first stream: start the run, give each other
        stream its task list, walk the first one here (``holder``: the compute-unit holder
        it walks with, when not the calling worker's)."""
        self.stats["host_submissions"] += 1
        self.stats["model_executions"] += 1
        run.start(program.events)
        if not program.lists:
            run.release()
            return
        if run.faults is None and program.profile is None:
            walk = self._walk
        else:
            def walk(tasks, run, events, index, holder=None):
                self._walk_checked(tasks, run, events, index, program, holder)
        for i in range(1, len(program.lists)):
            program.streams[i].submit(lambda i=i: walk(program.lists[i], run, program.events, i))
        walk(program.lists[0], run, program.events, 0, holder)

    def _walk(self, tasks: list[tuple[Task, dict]], run: Run, events: list[Event],
              index: int, holder: Holder | None = None) -> None:
        """A stream worker walks its task list; control tasks return the index to jump to."""
        pc, n, ran = 0, len(tasks), 0
        at = run.at
        desc: dict = {}
        units = self.units
        if holder is None:
            holder = worker_holder()
        try:
            while pc < n:
                if run.cancelled:
                    break
                if units.top is not None and holder is not None:
                    units.yield_point(holder)     # a higher-priority stream has work ready
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

    def _walk_checked(self, tasks: list[tuple[Task, dict]], run: Run, events: list[Event],
                      index: int, program: DeviceProgram, holder: Holder | None = None) -> None:
        """:meth:`_walk` for a run that injected faults may hit (checked before each
        kernel) or that a profiler records (each task timed)."""
        plan, prof = run.faults, program.profile
        stream = program.streams[index].id
        if prof is not None:
            prof.name_stream(self.id, stream, f"{program.name} stream {index}")
        clock = time.perf_counter
        pc, n = 0, len(tasks)
        desc: dict = {}
        units = self.units
        if holder is None:
            holder = worker_holder()
        try:
            while pc < n and not run.cancelled:
                if units.top is not None and holder is not None:
                    units.yield_point(holder)     # a higher-priority stream has work ready
                run.at[index] = pc
                fn, desc = tasks[pc]
                node = desc.get("node")
                corrupt = None
                if plan is not None and node is not None:
                    fault = faults.pick(plan, node)
                    if fault is not None and self.fire(fault, node):
                        corrupt = fault
                if prof is None:
                    jump = fn(run)
                else:
                    start = clock()
                    jump = fn(run)
                    prof.task(self.id, stream, desc, start, clock(), _event_key(run, desc))
                if corrupt is not None:       # a kernel task's outputs: its binder's note
                    corrupt.corrupt(getattr(fn, "outputs", ()))
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


def _event_key(run: Run, desc: dict) -> tuple | None:
    """(event, generation) of an event task that just ran (pairs a record with its waits)."""
    e = desc.get("event")
    if e is None:
        return None
    counts = run.records if desc["kind"] == "event_record" else run.waits
    return (e, run.base[e] + counts[e])

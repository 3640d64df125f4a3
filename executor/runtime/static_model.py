"""Runs a static (sink-mode) .om on a virtual device.

Load: reserve the weights region and the activation arena in device memory,
copy the weights in, create the model's streams and events, and bind every
task to numpy views of its device addresses (operands a kernel derives from the
weights, such as Winograd-domain weights, are made then, in device memory too).
A load that fails (the device's memory is full, the file names a task it cannot
bind) gives back everything it took.  Run: check the feeds, then one
submission to the device, which walks the per-stream task lists itself.

A task touches only its own model's regions: every operand is checked against the
region's size when it is bound (and the reader checked it against the plan).  A run
whose kernel is stuck past its deadline leaves its activation arena in quarantine:
the model takes a new arena, binds its tasks to it again and gets new streams in
place of the stuck ones (:meth:`StaticModel._recover_stuck`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from time import perf_counter
from types import MappingProxyType
from typing import Mapping

import numpy as np

from aircc import faults
from aircc.errors import AirccError, InputError, ModelFormatError
from aircc.executor.device.copy_counters import ModelCopies
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.run import DeviceProgram, Run
from aircc.formats import ModelContract, OmFile, StaticPlan
from aircc.executor.device.tensor import DeviceTensor
from aircc.formats.kinds import Region, TaskKind
from aircc.formats.model_section import IOSpec
from aircc.ops import KernelBackend, Target

from aircc.executor.device.compute_units import stream_priority
from .engine import ProgramSlot, StaticRunStats
from .feeds import check_feeds, exact_feeds, select_outputs
from .residency import Residency
from .static_tasks import TaskBinder


@dataclass(frozen=True)
class StaticModelPlan:
    """A static model as its runs read it: made once at load, never changed."""

    name: str
    inputs: tuple[IOSpec, ...]
    outputs: tuple[IOSpec, ...]
    plans: tuple[StaticPlan, ...]
    """One per gear, else the model's own."""
    batch_inputs: tuple[str, ...]
    """The inputs whose first dim picks a gear (none without gears)."""
    weights_bytes: int
    arena_bytes: int
    """The largest plan's: the gears share one arena."""
    streams: int
    events: int
    priorities: tuple[int, ...]
    """The compiled priority of each stream."""
    weights: Mapping[str, np.ndarray]
    weight_offsets: Mapping[str, int]
    """Each weight's offset in the weights region (gears share those they agree on)."""
    target: Target

    @staticmethod
    def build(contract: ModelContract, weights: Mapping[str, np.ndarray],
              target: Target) -> StaticModelPlan:
        plans = tuple(contract.static_plans())
        widest = max(plans, key=lambda p: p.tasks.streams)
        offsets = {}
        for p in plans:
            for w in p.memory_plan.weights:
                if w.name not in weights:
                    raise ModelFormatError(f"weight '{w.name}' is in the memory plan but not in "
                                           f"the weights section")
                offsets.setdefault(w.name, w.offset)
        return StaticModelPlan(
            name=contract.model.name, inputs=tuple(contract.model.inputs),
            outputs=tuple(contract.model.outputs), plans=plans,
            batch_inputs=tuple(contract.gears.batch_inputs if contract.gears else ()),
            weights_bytes=max(p.memory_plan.weights_bytes for p in plans),
            arena_bytes=max(p.memory_plan.arena_bytes for p in plans),
            streams=widest.tasks.streams, events=max(p.tasks.events for p in plans),
            priorities=tuple(widest.tasks.priorities), weights=MappingProxyType(dict(weights)),
            weight_offsets=MappingProxyType(offsets), target=target)

    @property
    def gears(self) -> list[int]:
        """Batch sizes this model has a plan for (empty for a plain static model)."""
        return self.plan.gears


class StaticModel:
    """One execution context of a static model (or gear model) on one device: its
    activation arena, streams, events and tasks bound to them, reading the plan and the
    weights (a :class:`~.residency.Residency`) that every context on the device shares.

    A gear model (``--dynamic-batch``) holds one program per batch size; they
    share the weights region, the streams, the events and one arena as large
    as the largest gear's.
    """

    def __init__(self, om: OmFile, plan: StaticModelPlan, device: VirtualDevice,
                 backend: KernelBackend, weights: Residency, *, pad_to_gear: bool = False,
                 priority: int = 0, cpus: frozenset[int] | None = None):
        self.om = om
        self.device = device
        self.backend = backend
        self.pad_to_gear = pad_to_gear
        self.cpus = cpus
        """The CPUs its streams' workers run on (None: the device's)."""
        self.plan = plan
        self.name = plan.name
        self.inputs, self.outputs = list(plan.inputs), list(plan.outputs)
        self.weights = weights
        self.weights_base = weights.base
        self.prepared = weights.prepared
        self._allocations: list[int] = []
        self.streams: list = []
        self.programs: dict = {}
        self.arena_base: int | None = None
        self.slot = ProgramSlot(device)
        self.copies = ModelCopies(device)
        """The copies its runs make (inputs in, outputs out), for the device's counters."""
        self.plan_copies = {p.batch: program_copies(p) for p in plan.plans}
        self._recover_lock = threading.Lock()
        try:
            self.arena_base = self._malloc(plan.arena_bytes,
                                           f"activation arena of model '{self.name}'")
            self.events = device.create_events(plan.events)
            self.streams = [device.create_stream(stream_priority(priority, plan.priorities, i), cpus)
                            for i in range(plan.streams)]
            self._bind_programs()
        except BaseException:
            self.close()
            raise
        self.runs = self.submissions = 0
        self.profiler = None
        """A :class:`~.profiling.Profiler` recording every run, or None."""
        self.last_host_seconds = 0.0

    @property
    def epoch(self) -> int:
        """The device's epoch when the weights were last written."""
        return self.weights.epoch

    def _bind_programs(self) -> None:
        """Bind every plan's tasks to the model's regions and streams (at load, and again
        after a stuck run left the arena in quarantine)."""
        binder = TaskBinder(self.plan, self.device, self.backend, self.events, self.prepared,
                            {Region.WEIGHTS: self.weights_base, Region.ARENA: self.arena_base},
                            {Region.WEIGHTS: self.plan.weights_bytes,
                             Region.ARENA: self.plan.arena_bytes}, self.device.cube_for(self.cpus))
        programs = {}
        for plan in self.plan.plans:
            tiling = plan.tiling.entries
            where = f"section 'gears': plans[{self.plan.plans.index(plan)}].tasks." if plan.batch is not None \
                else "section 'tasks': "
            lists = [binder.bind_list(stream_tasks, tiling, f"{where}lists[{s}]")
                     for s, stream_tasks in enumerate(plan.tasks.lists)]
            programs[plan.batch] = (plan, DeviceProgram(self.streams[:len(lists)], self.events,
                                                        lists, f"{self.name}"))
        self.programs = programs
        self.program = self.programs[self.plan.plans[-1].batch][1]
        self._fast = self._fast_path()
        if self._fast is not None:
            h2d, d2h = self.plan_copies[None]
            self.copies.per_plain_run = {"h2d": (len(h2d), sum(n for _, n in h2d)),
                                         "d2h": (len(d2h), sum(n for _, n in d2h))}

    @property
    def gears(self) -> list[int]:
        """Batch sizes this model has a plan for (empty for a plain static model)."""
        return [p.batch for p in self.plan.plans if p.batch is not None]

    # ---------------------------------------------------------------- load
    def _malloc(self, size: int, what: str) -> int:
        off = self.device.memory.malloc(max(size, 1), what)
        self._allocations.append(off)
        return off

    # ---------------------------------------------------------------- run
    def _fast_path(self):
        """(program, inputs, output names) with static shapes as tuples, when the model has no
        gears: a run whose feeds match them exactly skips the general checks."""
        if self.plan.batch_inputs:
            return None
        plan, program = self.programs[None]
        specs = plan.inputs + plan.outputs
        if not all(isinstance(d, int) for s in specs for d in s.shape):
            return None
        return (program, [(i.name, np.dtype(i.dtype), tuple(i.shape)) for i in plan.inputs],
                [o.name for o in plan.outputs])

    def run(self, feeds: dict, output_names: list[str] | None = None,
            timeout: float | None = None, run_index: int = 0,
            device_outputs: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
        """Run one inference: ``{input name: array}`` -> ``{output name: array}``.

        ``timeout``: seconds before the run is cancelled (RunTimeoutError naming where
        it was); ``run_index``: which run of the model this is (for injected faults);
        ``device_outputs``: outputs to leave on the device, as
        :class:`~aircc.executor.device.tensor.DeviceTensor` (a feed may be one too)."""
        t0 = perf_counter()
        plan_faults = faults.for_run(self.name, run_index, self.device.id)
        fast = self._fast
        if fast is not None and output_names is None and not device_outputs:
            ordered = exact_feeds(fast[1], feeds)
            if ordered is not None:   # the common case, kept short: host time is what it costs
                results = [None] * len(fast[2])     # the device's copies fill them
                t1, t2 = self._execute(fast[0], ordered, results, timeout, plan_faults)
                self.copies.plain_runs += 1
                out = dict(zip(fast[2], results))
                self.last_host_seconds = t1 - t0 + perf_counter() - t2
                return out
        if not self.programs:
            self._rebind()           # after a stuck run: a new arena, the tasks bound to it
        plan, program, real_batch, feeds = self._pick(feeds)
        ordered = check_feeds(plan.inputs, feeds, device=self.device)
        results = [None] * len(plan.outputs)
        on_device = {}
        for b, o in enumerate(plan.outputs):     # the program's copies fill these on the device
            if o.name in device_outputs:
                on_device[b] = DeviceTensor.allocate(self.device, o.dtype, o.shape,
                                                     f"output '{o.name}' of model '{self.name}'")
                results[b] = on_device[b].view()
        t1, t2 = self._execute(program, ordered, results, timeout, plan_faults)
        fed = {b for b, i in enumerate(plan.inputs) if isinstance(feeds[i.name], DeviceTensor)}
        self._count_copies(plan, fed, on_device)
        out = {}
        for b, (o, r) in enumerate(zip(self.outputs, results)):
            r = on_device.get(b, r)
            if real_batch is not None and o.shape and o.shape[0] == "batch":
                r = r.rows(real_batch) if b in on_device else r[:real_batch]
            out[o.name] = r
        selected = select_outputs(out, output_names)
        # host time: preparing, submitting and collecting; not the wait for the device
        self.last_host_seconds = t1 - t0 + perf_counter() - t2
        return selected

    def _count_copies(self, plan, fed: set[int], on_device: dict) -> None:
        """Count a run's copies: a device tensor fed or filled is a copy within the device."""
        h2d, d2h = self.plan_copies[plan.batch]
        for b, n in h2d:
            self.copies.add("d2d" if b in fed else "h2d", n)
        for b, n in d2h:
            self.copies.add("d2d" if b in on_device else "d2h", n)

    def _execute(self, program: DeviceProgram, ordered: list, results: list,
                 timeout: float | None, plan_faults: dict | None) -> tuple[float, float]:
        """One submission and the wait for it; the host CPU times around the wait."""
        times = self.slot.execute(program, ordered, results, timeout, plan_faults, self.profiler,
                                  "static", self._recover_stuck)
        self.submissions += 1
        self.runs += 1
        return times

    # ---------------------------------------------------------------- faults
    def cancel(self, error: BaseException, wait: bool = True) -> None:
        """Stop the run in flight (from another thread) with ``error``; walks stuck in a
        kernel are abandoned to it (the running thread then recovers).  ``wait`` False:
        only tell the run (its own deadline handles walks that do not stop)."""
        self.slot.cancel(error, wait)

    def _recover_stuck(self, run: Run) -> None:
        """After ``run`` was abandoned to walks stuck in a kernel: new streams in place of
        theirs, and a new arena, the old one quarantined until they return.  The tasks are
        bound to the new arena now if the device kept its memory, else by the next run
        (after the weights are written again); a bind that fails now is tried again by the
        next run, which then says why it cannot."""
        with self._recover_lock:
            stuck = run.stuck()
            if not stuck or self.arena_base is None:
                return
            old, mem = self.arena_base, self.device.memory
            self._allocations.remove(old)
            self.arena_base = None
            self.programs, self._fast = {}, None
            self.device.replace_streams(self.streams, stuck, release=lambda: mem.free(old),
                                        nbytes=self.plan.arena_bytes)
            if self.device.epoch != self.epoch or not self.device.usable:
                return               # the device lost its memory: the next run binds
            try:
                self._rebind()
            except AirccError:
                pass                 # the next run tries again (and says why it cannot)

    def _rebind(self) -> None:
        """A new arena if the model has none, and every task bound to it (``programs`` stays
        empty if binding fails, so that the next run tries again)."""
        if self.arena_base is None:
            self.arena_base = self._malloc(
                self.plan.arena_bytes, f"activation arena of model '{self.name}' (its previous "
                                  f"arena is quarantined until a stuck kernel returns: "
                                  f"{self.device.quarantined_bytes} bytes)")
        self._bind_programs()

    def restore(self) -> None:
        """Write the weights again (the device lost its memory contents), once for every
        context on the device."""
        self.weights.restore()

    def release_cached(self) -> int:
        """Nothing cached: a static model's memory is planned."""
        return 0

    def _pick(self, feeds: dict):
        """The plan and program for these feeds (a gear model picks by batch, padding if asked)."""
        if not self.plan.batch_inputs:
            plan, program = self.programs[None]
            return plan, program, None, feeds
        first = self.plan.batch_inputs[0]
        if first not in feeds:
            check_feeds(self.inputs, feeds)   # names the missing input
        shape = feeds[first].shape if isinstance(feeds[first], DeviceTensor) \
            else np.shape(feeds[first])
        batch = int(shape[0]) if len(shape) else -1
        if batch in self.programs:
            plan, program = self.programs[batch]
            return plan, program, None, feeds
        bigger = [b for b in self.gears if b >= batch]
        if not self.pad_to_gear or not bigger or batch < 1:
            raise InputError(f"batch {batch} has no gear; this model has gears {self.gears}"
                             + ("" if self.pad_to_gear else " (load with pad_to_gear=True to pad up)"))
        gear = bigger[0]
        check_feeds(self.inputs, feeds, self.device.memory.capacity)   # before padding copies
        for name in self.plan.batch_inputs:
            x = feeds[name]
            x = x.numpy() if isinstance(x, DeviceTensor) else np.asarray(x)   # padded on the host
            if x.ndim and x.shape[0] != batch:
                raise InputError(f"input '{name}' has batch {x.shape[0]}, input '{first}' has {batch}")
            pad = np.zeros((gear - batch, *x.shape[1:]), dtype=x.dtype)
            feeds = dict(feeds, **{name: np.concatenate([x, pad])})
        plan, program = self.programs[gear]
        return plan, program, batch, feeds

    def run_stats(self) -> StaticRunStats:
        """Host submissions per run, streams, events, memory."""
        return StaticRunStats(
            mode="static", runs=self.runs, host_submissions=self.submissions,
            submissions_per_run=self.submissions / max(1, self.runs),
            streams=len(self.streams), events=len(self.events), arena_bytes=self.plan.arena_bytes,
            weights_bytes=self.plan.plans[-1].memory_plan.weights_bytes,
            prepared_bytes=self.prepared.nbytes, gears=self.gears)

    # ---------------------------------------------------------------- unload
    def _release(self) -> None:
        for off in self._allocations:
            self.device.memory.free(off)
        self._allocations.clear()
        if self.weights is not None:
            self.weights.drop()
            self.weights = None

    def close(self) -> None:
        """Destroy the streams and free the model's memory; a stream still inside a task
        keeps all of it in quarantine until the task returns."""
        self.copies.close()
        busy = [s for s in self.streams if s.busy()]
        for s in self.streams:
            if s not in busy:
                self.device.destroy_stream(s)
        self.streams, self.programs, self._fast = [], {}, None
        if busy:
            nbytes = sum(self.device.memory.size_of(o) for o in self._allocations)
            self.device.quarantine(busy, self._release, nbytes)
        else:
            self._release()


def program_copies(plan: StaticPlan) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(binding, bytes) of each input copy and each output copy of a plan's program."""
    tasks = [t for lst in plan.tasks.lists for t in lst]
    return ([(t.binding, t.operand.nbytes) for t in tasks if t.kind is TaskKind.MEMCPY_H2D],
            [(t.binding, t.operand.nbytes) for t in tasks if t.kind is TaskKind.MEMCPY_D2H])

"""Runs a dynamic-shape .om: the Host Kernel execute graph.

Per run and per op the host does InferShape, Tiling (through a per-node
tiling cache), AllocMem (stream-aware caching allocator) and Launch (onto
the op's stream), and Frees each buffer after launching its last use.  Host
ops (small shape computations) run right on the host.  With
``runtime_core_number=3`` (or ``AIR_RUNTIME_CORE_NUMBER=3``) the host work is
a three-stage pipeline of threads, a normal stage (InferShape, Tiling,
host ops), a memory stage (Alloc, Free) and a launch stage; with 1 it runs
in one thread.  The outputs do not depend on the choice.

A run that passes its deadline is cancelled; a stream still inside a kernel after
that is replaced by a new one, and the memory its kernel may write (the run's blocks,
the recorded runs' pools) comes back only when that kernel returns
(:meth:`DynamicModel._recover_stuck`).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from aircc import faults
from aircc.config import settings
from aircc.errors import ConfigError, DeviceOutOfMemoryError, InputError, StreamSyncTimeoutError
from aircc.executor.device.caching_allocator import CachingAllocator
from aircc.executor.device.copy_counters import ModelCopies
from aircc.executor.device.device import CANCEL_GRACE, VirtualDevice
from aircc.executor.device.prepared import PreparedConstants
from aircc.executor.device.run import Run
from aircc.executor.device.tensor import DeviceTensor
from aircc.formats import OmFile
from aircc.formats.model_section import IOSpec
from aircc.ops import TensorType

from aircc.executor.device.compute_units import stream_priority

from .dynamic_plan import DeviceContext, DynamicPlan
from .engine import DynamicRunStats, ProgramSlot
from .feeds import check_feeds, select_outputs
from .host_values import feed_type
from .host_pipeline import RunState
from .host_runners import run_pipelined, run_sequential
from .replay import ReplayCache, record, recordable
from .residency import Residency
from .tiling_cache import TilingCache


def runtime_core_number_of(option: int | None) -> int:
    """1 (sequential) or 3 (pipelined): the option, else $AIR_RUNTIME_CORE_NUMBER, else 3."""
    value = option if option is not None else settings().runtime_core_number
    if value not in (1, 3):
        raise ConfigError(f"runtime core number must be 1 (sequential) or 3 (pipelined), got {value}")
    return value


@dataclass
class Counters:
    """What a dynamic model's runs add up."""

    runs: int = 0
    replays: int = 0
    host_seconds: float = 0.0
    replay_host_seconds: float = 0.0
    host_op_seconds: dict[str, float] = field(default_factory=dict)
    host_op_counts: dict[str, int] = field(default_factory=dict)
    d2h_syncs: int = 0
    last_run_seconds: float = 0.0

    def add_run(self, state: RunState) -> None:
        """A run through the host kernels."""
        self.runs += 1
        self.host_seconds += state.host_seconds
        for op, secs in state.op_seconds.items():
            self.host_op_seconds[op] = self.host_op_seconds.get(op, 0.0) + secs
            self.host_op_counts[op] = self.host_op_counts.get(op, 0) + state.op_counts[op]
        self.d2h_syncs += state.d2h_syncs

    def add_replay(self, host_seconds: float) -> None:
        self.runs += 1
        self.replays += 1
        self.host_seconds += host_seconds
        self.replay_host_seconds += host_seconds


class DynamicModel:
    """One execution context of a dynamic model on one device: the :class:`DeviceContext`
    its runs use (streams, events, tiling caches, recorded runs), reading the
    :class:`DynamicPlan` and the weights (a :class:`~.residency.Residency`) that every
    context on the device shares."""

    def __init__(self, om: OmFile, plan: DynamicPlan, device: VirtualDevice, weights: Residency,
                 *, runtime_core_number: int | None = None, replay: bool = True,
                 priority: int = 0, cpus: frozenset[int] | None = None):
        self.om, self.device = om, device
        self.name = plan.name
        self.inputs, self.outputs = list(plan.inputs), list(plan.outputs)
        self.plan = plan
        self.weights = weights
        self.core_number = runtime_core_number_of(runtime_core_number)
        self.record_replays = replay and not plan.has_control
        self.replays = ReplayCache()
        self._state: RunState | None = None
        self.slot = ProgramSlot(device)
        self._recover_lock = threading.Lock()
        eg = plan.exec_graph
        self.ctx = ctx = DeviceContext(
            device, streams=[], events=[], device_weights=weights.views, prepared=weights.prepared,
            allocator=device.caching_allocator, caches=[TilingCache() for _ in plan.nodes],
            cube=device.cube_for(cpus), copies=ModelCopies(device))
        try:
            ctx.streams = [device.create_stream(stream_priority(priority, eg.priorities, i), cpus)
                           for i in range(max(1, eg.streams))]
        except BaseException:
            self.close()
            raise
        ctx.events = device.create_events(eg.events)
        ctx.event_counts = [0] * len(ctx.events)
        ctx.bind_users(plan)
        self.generation = 0
        self.profiler = None
        """A :class:`~.profiling.Profiler` recording every run, or None."""
        self.last_host_seconds = 0.0
        self.counters = Counters()

    @property
    def streams(self) -> list:
        return self.ctx.streams

    @property
    def events(self) -> list:
        return self.ctx.events

    @property
    def device_weights(self) -> dict[str, np.ndarray]:
        """Each weight's view in device memory."""
        return self.ctx.device_weights

    @property
    def prepared(self) -> PreparedConstants:
        return self.ctx.prepared

    @property
    def epoch(self) -> int:
        """The device's epoch when the weights were last written."""
        return self.weights.epoch

    def restore(self) -> None:
        """Write the weights again (the device lost its memory contents), once for every
        context on the device."""
        self.weights.restore()

    # ------------------------------------------------------------ run
    def run(self, feeds: dict, output_names: list[str] | None = None,
            timeout: float | None = None, run_index: int = 0,
            device_outputs: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
        """Run one inference; ``timeout``: seconds before it is cancelled; ``run_index``:
        which run of the model this is (for injected faults); ``device_outputs``: outputs
        to leave on the device, as :class:`~aircc.executor.device.tensor.DeviceTensor`
        (a feed may be one too)."""
        t0 = time.perf_counter()
        ordered = check_feeds(self.inputs, feeds, self.device.memory.capacity, self.device)
        fed = frozenset(b for b, i in enumerate(self.inputs)
                        if isinstance(feeds[i.name], DeviceTensor))
        bind_symbols(self.inputs, ordered)
        plain = all(type(a) is np.ndarray for a in ordered)    # no sequence, no optional
        key = tuple((a.shape, a.dtype.str) for a in ordered) if plain else None
        planned = faults.for_run(self.name, run_index, self.device.id)
        if key in self.replays:
            return select_outputs(self._run_replay(key, ordered, t0, timeout, planned, fed,
                                                   device_outputs), output_names)
        self.generation += 1
        ctx = self.ctx
        for e, ev in enumerate(ctx.events):      # replays advanced the events on the device
            ctx.event_counts[e] = max(ctx.event_counts[e], ev.generation)
        capture = self.record_replays and plain
        private = CachingAllocator(self.device.memory, same_stream_only=True) if capture else None
        state = RunState(self.plan, ctx, self.generation, private, capture)
        state.set_timeout(timeout)
        state.faults = planned
        state.fed_on_device, state.device_outputs = fed, device_outputs
        for spec, arr in zip(self.inputs, ordered):
            state.host[spec.name] = arr
            state.types[spec.name] = TensorType.of(arr) if type(arr) is np.ndarray \
                else feed_type(spec, arr)
        for name, arr in self.om.weights.items():
            state.types[name] = TensorType(arr.dtype.name, tuple(arr.shape))
        t0 = time.perf_counter()
        self._state = state
        state.profiler = self.profiler
        stuck: list[int] = []
        try:
            if self.core_number == 1:
                run_sequential(state)
            else:
                run_pipelined(state)
        finally:
            stuck = self._drain(state)
            self._state = None
            if stuck:
                self._recover_stuck(stuck, state, private)
            else:
                state.release()
            if state.profiler is not None:
                state.profiler.run_span(t0, time.perf_counter(), "dynamic")
        self.counters.add_run(state)
        self.last_host_seconds = state.host_seconds
        self.counters.last_run_seconds = time.perf_counter() - t0
        if capture and not stuck:
            self._keep_replay(key, state, private)
        if state.error is not None:
            raise state.error
        out = {o: state.results[o] for o in self.plan.exec_graph.outputs}
        return select_outputs(out, output_names)

    def _drain(self, state: RunState) -> list[int]:
        """Wait for the streams to run what the run gave them, by its deadline; past it the
        run is cancelled, and the streams still inside a task a grace later are returned
        (stuck)."""
        try:
            state.sync()
            return []
        except StreamSyncTimeoutError as e:     # RunTimeoutError: naming the busy stream
            state.fail(e)
        stuck = []
        grace_ends = time.monotonic() + CANCEL_GRACE      # one grace for all the streams
        for i, s in enumerate(self.ctx.streams):
            try:
                s.synchronize(max(0.01, grace_ends - time.monotonic()))
            except StreamSyncTimeoutError:
                stuck.append(i)
        if stuck and not any(r.kind == "timeout" for r in self.device.faults[-1:]):
            self.device.note_fault("timeout", f"{self.name}: streams {stuck}")
        return stuck

    # ------------------------------------------------------------ replays
    def _keep_replay(self, key: tuple, state: RunState, allocator: CachingAllocator) -> None:
        """Keep the launches of a run as a device program for its input shapes, if every
        host decision of the run followed from those shapes (:func:`.replay.recordable`)."""
        if recordable(state):
            self.replays.keep(key, record(state, self.plan, self.ctx, allocator))
            return
        for s in self.ctx.streams:      # the frees of the run record events: let them run
            s.synchronize()
        allocator.release_cached()
        if isinstance(state.error, DeviceOutOfMemoryError):
            self.drop_replays()     # give their memory back before the next try

    def drop_replays(self) -> None:
        """Forget every recorded run and return the memory its pool holds."""
        for s in self.ctx.streams:
            s.synchronize()
        for pool in self.replays.forget():
            pool.release_cached()

    def release_cached(self) -> int:
        """Give back every cached block (recorded runs' pools, the shared pool's free
        segments): what an out-of-memory recovery does before it tries again."""
        released = self.replays.reserved_bytes()
        self.drop_replays()
        return released + self.ctx.allocator.release_cached()

    def _run_replay(self, key: tuple, ordered: list[np.ndarray], t0: float,
                    timeout: float | None, planned: dict | None, fed: frozenset[int],
                    device_outputs: frozenset[str]) -> dict[str, np.ndarray]:
        """One submission of a recorded run; host time counts from ``t0`` (the feed checks)."""
        rep = self.replays.take(key)
        results = [None] * len(rep.outputs)     # the device's copies fill the others
        for binding, value in rep.host_results:
            results[binding] = value.copy()
        on_device = {}
        for b, (name, t) in enumerate(rep.outputs):
            if name in device_outputs and results[b] is None:   # the replay's copy fills it
                on_device[b] = DeviceTensor.allocate(self.device, t.dtype, t.shape,
                                                     f"output '{name}' of model '{self.name}'")
                results[b] = on_device[b].view()
        t1, t2 = self.slot.execute(rep.program, ordered, results, timeout, planned, self.profiler,
                                   "dynamic replay", self._recover_abandoned)
        copies = self.ctx.copies
        for direction, binding, nbytes in rep.copies:
            on = binding in fed if direction == "h2d" else binding in on_device
            copies.add("d2d" if binding is not None and on else direction, nbytes)
        out = {}
        for b, ((name, _), r) in enumerate(zip(rep.outputs, results)):
            if b in on_device:
                r = on_device[b]
            elif name in device_outputs:            # a host value, copied to the device
                r = DeviceTensor.from_numpy(r, self.device)
            out[name] = r
        self.last_host_seconds = (t1 - t0) + (time.perf_counter() - t2)
        self.counters.add_replay(self.last_host_seconds)
        return out

    # ------------------------------------------------------------ faults
    def cancel(self, error: BaseException, wait: bool = True) -> None:
        """Stop the run in flight (from another thread) with ``error``; the running thread
        recovers from streams stuck in a kernel.  ``wait`` False: only tell the run."""
        state = self._state
        if state is not None:
            state.interrupt(error)
            state.deadline = time.monotonic()
        self.slot.cancel(error, wait)

    def _recover_abandoned(self, run: Run) -> None:
        """A replay's walks were abandoned: recover from those stuck in a kernel."""
        if run.stuck():
            self._recover_stuck(run.stuck())

    def _recover_stuck(self, stuck: list[int], state: RunState | None = None,
                       private: CachingAllocator | None = None) -> None:
        """New streams in place of the ``stuck`` ones; what their kernels may still write
        (the run's blocks, every recorded run's pool) comes back when they return."""
        with self._recover_lock:
            if state is not None:
                state.release()       # frees record events on the stuck streams, behind their task
            pools = self.replays.forget()
            if private is not None:
                pools.append(private)
            nbytes = sum(p.stats()["reserved_bytes"] for p in pools)
            shared = self.ctx.allocator

            def release() -> None:      # the stuck kernels returned: their blocks are free now
                for p in pools:
                    p.release_cached()
                shared.release_cached()
            self.device.replace_streams(self.ctx.streams, stuck, release=release, nbytes=nbytes)
            self.ctx.bind_users(self.plan)

    # ------------------------------------------------------------ statistics
    def run_stats(self) -> DynamicRunStats:
        """Tiling cache, host time per op, host ops and allocator peaks."""
        c, caches = self.counters, self.ctx.caches
        hits = sum(t.hits for t in caches)
        misses = sum(t.misses for t in caches)
        alloc = self.ctx.allocator.stats()
        pools = [p.stats() for p in self.replays.pools()]
        return DynamicRunStats(
            mode="dynamic", runs=c.runs, runtime_core_number=self.core_number,
            tiling_cache_hits=hits, tiling_cache_misses=misses,
            tiling_cache_hit_rate=hits / (hits + misses) if hits + misses else 0.0,
            host_ops=self.plan.exec_graph.host_ops, replays=c.replays,
            replay_shapes=len(self.replays),
            host_seconds_per_run=c.host_seconds / max(1, c.runs),
            host_kernel_runs=c.runs - c.replays,
            host_seconds_per_host_kernel_run=(c.host_seconds - c.replay_host_seconds)
            / max(1, c.runs - c.replays),
            host_seconds_per_replay=c.replay_host_seconds / max(1, c.replays),
            launches=self.ctx.launches, host_submissions=self.ctx.launches + c.replays,
            host_us_per_op={op: round(1e6 * secs / c.host_op_counts[op], 2)
                            for op, secs in sorted(c.host_op_seconds.items())},
            d2h_syncs=c.d2h_syncs,
            # the shared pool, and the pools that recorded launches keep for their shapes
            peak_allocated_bytes=max([alloc["peak_allocated_bytes"]]
                                     + [p["peak_allocated_bytes"] for p in pools]),
            peak_reserved_bytes=alloc["peak_reserved_bytes"] + sum(p["reserved_bytes"] for p in pools),
            allocator=alloc, prepared_bytes=self.ctx.prepared.nbytes)

    def close(self) -> None:
        """Destroy the streams and free the model's memory and cached blocks; a stream still
        inside a task keeps all of it in quarantine until the task returns."""
        ctx = self.ctx
        ctx.copies.close()
        pools = self.replays.forget()
        busy = [s for s in ctx.streams if not s.close(timeout=CANCEL_GRACE)]
        for s in ctx.streams:
            self.device.destroy_stream(s)
        ctx.streams = []

        weights, self.weights = self.weights, None

        def release() -> None:
            for p in pools:
                p.release_cached()
            if weights is not None:
                weights.drop()
            ctx.allocator.release_cached()
        if busy:
            self.device.quarantine(busy, release, sum(p.stats()["reserved_bytes"] for p in pools))
        else:
            release()


def bind_symbols(inputs: list[IOSpec], arrays: list[np.ndarray]) -> dict[str, int]:
    """Check that a symbol shared by several inputs has one size in this run."""
    sizes: dict[str, tuple[int, str]] = {}
    for spec, arr in zip(inputs, arrays):
        for d, n in zip(spec.shape or (), getattr(arr, "shape", ())):
            if isinstance(d, str):
                if d in sizes and sizes[d][0] != n:
                    raise InputError(f"dim '{d}' is {sizes[d][0]} in input '{sizes[d][1]}' "
                                     f"but {n} in input '{spec.name}'")
                sizes.setdefault(d, (n, spec.name))
    return {k: v[0] for k, v in sizes.items()}

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
(:meth:`DynamicModel.recover_stuck`).
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from aircc import faults
from aircc.config import settings
from aircc.errors import ConfigError, InputError, StreamSyncTimeoutError
from aircc.executor.device.caching_allocator import CachingAllocator
from aircc.executor.device.device import CANCEL_GRACE, VirtualDevice
from aircc.executor.device.prepared import PreparedConstants
from aircc.executor.device.run import DeviceProgram, Run
from aircc.formats import ModelContract, OmFile
from aircc.formats.kinds import HostKernelKind, Placement
from aircc.ops import KernelBackend, Target, TensorType
from aircc.ops.device import COPY_OPS, DOMAIN

from aircc.executor.device.compute_units import stream_priority

from .control_flow import check_control_nodes
from .feeds import check_feeds, select_outputs
from .host_values import feed_type
from .host_pipeline import RunState
from .host_runners import run_pipelined, run_sequential
from .resolved import resolve_op
from .replay import Replay, Replays
from .tiling_cache import TilingCache


WEIGHT_ALIGN = 64


def runtime_core_number_of(option: int | None) -> int:
    """1 (sequential) or 3 (pipelined): the option, else $AIR_RUNTIME_CORE_NUMBER, else 3."""
    value = option if option is not None else settings().runtime_core_number
    if value not in (1, 3):
        raise ConfigError(f"runtime core number must be 1 (sequential) or 3 (pipelined), got {value}")
    return value


class DynamicModel(Replays):
    """A loaded dynamic model bound to one device."""

    def __init__(self, om: OmFile, contract: ModelContract, device: VirtualDevice,
                 backend: KernelBackend, target: Target, *, runtime_core_number: int | None = None,
                 replay: bool = True, priority: int = 0):
        self.om, self.device = om, device
        self.backend, self.target = backend, target
        self.description = contract.model
        self.name = contract.model.name
        self.inputs, self.outputs = list(contract.model.inputs), list(contract.model.outputs)
        eg = contract.exec_graph
        self.exec_graph = eg
        self.nodes = eg.nodes
        self.kernels = eg.kernels
        self.core_number = runtime_core_number_of(runtime_core_number)
        check_control_nodes(eg, om.weights)
        self.ops = [None if n.domain == DOMAIN and n.op in COPY_OPS
                    else resolve_op(backend, n.op, n.version, n.domain, n.name, n.impl, n.attrs)
                    for n in self.nodes]
        self.caches = [TilingCache() for _ in self.nodes]
        self.value_inputs = [set(o.definition.value_inputs) if o else set() for o in self.ops]
        self.host_values = dict(om.weights)            # constants, readable on the host
        self._weights_base = None
        self.streams: list = []
        self._replays: "OrderedDict[tuple, Replay]" = OrderedDict()
        self.prepared = PreparedConstants(device.memory, f"model '{self.name}'")
        """What kernels derive from the weights (``prepare``), shared by every shape's run."""
        self.allocator: CachingAllocator = device.caching_allocator
        self._state: RunState | None = None
        self._in_flight: tuple[DeviceProgram, Run, int] | None = None
        self._recover_lock = threading.Lock()
        try:
            self._allocate_weights()
            self.streams = [device.create_stream(stream_priority(priority, eg.priorities, i))
                            for i in range(max(1, eg.streams))]
        except BaseException:
            self.close()
            raise
        self.events = device.create_events(eg.events)
        self.event_counts = [0] * len(self.events)
        self.generation = 0
        self.profiler = None
        """A :class:`~.profiling.Profiler` recording every run, or None."""
        self.users = self._users()
        has_control = any(k.kind is HostKernelKind.CONTROL for k in self.kernels)
        self.replay = replay and not has_control
        #: reshapes run as views of their input's block (not with control flow, whose
        #: bodies rebind values per iteration)
        self.alias_reshapes = not has_control
        self.launch_position = {}
        for pos, kern in enumerate(self.kernels):
            if kern.kind in (HostKernelKind.LAUNCH, HostKernelKind.MEMCPY_H2D):
                for v in self.nodes[kern.node].outputs:
                    self.launch_position[v] = pos
        self.last_host_seconds = 0.0
        self.stats = {"runs": 0, "replays": 0, "host_seconds": 0.0, "replay_host_seconds": 0.0,
                      "launches": 0, "host_op_seconds": {},
                      "host_op_counts": {},
                      "d2h_syncs": 0, "host_ops": eg.host_ops}

    def _users(self) -> dict[str, list]:
        """Per device value: the streams whose kernels use it (a block is free for another
        stream only after each of them got that far)."""
        users: dict[str, set[int]] = {}
        for n in self.nodes:
            if n.placement is Placement.DEVICE and n.stream is not None:
                for v in [*n.inputs, *n.outputs]:
                    if v:
                        users.setdefault(v, set()).add(n.stream)
        return {v: [self.streams[s] for s in sorted(ss)] for v, ss in users.items()}

    # ------------------------------------------------------------ load
    def _allocate_weights(self) -> None:
        offsets, end = {}, 0
        for name, arr in self.om.weights.items():
            offsets[name] = end
            end += (arr.nbytes + WEIGHT_ALIGN - 1) // WEIGHT_ALIGN * WEIGHT_ALIGN
        self._weights_base = self.device.memory.malloc(max(end, 1), f"weights of model '{self.name}'")
        self.device_weights = {}
        for w, arr in self.om.weights.items():
            self.device_weights[w] = self.device.memory.view(self._weights_base + offsets[w],
                                                             arr.dtype, arr.shape)
        self.write_weights()

    def write_weights(self) -> None:
        """Copy the weights to the device (at load, and again after the device lost its
        memory contents), and make again what kernels derive from them."""
        for w, arr in self.om.weights.items():
            np.copyto(self.device_weights[w], arr)
        self.prepared.refill()
        self.epoch = self.device.epoch

    restore = write_weights

    # ------------------------------------------------------------ run
    def run(self, feeds: dict, output_names: list[str] | None = None,
            timeout: float | None = None, run_index: int = 0) -> dict[str, np.ndarray]:
        """Run one inference; ``timeout``: seconds before it is cancelled; ``run_index``:
        which run of the model this is (for injected faults)."""
        t0 = time.thread_time()
        ordered = check_feeds(self.inputs, feeds, self.device.memory.capacity)
        bind_symbols(self.inputs, ordered)
        plain = all(type(a) is np.ndarray for a in ordered)    # no sequence, no optional
        key = tuple((a.shape, a.dtype.str) for a in ordered) if plain else None
        plan = faults.for_run(self.name, run_index, self.device.id)
        if key in self._replays:
            return select_outputs(self._run_replay(key, ordered, t0, timeout, plan), output_names)
        self.generation += 1
        for e, ev in enumerate(self.events):      # replays advanced the events on the device
            self.event_counts[e] = max(self.event_counts[e], ev.generation)
        capture = self.replay and plain
        private = CachingAllocator(self.device.memory, same_stream_only=True) if capture else None
        state = RunState(self, self.generation, private, capture)
        state.set_timeout(timeout)
        state.faults = plan
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
                self.recover_stuck(stuck, state, private)
            else:
                state.release()
            if state.profiler is not None:
                state.profiler.run_span(t0, time.perf_counter(), "dynamic")
        self.stats["runs"] += 1
        self.stats["host_seconds"] += state.host_seconds
        self.last_host_seconds = state.host_seconds
        for op, secs in state.op_seconds.items():
            self.stats["host_op_seconds"][op] = self.stats["host_op_seconds"].get(op, 0.0) + secs
            self.stats["host_op_counts"][op] = self.stats["host_op_counts"].get(op, 0) + state.op_counts[op]
        self.stats["d2h_syncs"] += state.d2h_syncs
        self.stats["last_run_seconds"] = time.perf_counter() - t0
        if capture and not stuck:
            self._keep_replay(key, state, private)
        if state.error is not None:
            raise state.error
        out = {o: state.results[o] for o in self.exec_graph.outputs}
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
        for i, s in enumerate(self.streams):
            try:
                s.synchronize(max(0.01, grace_ends - time.monotonic()))
            except StreamSyncTimeoutError:
                stuck.append(i)
        if stuck and not any(r.kind == "timeout" for r in self.device.faults[-1:]):
            self.device.note_fault("timeout", f"{self.name}: streams {stuck}")
        return stuck

    # ------------------------------------------------------------ faults
    def cancel(self, error: BaseException, wait: bool = True) -> None:
        """Stop the run in flight (from another thread) with ``error``; the running thread
        recovers from streams stuck in a kernel.  ``wait`` False: only tell the run."""
        state = self._state
        if state is not None:
            state.interrupt(error)
            state.deadline = time.monotonic()
        current = self._in_flight
        if current is not None:
            program, run, execution = current
            if run.fail(error, program.events, execution) and wait \
                    and not run.wait_done(CANCEL_GRACE):
                self.device.abandon(program, run, error)

    def recover_stuck(self, stuck: list[int], state: RunState | None = None,
                      private: CachingAllocator | None = None) -> None:
        """New streams in place of the ``stuck`` ones; what their kernels may still write
        (the run's blocks, every recorded run's pool) comes back when they return."""
        with self._recover_lock:
            if state is not None:
                state.release()       # frees record events on the stuck streams, behind their task
            pools = [r.allocator for r in self._replays.values()]
            if private is not None:
                pools.append(private)
            self._replays.clear()
            nbytes = sum(p.stats()["reserved_bytes"] for p in pools)
            shared = self.allocator

            def release() -> None:      # the stuck kernels returned: their blocks are free now
                for p in pools:
                    p.release_cached()
                shared.release_cached()
            self.device.replace_streams(self.streams, stuck, release=release, nbytes=nbytes)
            self.users = self._users()

    # ------------------------------------------------------------ statistics
    def run_stats(self) -> dict:
        """Tiling cache, host time per op, host ops and allocator peaks."""
        hits = sum(c.hits for c in self.caches)
        misses = sum(c.misses for c in self.caches)
        per_op = {op: round(1e6 * secs / self.stats["host_op_counts"][op], 2)
                  for op, secs in sorted(self.stats["host_op_seconds"].items())}
        alloc = self.allocator.stats()
        pools = [r.allocator.stats() for r in self._replays.values()]
        return {
            "mode": "dynamic",
            "runs": self.stats["runs"],
            "runtime_core_number": self.core_number,
            "tiling_cache_hits": hits,
            "tiling_cache_misses": misses,
            "tiling_cache_hit_rate": hits / (hits + misses) if hits + misses else 0.0,
            "host_ops": self.stats["host_ops"],
            "replays": self.stats["replays"],
            "replay_shapes": len(self._replays),
            "host_seconds_per_run": self.stats["host_seconds"] / max(1, self.stats["runs"]),
            "host_kernel_runs": self.stats["runs"] - self.stats["replays"],
            "host_seconds_per_host_kernel_run":
                (self.stats["host_seconds"] - self.stats["replay_host_seconds"])
                / max(1, self.stats["runs"] - self.stats["replays"]),
            "host_seconds_per_replay": self.stats["replay_host_seconds"] / max(1, self.stats["replays"]),
            "launches": self.stats["launches"],
            "host_submissions": self.stats["launches"] + self.stats["replays"],
            "host_us_per_op": per_op,
            "d2h_syncs": self.stats["d2h_syncs"],
            # the shared pool, and the pools that recorded launches keep for their shapes
            "peak_allocated_bytes": max([alloc["peak_allocated_bytes"]]
                                        + [p["peak_allocated_bytes"] for p in pools]),
            "peak_reserved_bytes": alloc["peak_reserved_bytes"] + sum(p["reserved_bytes"] for p in pools),
            "allocator": alloc,
            "prepared_bytes": self.prepared.nbytes,
        }

    def close(self) -> None:
        """Destroy the streams and free the model's memory and cached blocks; a stream still
        inside a task keeps all of it in quarantine until the task returns."""
        pools = [r.allocator for r in self._replays.values()]
        self._replays.clear()
        busy = [s for s in self.streams if not s.close(timeout=CANCEL_GRACE)]
        for s in self.streams:
            self.device.destroy_stream(s)
        self.streams = []

        def release() -> None:
            for p in pools:
                p.release_cached()
            self.prepared.release()
            if self._weights_base is not None:
                self.device.memory.free(self._weights_base)
                self._weights_base = None
            self.allocator.release_cached()
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

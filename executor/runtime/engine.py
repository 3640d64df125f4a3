"""What a loaded model asks of the engine that runs its mode, and what the engines report.

:class:`~.loaded.LoadedModel` holds one :class:`Engine`: a
:class:`~.static_model.StaticModel` (sink mode: one submission per run) or a
:class:`~.dynamic_model.DynamicModel` (the Host Kernel graph), bound to one device.
``run_stats()`` returns a :class:`StaticRunStats` or a :class:`DynamicRunStats`.  Both
engines run device programs through a :class:`ProgramSlot`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Callable, Protocol

import numpy as np

from aircc.executor.device.device import CANCEL_GRACE, VirtualDevice
from aircc.executor.device.run import DeviceProgram, Run
from aircc.formats.model_section import IOSpec

from .profiling import Profiler


class Engine(Protocol):
    """A model bound to one device, as :class:`~.loaded.LoadedModel` drives it."""

    name: str
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    device: VirtualDevice
    epoch: int
    """The device's epoch when the weights were last written (behind it: write them again)."""
    profiler: Profiler | None
    last_host_seconds: float
    """Host time of the last run (the calling thread's clock): preparing, submitting,
    collecting, not the wait for the device."""

    def run(self, feeds: dict, output_names: list[str] | None = None,
            timeout: float | None = None, run_index: int = 0,
            device_outputs: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
        """``device_outputs``: outputs returned as device tensors, filled on the device."""

    def cancel(self, error: BaseException, wait: bool = True) -> None:
        """Stop the run in flight (from another thread) with ``error``."""

    def restore(self) -> None:
        """Write the weights again (the device lost its memory contents)."""

    def release_cached(self) -> int:
        """Give back cached device memory; the bytes given back."""

    def run_stats(self) -> RunStats: ...

    def close(self) -> None:
        """Free the streams and the memory (quarantined while a kernel may still write it)."""


@dataclass(frozen=True, kw_only=True)
class RunStats:
    """What every mode counts."""

    mode: str
    runs: int
    host_submissions: int
    """Work the host put on the device (a static run: one; a replay: one)."""
    prepared_bytes: int
    """Device memory of what kernels derive from the weights (packed copies)."""
    recoveries: int = 0
    """Failed attempts the recovery policy handled (:attr:`~.loaded.LoadedModel.recoveries`)."""
    contexts: int = 1
    """Execution contexts (runs at once); each holds the arena and streams counted here."""


@dataclass(frozen=True, kw_only=True)
class StaticRunStats(RunStats):
    """A static model's: one submission per run, planned memory."""

    submissions_per_run: float
    streams: int
    events: int
    arena_bytes: int
    weights_bytes: int
    gears: list[int] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class DynamicRunStats(RunStats):
    """A dynamic model's: the host kernels, the tiling cache, replays and the allocator."""

    runtime_core_number: int
    tiling_cache_hits: int
    tiling_cache_misses: int
    tiling_cache_hit_rate: float
    host_ops: int
    replays: int
    replay_shapes: int
    host_seconds_per_run: float
    host_kernel_runs: int
    host_seconds_per_host_kernel_run: float
    host_seconds_per_replay: float
    launches: int
    host_us_per_op: dict[str, float]
    d2h_syncs: int
    peak_allocated_bytes: int
    """The shared pool's peak, or a recorded run's pool's if larger."""
    peak_reserved_bytes: int
    """The shared pool's peak and what the recorded runs' pools hold."""
    allocator: dict
    """The shared caching allocator's own statistics."""


#: Counters that add up over a model's contexts (the rest: the first context's).
ADDED = ("runs", "host_submissions", "tiling_cache_hits", "tiling_cache_misses", "replays",
         "host_kernel_runs", "launches", "d2h_syncs")


def combined(parts: list[RunStats]) -> RunStats:
    """One model's statistics over its execution contexts: counters added up, ratios
    over the sums, memory per context as each context holds it (``contexts`` of them)."""
    first = parts[0]
    if len(parts) == 1:
        return first
    sums = {k: sum(getattr(p, k) for p in parts) for k in ADDED if hasattr(first, k)}
    out = replace(first, contexts=len(parts), **sums)
    if isinstance(out, StaticRunStats):
        return replace(out, submissions_per_run=out.host_submissions / max(1, out.runs))
    if isinstance(out, DynamicRunStats):
        looked = out.tiling_cache_hits + out.tiling_cache_misses
        return replace(out, tiling_cache_hit_rate=out.tiling_cache_hits / looked if looked else 0.0,
                       replay_shapes=max(p.replay_shapes for p in parts),
                       peak_allocated_bytes=max(p.peak_allocated_bytes for p in parts))
    return out


@dataclass(frozen=True)
class MultiDeviceRunStats:
    """A model on several devices: how the last run was split, and each device's model's."""

    devices: list[int]
    parts: list[dict]
    """The last run's parts: ``{"device", "first_row", "rows"}`` each."""
    models: list[RunStats]
    recoveries: int


#: The profile's name of a submission, by what it submits.
SUBMIT_SPANS = {"static": "submit", "dynamic replay": "submit (replay)"}


class ProgramSlot:
    """The device program an engine has in flight, run the way both engines run one.

    :meth:`execute` is one submission and the wait for it: timed into the profile, stopped
    at once if the device faulted before the run could hear it, and the engine told of
    walks that a cancel abandoned inside a kernel.  :meth:`cancel` stops it from another
    thread."""

    def __init__(self, device: VirtualDevice):
        self.device = device
        self.current: tuple[DeviceProgram, Run, int] | None = None

    def execute(self, program: DeviceProgram, feeds: list, results: list,
                timeout: float | None, faults_plan: dict | None, profiler: Profiler | None,
                what: str, abandoned: Callable[[Run], None]) -> tuple[float, float]:
        """Run ``program`` (``what`` names it in the profile; ``abandoned(run)`` recovers
        from walks stuck in a kernel); the host clock's times after the submission and at the
        end, around the wait."""
        device = self.device
        prof = program.profile = profiler
        if prof is not None:
            start = perf_counter()
        run = device.submit(program, feeds, results, faults_plan)
        self.current = (program, run, run.execution)
        t1 = perf_counter()
        if prof is not None:
            prof.host_span(SUBMIT_SPANS.get(what, "submit"), "host", start, perf_counter())
        try:
            lost = device.faulted()      # before we could hear it: stop the run ourselves
            if lost is not None:
                self.cancel(lost)
            device.finish(program, run, timeout)
        finally:
            self.current = None
            if run.abandoned:
                abandoned(run)
            if prof is not None:
                prof.run_span(start, perf_counter(), what)
        return t1, perf_counter()

    def cancel(self, error: BaseException, wait: bool = True) -> None:
        """Fail the program in flight with ``error``; with ``wait``, walks still inside a
        kernel after :data:`CANCEL_GRACE` are abandoned to it."""
        current = self.current
        if current is None:
            return
        program, run, execution = current
        if run.fail(error, program.events, execution) and wait and not run.wait_done(CANCEL_GRACE):
            self.device.abandon(program, run, error)

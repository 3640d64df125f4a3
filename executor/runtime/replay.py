"""Replays of a dynamic model: the launches of a run, kept as one device program for
inputs of the same shapes.

A run whose host decisions (shapes, tiling, host ops, memory) followed from its
input shapes alone is recorded (its capture); the next run with those shapes is one
submission of that program, with no InferShape, Tiling or Alloc on the host.
:class:`Replays` is a part of :class:`~.dynamic_model.DynamicModel`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from aircc.errors import DeviceOutOfMemoryError
from aircc.executor.device.caching_allocator import CachingAllocator
from aircc.executor.device.run import DeviceProgram

from .host_pipeline import RunState


@dataclass
class Replay:
    """The launches of one run, kept as a device program for inputs of one shape."""

    program: DeviceProgram
    allocator: CachingAllocator
    """Owns the memory the recorded launches use (reused only within one stream)."""
    host_results: list
    outputs: list


#: Input shapes whose launches are kept for replay (least recently used dropped first).
MAX_REPLAYS = 8


class Replays:
    """Recording and replaying runs (mixed into ``DynamicModel``)."""

    def _keep_replay(self, key: tuple, state: RunState, allocator: CachingAllocator) -> None:
        """Keep the launches of a run as a device program for its input shapes.

        Valid because every host decision of the run (shapes, tiling, host ops, memory)
        followed from the input shapes alone: no device value was read by the host."""
        if state.error is not None or state.d2h_syncs:
            for s in self.streams:      # the frees of the run record events: let them run
                s.synchronize()
            allocator.release_cached()
            if isinstance(state.error, DeviceOutOfMemoryError):
                self.drop_replays()     # give their memory back before the next try
            return
        lists: list[list] = [[] for _ in self.streams]
        for stream, task, desc in state.capture:
            lists[stream].append((task, desc))
        program = DeviceProgram(self.streams, self.events, lists, self.name)
        allocator.mark_recorded()       # its blocks are the program's: only we release them
        outs = [(o, state.types[o]) for o in self.exec_graph.outputs]
        self._replays[key] = Replay(program, allocator, state.host_results, outs)
        while len(self._replays) > MAX_REPLAYS:
            _, old = self._replays.popitem(last=False)
            old.allocator.release_cached()

    def drop_replays(self) -> None:
        """Forget every recorded run and return the memory its pool holds."""
        for s in self.streams:
            s.synchronize()
        for rep in self._replays.values():
            rep.allocator.release_cached()
        self._replays.clear()

    def release_cached(self) -> int:
        """Give back every cached block (recorded runs' pools, the shared pool's free
        segments): what an out-of-memory recovery does before it tries again."""
        released = sum(r.allocator.stats()["reserved_bytes"] for r in self._replays.values())
        self.drop_replays()
        return released + self.allocator.release_cached()

    def _run_replay(self, key: tuple, ordered: list[np.ndarray], t0: float,
                    timeout: float | None, plan: dict | None) -> dict[str, np.ndarray]:
        """One submission of a recorded run; host time counts from ``t0`` (the feed checks)."""
        rep = self._replays[key]
        self._replays.move_to_end(key)
        results = [None] * len(rep.outputs)     # the device's copies fill the others
        for binding, value in rep.host_results:
            results[binding] = value.copy()
        t1 = time.thread_time()
        device, program = self.device, rep.program
        prof = program.profile = self.profiler
        if prof is not None:
            start = time.perf_counter()
        run = device.submit(program, ordered, results, plan)
        self._in_flight = (program, run, run.execution)
        submit_seconds = time.thread_time() - t1
        if prof is not None:
            prof.host_span("submit (replay)", "host", start, time.perf_counter())
        try:
            lost = device.faulted()      # before we could hear it: stop the run ourselves
            if lost is not None:
                self.cancel(lost)
            device.finish(program, run, timeout)
        finally:
            self._in_flight = None
            if run.abandoned and run.stuck():
                self.recover_stuck(run.stuck())
            if prof is not None:
                prof.run_span(start, time.perf_counter(), "dynamic replay")
        t2 = time.thread_time()
        self.stats["runs"] += 1
        self.stats["replays"] += 1
        out = {name: r for (name, _), r in zip(rep.outputs, results)}
        self.last_host_seconds = (t1 - t0) + submit_seconds + (time.thread_time() - t2)
        self.stats["host_seconds"] += self.last_host_seconds
        self.stats["replay_host_seconds"] += self.last_host_seconds
        return out

"""Replays of a dynamic model: the launches of a run, kept as one device program for
inputs of the same shapes.

A run whose host decisions (shapes, tiling, host ops, memory) followed from its
input shapes alone is recorded (its capture); the next run with those shapes is one
submission of that program, with no InferShape, Tiling or Alloc on the host.
:func:`record` makes a :class:`Replay` of a run; a model keeps them in a :class:`ReplayCache`.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from aircc.executor.device.caching_allocator import CachingAllocator
from aircc.executor.device.run import DeviceProgram

from .dynamic_plan import DeviceContext, DynamicPlan
from .host_pipeline import RunState


@dataclass
class Replay:
    """The launches of one run, kept as a device program for inputs of one shape."""

    program: DeviceProgram
    allocator: CachingAllocator
    """Owns the memory the recorded launches use (reused only within one stream)."""
    host_results: list
    outputs: list
    copies: list
    """(direction, binding, bytes) of each input and output copy, counted per replay."""


#: Input shapes whose launches are kept for replay (least recently used dropped first).
MAX_REPLAYS = 8


def recordable(state: RunState) -> bool:
    """Whether every host decision of the run (shapes, tiling, host ops, memory) followed
    from the input shapes alone: it ended well and the host read no device value."""
    return state.error is None and not state.d2h_syncs


def record(state: RunState, plan: DynamicPlan, ctx: DeviceContext,
           allocator: CachingAllocator) -> Replay:
    """The launches a run captured, as a device program on ``ctx``'s streams whose memory
    ``allocator`` owns from now on."""
    lists: list[list] = [[] for _ in ctx.streams]
    for stream, task, desc in state.capture:
        lists[stream].append((task, desc))
    program = DeviceProgram(ctx.streams, ctx.events, lists, plan.name)
    allocator.mark_recorded()       # its blocks are the program's: only we release them
    outs = [(o, state.types[o]) for o in plan.exec_graph.outputs]
    return Replay(program, allocator, state.host_results, outs, state.copy_plan)


class ReplayCache:
    """A model's recorded runs by input shapes, at most :data:`MAX_REPLAYS` of them."""

    def __init__(self):
        self._entries: OrderedDict[tuple, Replay] = OrderedDict()

    def __contains__(self, key: tuple | None) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, key: tuple) -> Replay:
        """The replay of these input shapes (now the most recently used)."""
        self._entries.move_to_end(key)
        return self._entries[key]

    def keep(self, key: tuple, replay: Replay) -> None:
        self._entries[key] = replay
        while len(self._entries) > MAX_REPLAYS:
            _, old = self._entries.popitem(last=False)
            old.allocator.release_cached()

    def recorded(self) -> list[Replay]:
        """The recorded runs, least recently used first."""
        return list(self._entries.values())

    def pools(self) -> list[CachingAllocator]:
        """The allocators of the recorded runs."""
        return [r.allocator for r in self._entries.values()]

    def reserved_bytes(self) -> int:
        return sum(p.stats()["reserved_bytes"] for p in self.pools())

    def forget(self) -> list[CachingAllocator]:
        """Forget every recorded run; their pools, for the caller to release (now, or when
        the kernels that may still write them return)."""
        pools = self.pools()
        self._entries.clear()
        return pools

"""Pass ``plan-memory``: one activation arena, reused along happens-before.

Every value a device task writes is a buffer (kernel outputs, host-to-device
copies, kernel workspaces).  Two buffers may share bytes only if every use of
one happens before the other is first written, through stream order and
events (:class:`HappensBefore`); a mere data dependency is not enough.
Offsets come from greedy-by-size placement (Pisarchyk & Lee, 2020): largest
buffer first, each into the smallest gap left among the already placed
buffers it conflicts with.

The report gives the arena size, the lower bound (the largest sum of bytes
live at one point of the schedule) and the total with no reuse at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from aircc.errors import CompileOptionError

from ..ir.graph import Graph
from ..schedule.happens_before import HappensBefore

ALIGNMENT = 64


def align_up(n: int, a: int = ALIGNMENT) -> int:
    return (n + a - 1) // a * a


@dataclass
class Buffer:
    """One tensor (or workspace) that lives in the activation arena."""

    name: str
    size: int
    writer: int
    readers: list[int] = field(default_factory=list)
    offset: int = -1

    @property
    def last(self) -> int:
        return max([self.writer, *self.readers])


@dataclass
class MemoryPlan:
    buffers: dict[str, Buffer]
    arena_bytes: int
    lower_bound_bytes: int
    no_reuse_bytes: int
    alignment: int = ALIGNMENT


def collect_buffers(graph: Graph) -> list[Buffer]:
    """Buffers for every value defined by a device task, plus kernel workspaces."""
    buffers: dict[str, Buffer] = {}
    for k, node in enumerate(graph.nodes):
        for i in node.inputs:
            if i in buffers:
                buffers[i].readers.append(k)
        for o in node.outputs:
            if not o:
                continue
            t = graph.types[o]
            if not t.is_static:
                raise CompileOptionError(
                    f"static mode needs static shapes, but '{o}' (output of node '{node.name}') "
                    f"has shape {list(t.shape) if t.shape is not None else '[*]'}; fix the input "
                    f"shapes with --input-shape")
            buffers[o] = Buffer(o, t.nbytes, k)
        ws = node.meta.get("workspace", 0)
        if ws:
            buffers[f"{node.name}#workspace"] = Buffer(f"{node.name}#workspace", ws, k, [k])
    return list(buffers.values())


def lower_bound(buffers: list[Buffer]) -> int:
    """Largest sum of buffer bytes live at one task of the linear schedule."""
    deltas: dict[int, int] = {}
    for b in buffers:
        deltas[b.writer] = deltas.get(b.writer, 0) + b.size
        deltas[b.last + 1] = deltas.get(b.last + 1, 0) - b.size
    live = best = 0
    for k in sorted(deltas):
        live += deltas[k]
        best = max(best, live)
    return best


def place(buffers: list[Buffer], hb: HappensBefore, alignment: int = ALIGNMENT) -> int:
    """Assign offsets greedily by size; returns the arena size."""
    after = {b.name: hb.after_all([b.writer, *b.readers]) for b in buffers}
    placed: list[Buffer] = []
    arena = 0
    for b in sorted(buffers, key=lambda b: (-b.size, b.writer, b.name)):
        size = align_up(b.size, alignment)
        if size == 0:
            b.offset = 0
            continue
        clash = sorted((c for c in placed
                        if not (after[c.name] >> b.writer & 1 or after[b.name] >> c.writer & 1)),
                       key=lambda c: c.offset)
        best_gap, best_off, end = None, None, 0
        for c in clash:
            gap = c.offset - end
            if gap >= size and (best_gap is None or gap < best_gap):
                best_gap, best_off = gap, end
            end = max(end, c.offset + align_up(c.size, alignment))
        b.offset = end if best_off is None else best_off
        arena = max(arena, b.offset + size)
        placed.append(b)
    return arena


def plan_memory(graph: Graph, alignment: int = ALIGNMENT) -> MemoryPlan:
    buffers = collect_buffers(graph)
    hb = HappensBefore(graph)
    arena = place(buffers, hb, alignment)
    return MemoryPlan({b.name: b for b in buffers}, arena, lower_bound(buffers),
                      sum(align_up(b.size, alignment) for b in buffers), alignment)

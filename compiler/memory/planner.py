"""Pass ``plan-memory``: one activation arena, reused along happens-before.

Every value a device task writes is a buffer (kernel outputs, host-to-device
copies, kernel workspaces).  Two buffers may share bytes only if every use of
one happens before the other is first written, through stream order and
events (:class:`HappensBefore`); a mere data dependency is not enough.
Offsets come from greedy placement (Pisarchyk & Lee, 2020): buffers are taken
in some order, each into the smallest gap left among the already placed
buffers it conflicts with.  As in the graph engine, several orders are tried
(largest first, schedule order, largest size x lifetime first, busiest task
first) and the smallest arena wins.

Ops in place: when the parts of a Concat are contiguous slices of its output
(every dim before the axis is 1), each part that a device task writes
becomes an alias of its slice, so its producer writes straight into the
concatenation and the Concat copies nothing; the output of a reshape
(Reshape, Flatten, Squeeze, Unsqueeze) is an alias of its input, the same
bytes in another shape.  Such a node stays, a no-op that keeps its place in
the streams and events.  An alias group (a value and everything placed inside
it, nested Concats and reshapes included) is placed as one buffer, live from
its first writer to its last reader.

The report gives the arena size, the lower bound (the most bytes that can be
live at once, :mod:`.lower_bound`) and the total with no reuse at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from aircc.errors import CompileOptionError
from aircc.formats.alignment import ALIGNMENT, align_up
from aircc.formats.kinds import Impl
from aircc.ops import Trait, has_trait

from ..ir.graph import Graph
from ..ir.user_names import user_value
from ..schedule.happens_before import HappensBefore, covers
from .lower_bound import lower_bound

def workspace_buffer(node: str) -> str:
    """The name of the buffer that holds node ``node``'s workspace: the planner places it
    under this name and the lowering finds its offset by it."""
    return f"{node}#workspace"




@dataclass
class Buffer:
    """One tensor (or workspace) that lives in the activation arena."""

    name: str
    size: int
    writer: int
    readers: list[int] = field(default_factory=list)
    offset: int = -1
    writers: list[int] = field(default_factory=list)
    """Every task that writes it (an alias group has several); empty means [writer]."""

    @property
    def last(self) -> int:
        return max([self.writer, *self.readers])

    @property
    def all_writers(self) -> list[int]:
        return self.writers or [self.writer]


@dataclass
class Alias:
    """A value that lives inside another buffer: ``offset`` bytes into ``of``."""

    name: str
    of: str
    offset: int


@dataclass
class MemoryPlan:
    buffers: dict[str, Buffer]
    arena_bytes: int
    lower_bound_bytes: int
    no_reuse_bytes: int
    alignment: int = ALIGNMENT
    strategy: str = ""
    aliases: dict[str, Alias] = field(default_factory=dict)
    """Values placed inside another buffer (the parts of a Concat done in place)."""
    in_place: dict[str, list[bool]] = field(default_factory=dict)
    """Per Concat node done in place: which of its inputs are already in their slice."""

    def offset(self, name: str) -> int:
        alias = self.aliases.get(name)
        if alias is None:
            return self.buffers[name].offset
        return self.offset(alias.of) + alias.offset


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
                    f"static mode needs static shapes, but {user_value(graph, o)} "
                    f"has shape {list(t.shape) if t.shape is not None else '[*]'}; compile with "
                    f"--mode dynamic")
            buffers[o] = Buffer(o, t.nbytes, k)
        ws = node.meta.get("workspace", 0)
        if ws:
            name = workspace_buffer(node.name)
            buffers[name] = Buffer(name, ws, k, [k])
    _extend_over_spans(graph, buffers)
    return list(buffers.values())


def _extend_over_spans(graph: Graph, buffers: dict[str, Buffer]) -> None:
    """A value from before a control-flow construct (or its loop state, made by the
    construct's first task) that the construct reads is read again on every
    iteration: it stays live until the construct ends."""
    index = {n.name: k for k, n in enumerate(graph.nodes)}
    for first, last in graph.meta.get("spans", []):
        start, end = index[first], index[last]
        for node in graph.nodes[start:end + 1]:
            for i in node.inputs:
                b = buffers.get(i)
                if b is not None and b.writer <= start:
                    b.readers.append(end)


def _by_busiest_task(buffers: list[Buffer]) -> list[Buffer]:
    """Buffers of the task with the most live bytes first (largest first within a task)."""
    live: dict[int, int] = {}
    for b in buffers:
        for t in range(b.writer, b.last + 1):
            live[t] = live.get(t, 0) + b.size
    order, seen = [], set()
    by_task: dict[int, list[Buffer]] = {}
    for b in buffers:
        for t in range(b.writer, b.last + 1):
            by_task.setdefault(t, []).append(b)
    for t in sorted(live, key=lambda t: (-live[t], t)):
        for b in sorted(by_task[t], key=lambda b: (-b.size, b.writer, b.name)):
            if b.name not in seen:
                seen.add(b.name)
                order.append(b)
    return order


STRATEGIES = {
    "largest-first": lambda bs: sorted(bs, key=lambda b: (-b.size, b.writer, b.name)),
    "schedule-order": lambda bs: sorted(bs, key=lambda b: (b.writer, -b.size, b.name)),
    "largest-lifetime-first": lambda bs: sorted(bs, key=lambda b: (-b.size * (b.last - b.writer + 1),
                                                                   b.writer, b.name)),
    "busiest-task-first": _by_busiest_task,
}


def conflicts(buffers: list[Buffer], hb: HappensBefore | None, one_stream: bool) -> dict[str, list[Buffer]]:
    """For each buffer, the buffers it may not share bytes with (neither is done before the other).

    Both cases are one sweep in order of the buffers' first writers.  On one stream
    the conflicts are exactly the buffers whose lifetimes overlap along the schedule.
    With several streams a buffer is tested, by vector clocks, against the buffers
    still open: one leaves the open set once it is done before every task from the
    sweep's position on (it is then done before every later buffer too).  A buffer
    written later than another can never be done before it, so one test per pair."""
    out: dict[str, list[Buffer]] = {b.name: [] for b in buffers}
    live = sorted((b for b in buffers if b.size > 0), key=lambda b: (b.writer, b.name))
    active: list[Buffer] = []
    if one_stream:
        for b in live:
            active = [a for a in active if a.last >= b.writer]
            for a in active:
                out[a.name].append(b)
                out[b.name].append(a)
            active.append(b)
        return out
    if hb is None:
        raise ValueError("conflicts across streams need the happens-before relation")
    reach = {b.name: hb.reach([*b.all_writers, *b.readers]) for b in live}
    floors = hb.floors()
    for b in live:
        active = [a for a in active if not covers(floors[b.writer], reach[a.name])]
        known = hb.known(b.all_writers)
        for a in active:
            if not covers(known, reach[a.name]):
                out[a.name].append(b)
                out[b.name].append(a)
        active.append(b)
    return out


def place(buffers: list[Buffer], hb: HappensBefore | None, alignment: int = ALIGNMENT,
          strategy: str = "largest-first", clashes: dict[str, list[Buffer]] | None = None) -> int:
    """Assign offsets greedily in the strategy's order; returns the arena size."""
    if clashes is None:
        clashes = conflicts(buffers, hb, one_stream=False)
    placed: set[str] = set()
    arena = 0
    for b in STRATEGIES[strategy](buffers):
        size = align_up(b.size, alignment)
        if size == 0:
            b.offset = 0
            continue
        clash = sorted((c for c in clashes[b.name] if c.name in placed), key=lambda c: c.offset)
        best_gap, best_off, end = None, None, 0
        for c in clash:
            gap = c.offset - end
            if gap >= size and (best_gap is None or gap < best_gap):
                best_gap, best_off = gap, end
            end = max(end, c.offset + align_up(c.size, alignment))
        b.offset = end if best_off is None else best_off
        arena = max(arena, b.offset + size)
        placed.add(b.name)
    return arena


def plan_aliases(graph: Graph, buffers: dict[str, Buffer]) -> tuple[dict[str, Alias], dict[str, list[bool]]]:
    """Values that can live inside another buffer: the parts of Concats in their slice
    of the output, the outputs of reshapes in their input (see module doc)."""
    aliases: dict[str, Alias] = {}
    in_place: dict[str, list[bool]] = {}
    if graph.meta.get("spans"):
        return aliases, in_place        # control flow rewrites values per iteration
    for node in graph.nodes:
        if node.domain or node.impl is Impl.FALLBACK:
            continue
        if has_trait(node.op, Trait.VIEW):     # its output is its input's bytes in another shape
            src, out = node.inputs[0], node.outputs[0]
            if src in buffers and out in buffers and out not in aliases \
                    and buffers[src].size == buffers[out].size:
                aliases[out] = Alias(out, src, 0)
                in_place[node.name] = [True]
            continue
        if node.op != "Concat":
            continue
        out = node.outputs[0]
        t = graph.types.get(out)
        if out not in buffers or t is None or not t.is_static:
            continue
        axis = int(node.attrs.get("axis", 1)) % len(t.shape)
        if any(int(d) != 1 for d in t.shape[:axis]):
            continue                    # the parts would be strided slices
        inner = t.nbytes // max(1, int(t.shape[axis]))
        flags, offset = [], 0
        for name in node.inputs:
            part = graph.types[name]
            ok = (name in buffers and name not in aliases and name not in graph.outputs
                  and node.inputs.count(name) == 1 and part.dtype == t.dtype)
            if ok:
                aliases[name] = Alias(name, out, offset)
            flags.append(ok)
            offset += int(part.shape[axis]) * inner
        if any(flags):
            in_place[node.name] = flags
    return aliases, in_place


def _merge_aliases(buffers: dict[str, Buffer], aliases: dict[str, Alias]) -> list[Buffer]:
    """One buffer per alias group, spanning every member's writers and readers."""
    def root(name: str) -> str:
        while name in aliases:
            name = aliases[name].of
        return name

    for name in aliases:
        member, group = buffers[name], buffers[root(name)]
        group.writers = sorted({*group.all_writers, *member.all_writers})
        group.writer = group.writers[0]
        group.readers.extend(member.readers)
    return [b for n, b in buffers.items() if n not in aliases]


def plan_memory(graph: Graph, alignment: int = ALIGNMENT) -> MemoryPlan:
    """Run every placement strategy and keep the smallest arena."""
    by_name = {b.name: b for b in collect_buffers(graph)}
    aliases, in_place = plan_aliases(graph, by_name)
    buffers = _merge_aliases(by_name, aliases)
    streams = len({n.meta.get("stream", 0) for n in graph.nodes})
    # on one stream, schedule order is happens-before: the sweep needs no clocks
    hb = HappensBefore(graph) if streams > 1 else None
    clashes = conflicts(buffers, hb, one_stream=streams == 1)
    best, best_offsets, best_name = None, {}, ""
    for name in STRATEGIES:
        arena = place(buffers, hb, alignment, name, clashes)
        if best is None or arena < best:
            best, best_name = arena, name
            best_offsets = {b.name: b.offset for b in buffers}
    for b in buffers:
        b.offset = best_offsets[b.name]
    bound = lower_bound(buffers, clashes, streams)
    return MemoryPlan({b.name: b for b in buffers}, best or 0, bound,
                      sum(align_up(b.size, alignment) for b in buffers), alignment, best_name,
                      aliases, in_place)

"""The lower bound of an activation arena: the most bytes that can be live at once.

Buffer ``A`` is *done before* ``B`` when every use of ``A`` happens before
``B`` is written; that is a strict partial order, and two buffers may share
bytes only if one is done before the other.  Any set of buffers no two of
which are ordered (an antichain) must therefore sit side by side, so the
heaviest antichain is a lower bound for every valid plan, and with one
stream it is just the peak of the live bytes along the schedule.  With
several streams it is found as a minimum flow (weighted Dilworth), with
networkx's maximum flow.
"""
from __future__ import annotations

import networkx as nx


def peak_live_bytes(buffers) -> int:
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


#: Buffers above which the bound is the peak of live bytes along the schedule instead
#: of the heaviest antichain, whose order is a bitmask per buffer (quadratic memory).
EXACT_BUFFERS = 4000


def heaviest_antichain(buffers, clashes: dict[str, list]) -> int:
    """Largest total size of buffers that are pairwise not ordered (``clashes``: each
    buffer's conflicts, as :func:`~aircc.compiler.memory.planner.conflicts` finds them)."""
    bufs = sorted((b for b in buffers if b.size > 0), key=lambda b: (b.writer, b.name))
    n = len(bufs)
    position = {b.name: i for i, b in enumerate(bufs)}
    later = []                       # later[i]: bitmask of buffers that i is done before
    for i, b in enumerate(bufs):
        # a buffer first written later can only come after it, so every later one that
        # does not clash with it does
        clash = 0
        for c in clashes[b.name]:
            clash |= 1 << position[c.name]
        later.append(((1 << n) - (1 << (i + 1))) & ~clash)
    # residual network of the initial flow (each buffer its own s-t path); pushing flow
    # back from t to s merges buffers into chains; min flow = total - that max flow
    net = nx.DiGraph()
    net.add_nodes_from(["s", "t"])
    for i, b in enumerate(bufs):
        net.add_edge(("in", i), "s", capacity=b.size)
        net.add_edge("t", ("out", i), capacity=b.size)
        net.add_edge(("in", i), ("out", i))
        rest = later[i]
        while rest:                  # keep only cover relations (the Hasse diagram):
            low = rest & -rest       # the lowest one left is covered by none before it
            j = low.bit_length() - 1
            net.add_edge(("out", i), ("in", j))
            rest &= ~(later[j] | low)
    total = sum(b.size for b in bufs)
    return total - (nx.maximum_flow_value(net, "t", "s") if n else 0)


def lower_bound(buffers, clashes: dict[str, list], streams: int) -> int:
    """The heaviest antichain; on one stream, or past :data:`EXACT_BUFFERS` buffers, the
    peak of live bytes along the schedule.  Buffers live at one point of the task list
    are pairwise unordered on any number of streams (one's first writer comes before
    the other's last use), so that peak is a lower bound too, only a weaker one."""
    if streams <= 1 or sum(1 for b in buffers if b.size > 0) > EXACT_BUFFERS:
        return peak_live_bytes(buffers)
    return heaviest_antichain(buffers, clashes)

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

from ..schedule.happens_before import HappensBefore


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


def heaviest_antichain(buffers, hb: HappensBefore) -> int:
    """Largest total size of buffers that are pairwise not ordered by happens-before."""
    bufs = sorted((b for b in buffers if b.size > 0), key=lambda b: b.writer)
    n = len(bufs)
    starts = [sum(1 << w for w in b.all_writers) for b in bufs]
    later = []                       # later[i]: bitmask of buffers that i is done before
    for b in bufs:
        after = hb.after_all([*b.all_writers, *b.readers])
        mask = 0
        for j in range(n):
            if after & starts[j] == starts[j]:
                mask |= 1 << j
        later.append(mask)
    # residual network of the initial flow (each buffer its own s-t path); pushing flow
    # back from t to s merges buffers into chains; min flow = total - that max flow
    net = nx.DiGraph()
    net.add_nodes_from(["s", "t"])
    for i, b in enumerate(bufs):
        net.add_edge(("in", i), "s", capacity=b.size)
        net.add_edge("t", ("out", i), capacity=b.size)
        net.add_edge(("in", i), ("out", i))
        covered, rest = 0, later[i]
        while rest:                  # keep only cover relations (the Hasse diagram)
            low = rest & -rest
            rest ^= low
            covered |= later[low.bit_length() - 1]
        direct = later[i] & ~covered
        while direct:
            low = direct & -direct
            direct ^= low
            net.add_edge(("out", i), ("in", low.bit_length() - 1))
    total = sum(b.size for b in bufs)
    return total - (nx.maximum_flow_value(net, "t", "s") if n else 0)


def lower_bound(buffers, hb: HappensBefore | None, streams: int) -> int:
    return peak_live_bytes(buffers) if streams <= 1 else heaviest_antichain(buffers, hb)

"""Happens-before over a stream schedule.

Task ``a`` happens before task ``b`` when a chain of stream order (tasks of
one stream run in list order) and event edges (an EventRecord before the
EventWait of the same event) leads from ``a`` to ``b``.  Data edges are not
used: at run time only streams and events order work.
"""
from __future__ import annotations

from ..ir.graph import Graph


class HappensBefore:
    """Transitive closure of stream order + events, as one bitset per task."""

    def __init__(self, graph: Graph, skip_events: frozenset[int] = frozenset()):
        nodes = graph.nodes
        self.index = {n.name: k for k, n in enumerate(nodes)}
        succ: list[list[int]] = [[] for _ in nodes]
        last_on_stream: dict[int, int] = {}
        record_at: dict[int, int] = {}
        for k, n in enumerate(nodes):
            s = n.meta.get("stream", 0)
            if s in last_on_stream:
                succ[last_on_stream[s]].append(k)
            last_on_stream[s] = k
            if n.op == "EventRecord" and n.attrs["event"] not in skip_events:
                record_at[n.attrs["event"]] = k
        for k, n in enumerate(nodes):
            if n.op == "EventWait" and n.attrs["event"] in record_at:
                succ[record_at[n.attrs["event"]]].append(k)
        # nodes is a topological order of these edges, so one backward sweep closes them
        self.after = [0] * len(nodes)
        for k in range(len(nodes) - 1, -1, -1):
            bits = 0
            for j in succ[k]:
                bits |= self.after[j] | (1 << j)
            self.after[k] = bits

    def before(self, a: int, b: int) -> bool:
        """Whether task ``a`` is finished before task ``b`` starts."""
        return bool(self.after[a] >> b & 1)

    def after_all(self, tasks) -> int:
        """Bitset of tasks that start only after every task in ``tasks`` finished."""
        mask = -1
        for t in tasks:
            mask &= self.after[t]
        return mask

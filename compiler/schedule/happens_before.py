"""Happens-before over a stream schedule.

Task ``a`` happens before task ``b`` when a chain of stream order (tasks of
one stream run in list order) and event edges (an EventRecord before the
EventWait of the same event) leads from ``a`` to ``b``.  Data edges are not
used: at run time only streams and events order work.

The relation is kept as a vector clock per task (as race detectors keep it):
for every stream, the last task on it that happens before the task.  The tasks
of one stream that happen before a task are a prefix of that stream (a task
before one of them is before it too), so one index per stream says which.
That is linear in the tasks times the streams, where a closure over task pairs
would be quadratic.
"""
from __future__ import annotations

from aircc.ops import device

from ..ir.graph import Graph

NONE = -1
"""A clock entry for a stream none of whose tasks come before."""


class HappensBefore:
    """Vector clocks of stream order + events.  Tasks are graph node indices."""

    def __init__(self, graph: Graph):
        nodes = graph.nodes
        self.index = {n.name: k for k, n in enumerate(nodes)}
        lanes: dict = {}
        self.lane = [lanes.setdefault(n.meta.get("stream", 0), len(lanes)) for n in nodes]
        self.width = width = max(1, len(lanes))
        self.clock: list[tuple[int, ...]] = []
        """Per task, per stream: the index of the last task on that stream before it."""
        last_on_lane = [NONE] * width
        recorded: dict[int, int] = {}       # event -> its latest EventRecord so far
        for k, n in enumerate(nodes):
            lane = self.lane[k]
            clock = [NONE] * width
            sources = [last_on_lane[lane]]
            if n.op == device.EVENT_WAIT:
                sources.append(recorded.get(n.attrs["event"], NONE))
            for p in sources:
                if p == NONE:
                    continue
                clock = [max(a, b) for a, b in zip(clock, self.clock[p])]
                clock[self.lane[p]] = max(clock[self.lane[p]], p)
            self.clock.append(tuple(clock))
            last_on_lane[lane] = k
            if n.op == device.EVENT_RECORD:
                recorded[n.attrs["event"]] = k

    def before(self, a: int, b: int) -> bool:
        """Whether task ``a`` is finished before task ``b`` starts."""
        return a <= self.clock[b][self.lane[a]]     # never a == b: a clock holds earlier tasks

    def reach(self, tasks) -> tuple[int, ...]:
        """Per stream, the last of ``tasks`` on it (what must be finished to be past them all)."""
        out = [NONE] * self.width
        for t in tasks:
            lane = self.lane[t]
            out[lane] = max(out[lane], t)
        return tuple(out)

    def known(self, tasks) -> tuple[int, ...]:
        """Per stream, the last task finished before every one of ``tasks`` starts."""
        out = None
        for t in tasks:
            out = self.clock[t] if out is None else tuple(map(min, out, self.clock[t]))
        return out if out is not None else (NONE,) * self.width

    def floors(self) -> list[tuple[int, ...]]:
        """Per task k, :meth:`known` of every task from k to the end of the list."""
        out: list[tuple[int, ...]] = [()] * len(self.clock)
        acc = None
        for k in range(len(self.clock) - 1, -1, -1):
            acc = self.clock[k] if acc is None else tuple(map(min, acc, self.clock[k]))
            out[k] = acc
        return out


def covers(known: tuple[int, ...], reach: tuple[int, ...]) -> bool:
    """Whether tasks whose :meth:`~HappensBefore.reach` is ``reach`` are all finished at a
    point whose :meth:`~HappensBefore.known` is ``known``."""
    return all(r <= k for r, k in zip(reach, known))

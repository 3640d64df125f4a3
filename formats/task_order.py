"""The order of a static model's tasks: streams that can always go on.

Per stream, tasks run in list order; an ``event_wait`` holds its stream until the
matching ``event_record`` ran on another.  Two checks keep a forged (or broken) file
from hanging a run forever, before anything runs:

- **no circular waits**: the tasks with an edge to the next task of their stream and
  from every record to the waits on its event must form an acyclic graph (each
  task once, in list order; a loop's later iterations repeat the same pattern);
- **loops that can end**: a ``goto`` to an earlier label must have, between that label
  and itself, a ``switch`` that jumps past it (the loop's exit), and a ``switch`` only
  jumps forward.

A loop whose exit condition never comes true is not caught here; the run's deadline
(the watchdog) ends it.
"""
from __future__ import annotations

from collections import deque

from .checks import Checker
from .kinds import TaskKind
from .tasks import EventTask, JumpTask, TasksSection


def check_jumps(tasks: TasksSection, c: Checker) -> None:
    """Switches jump forward; every backward goto has an exit switch inside its loop."""
    for s, tl in enumerate(tasks.lists):
        where = {t.label: i for i, t in enumerate(tl) if t.kind is TaskKind.LABEL}
        for i, t in enumerate(tl):
            if not isinstance(t, JumpTask) or t.kind is TaskKind.LABEL:
                continue
            target = where[t.label]
            if t.kind is TaskKind.SWITCH and target < i:
                c.fail(f"lists[{s}][{i}]", f"switches back to label {t.label} (at {target}): a "
                                           f"switch only jumps forward, to leave a loop or a branch")
            if t.kind is TaskKind.GOTO and target <= i:
                exits = any(isinstance(u, JumpTask) and u.kind is TaskKind.SWITCH
                            and where[u.label] > i for u in tl[target + 1:i])
                if not exits:
                    c.fail(f"lists[{s}][{i}]", f"jumps back to label {t.label} (at {target}) with no "
                                               f"switch between them that leaves the loop: it "
                                               f"would loop forever")


def check_waits(tasks: TasksSection, c: Checker) -> None:
    """No stream waits, directly or through others, on an event recorded after its wait."""
    records: dict[int, tuple[int, int]] = {}
    waits: dict[int, list[tuple[int, int]]] = {}
    for s, tl in enumerate(tasks.lists):
        for i, t in enumerate(tl):
            if isinstance(t, EventTask):
                if t.kind is TaskKind.EVENT_RECORD:
                    records[t.event] = (s, i)
                else:
                    waits.setdefault(t.event, []).append((s, i))
    indegree = {(s, i): (1 if i else 0) for s, tl in enumerate(tasks.lists) for i in range(len(tl))}
    for e, ws in waits.items():
        for w in ws:
            indegree[w] += 1
    ready = deque(k for k, d in indegree.items() if d == 0)
    done = 0
    while ready:
        s, i = ready.popleft()
        done += 1
        t = tasks.lists[s][i]
        after = [(s, i + 1)] if i + 1 < len(tasks.lists[s]) else []
        if isinstance(t, EventTask) and t.kind is TaskKind.EVENT_RECORD:
            after += waits.get(t.event, [])
        for k in after:
            indegree[k] -= 1
            if indegree[k] == 0:
                ready.append(k)
    if done == len(indegree):
        return
    for (s, i), d in sorted(indegree.items()):
        t = tasks.lists[s][i]
        if d > 0 and isinstance(t, EventTask) and t.kind is TaskKind.EVENT_WAIT:
            rs, ri = records[t.event]
            c.fail(f"lists[{s}][{i}]", f"waits on event {t.event}, recorded by lists[{rs}][{ri}], "
                                       f"which can only run after this wait: the streams would "
                                       f"wait for each other forever")
    c.fail("lists", "the streams wait for each other in a circle")      # pragma: no cover

"""Where a static plan puts its weights, checked against what its tasks read.

The weights region is written once at load, weight by weight, from the records of
section ``memory_plan``; tasks then read it at the addresses their operands name.
Two faults would let a task read bytes no one wrote, or bytes of another weight,
and give a wrong answer with no error, so both are refused here (by the writer
before it writes a model and by the reader after it reads one):

- two weight records whose byte ranges overlap, unless they are the same range
  holding the same bytes (a zero-size weight has no range and overlaps nothing);
- a task operand in the weights region whose bytes do not lie inside one record's
  range (a zero-size operand reads nothing), and any task that writes there.

Cost: a sort of the records, then one binary search per weight operand.
"""
from __future__ import annotations

import bisect
from collections.abc import Mapping

import numpy as np

from .checks import Checker
from .kinds import Region, TaskKind
from .memory_plan import MemoryPlanSection, WeightRecord
from .tasks import CopyTask, KernelTask, TasksSection


def check_weight_records(mp: MemoryPlanSection, weights: Mapping[str, np.ndarray] | None,
                         c: Checker, where: str) -> list[WeightRecord]:
    """Each record places a stored weight at its size, and no two records overlap unless
    they are the same range of the same bytes; returns the non-empty records by offset."""
    for i, rec in enumerate(mp.weights):
        if weights is None:
            break
        arr = weights.get(rec.name)
        at = f"{where}weights[{i}]"
        if arr is None:
            c.fail(at, f"places weight '{rec.name}', which the model does not store")
        if int(arr.nbytes) != rec.size:
            c.fail(at, f"gives weight '{rec.name}' {rec.size} bytes; it has {int(arr.nbytes)}")
    spans = sorted((r for r in mp.weights if r.size), key=lambda r: (r.offset, r.size, r.name))
    for a, b in zip(spans, spans[1:]):
        if b.offset >= a.offset + a.size:
            continue
        same = (a.offset, a.size) == (b.offset, b.size) and weights is not None and \
            np.array_equal(np.asarray(weights[a.name]).reshape(-1).view(np.uint8),
                           np.asarray(weights[b.name]).reshape(-1).view(np.uint8))
        if not same:
            c.fail(f"{where}weights", f"weights '{a.name}' (bytes [{a.offset}, {a.offset + a.size})) "
                                      f"and '{b.name}' (bytes [{b.offset}, {b.offset + b.size})) "
                                      f"overlap in the weights region and do not hold the same bytes")
    return spans


def check_weight_reads(tasks: TasksSection, spans: list[WeightRecord], c: Checker,
                       prefix: str) -> None:
    """Every weight operand of a task lies inside one record's range; no task writes
    to the weights region."""
    starts = [r.offset for r in spans]
    for s, tl in enumerate(tasks.lists):
        for i, task in enumerate(tl):
            w = f"{prefix}lists[{s}][{i}]"
            label = f"node '{task.node}'" if isinstance(task, KernelTask) else f"task {task.id}"
            for field_, op in task.operands():
                if op.region is not Region.WEIGHTS:
                    continue
                writes = field_.startswith("outputs") or (
                    isinstance(task, CopyTask) and task.kind is TaskKind.MEMCPY_H2D)
                if writes:
                    c.fail(f"{w}.{field_}", f"({label}) writes to the weights region, which is "
                                            f"read-only")
                n = op.nbytes
                if not n:
                    continue
                k = bisect.bisect_right(starts, op.offset) - 1
                inside = k >= 0 and op.offset + n <= spans[k].offset + spans[k].size
                if not inside:
                    near = [r.name for r in spans if r.offset < op.offset + n and op.offset < r.offset + r.size]
                    what = (f"which only partly lies in weight '{near[0]}'" if near
                            else "which no weight is written to")
                    c.fail(f"{w}.{field_}", f"({label}) reads bytes [{op.offset}, {op.offset + n}) "
                                            f"of the weights region, {what}")

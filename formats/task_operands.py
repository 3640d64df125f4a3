"""The operands of one static kernel task against each other and against its workspace.

A kernel reads its inputs while it writes its outputs and its workspace, and a oneDNN
primitive keeps pointers in its scratchpad (the workspace): bytes that two of them share
give a wrong answer at best, and where a kernel's own pointers are overwritten, a crash.
So, for every kernel task (in the arena: no task writes the weights region,
:mod:`.weight_placement`):

- its outputs share no byte with each other;
- its workspace shares no byte with any of its operands;
- an output shares bytes with an input only where the memory planner runs the op in place
  (:data:`IN_PLACE_OPS`, the input flagged in the task's ``in_place`` attribute), and then
  exactly as the planner places it: a view op's output is its input's bytes (same offset,
  same size); a Concat's input is its own slice of the output (the output's offset plus the
  bytes of the inputs before it).

Inputs may share bytes with each other (they are only read); an operand of no bytes shares
none.  Cost: per task, a sort of its outputs and one binary search per input.
"""
from __future__ import annotations

import bisect
from typing import Any

from .checks import Checker
from .kinds import Region
from .tasks import KernelTask, Operand, TasksSection

#: Ops the memory planner may run in place (default domain): the view ops, whose output is
#: their input's bytes, and Concat, whose parts may be written straight into their slice.
VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
IN_PLACE_OPS = VIEW_OPS | {"Concat"}


def in_place_flags(task: KernelTask) -> list[bool]:
    """Which inputs the task says are in place already (none unless its op may run in place)."""
    flags: Any = task.attrs.get("in_place")
    if task.domain not in ("", "ai.onnx") or task.op not in IN_PLACE_OPS or not isinstance(flags, list):
        return []
    return [f is True for f in flags]


def _in_place_at(task: KernelTask, i: int) -> int | None:
    """The offset input ``i`` has when it lies in place in output 0, else None."""
    out = task.outputs[0] if task.outputs else None
    if out is None or out.region is not Region.ARENA:
        return None
    if task.op in VIEW_OPS:
        return out.offset if i == 0 and task.inputs[0].nbytes == out.nbytes else None
    before = task.inputs[:i]
    if any(o is None for o in before):
        return None
    return out.offset + sum(o.nbytes for o in before)        # type: ignore[union-attr]


def _span(op: Operand) -> tuple[int, int]:
    return op.offset, op.offset + op.nbytes


def check_task_operands(tasks: TasksSection, c: Checker, prefix: str) -> None:
    """Every kernel task's operands and workspace as the module doc says."""
    for s, tl in enumerate(tasks.lists):
        for i, task in enumerate(tl):
            if isinstance(task, KernelTask):
                _check_task(task, c, f"{prefix}lists[{s}][{i}]")


def _check_task(task: KernelTask, c: Checker, w: str) -> None:
    node = f"(node '{task.node}', {task.op})"
    outs = sorted((o.offset, o.offset + o.nbytes, j) for j, o in enumerate(task.outputs)
                  if o is not None and o.region is Region.ARENA and o.nbytes)
    for (a0, a1, ja), (b0, b1, jb) in zip(outs, outs[1:]):
        if b0 < a1:
            c.fail(f"{w}.outputs[{jb}]", f"{node} writes bytes [{b0}, {b1}) of the arena, which "
                                         f"outputs[{ja}] writes too ([{a0}, {a1})): a kernel's "
                                         f"outputs share no byte")
    ws = task.workspace
    if ws is not None and ws.size:
        for field_, op in task.operands():
            lo, hi = _span(op)
            if op.region is Region.ARENA and lo < hi and lo < ws.offset + ws.size and ws.offset < hi:
                c.fail(f"{w}.workspace", f"{node} bytes [{ws.offset}, {ws.offset + ws.size}) of the "
                                         f"arena overlap {field_} ([{lo}, {hi})): a kernel's "
                                         f"scratch space shares no byte with its operands")
    if not outs:
        return
    starts = [o[0] for o in outs]
    flags = in_place_flags(task)
    for k, op in enumerate(task.inputs):
        if op is None or op.region is not Region.ARENA or not op.nbytes:
            continue
        lo, hi = _span(op)
        n = bisect.bisect_left(starts, hi)      # outputs that start before this input ends:
        clash = outs[n - 1] if n and outs[n - 1][1] > lo else None   # disjoint, so the last one
        in_place = k < len(flags) and flags[k]
        if in_place and lo != _in_place_at(task, k):
            c.fail(f"{w}.inputs[{k}]", f"{node} is marked in place (attrs.in_place[{k}]) but lies at "
                                       f"bytes [{lo}, {hi}) of the arena, not at its place in "
                                       f"outputs[0]")
        if clash is not None and not in_place:
            c.fail(f"{w}.inputs[{k}]", f"{node} reads bytes [{lo}, {hi}) of the arena, which "
                                       f"outputs[{clash[2]}] writes ([{clash[0]}, {clash[1]})): "
                                       f"only an op run in place may write over its input")

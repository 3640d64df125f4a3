"""Static sink lowering: per-stream task lists, the memory plan and tiling data.

The result is the typed sections of :mod:`aircc.formats` (``tasks``,
``memory_plan``, ``tiling``): every operand of every task is an address (region,
offset, dtype, shape) decided here, so the device walks its task lists with
nothing left to compute.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aircc.formats.alignment import ALIGNMENT, RegionLayout
from aircc.formats.kinds import Impl, Region, TaskKind
from aircc.formats.memory_plan import AliasRecord, BufferRecord, MemoryPlanSection, WeightRecord
from aircc.formats.tasks import (CopyTask, EventTask, JumpTask, KernelTask, Operand, Task,
                                 TasksSection, TilingSection, Workspace)
from aircc.ops import device

from ..ir.graph import Graph, Node
from ..memory.planner import MemoryPlan, workspace_buffer

#: Device tasks by op: the task kind each lowers to.
TASK_KINDS = {device.EVENT_RECORD: TaskKind.EVENT_RECORD, device.EVENT_WAIT: TaskKind.EVENT_WAIT,
              device.LABEL: TaskKind.LABEL, device.GOTO: TaskKind.GOTO,
              device.STREAM_SWITCH: TaskKind.SWITCH,
              device.MEMCPY_H2D: TaskKind.MEMCPY_H2D, device.MEMCPY_D2H: TaskKind.MEMCPY_D2H}


@dataclass
class StaticSections:
    """What the static lowering hands the .om writer."""

    tasks: TasksSection
    memory_plan: MemoryPlanSection
    tiling: TilingSection
    weights: dict[str, np.ndarray]


def plan_weights(graph: Graph, alignment: int = ALIGNMENT) -> tuple[dict[str, int], int]:
    """Offsets of the constants the tasks read, in the weights region.  A constant of
    no bytes (an exporter's ``roi = []``) takes no room and no record: its operands
    point at offset 0 and read nothing."""
    used = [c for c in graph.constants if any(c in n.inputs for n in graph.nodes)]
    layout = RegionLayout(alignment)
    for name in used:
        nbytes = graph.constants[name].nbytes
        if nbytes:
            layout.place(name, nbytes)
    return layout.offsets, layout.end


class _Addresses:
    def __init__(self, graph: Graph, plan: MemoryPlan, weights: dict[str, int]):
        self.graph, self.plan, self.weights = graph, plan, weights

    def operand(self, name: str) -> Operand | None:
        if not name:
            return None
        t = self.graph.types[name]
        if name in self.weights:
            return Operand(Region.WEIGHTS, self.weights[name], t.dtype, tuple(t.shape))
        if name in self.graph.constants:          # a constant of no bytes (plan_weights)
            return Operand(Region.WEIGHTS, 0, t.dtype, tuple(t.shape))
        return Operand(Region.ARENA, self.plan.offset(name), t.dtype, tuple(t.shape))


def _task(node: Node, k: int, at: _Addresses, plan: MemoryPlan, tiling: list[dict]) -> Task:
    kind = TASK_KINDS.get(node.op) if node.domain == device.DOMAIN else None
    if kind in (TaskKind.EVENT_RECORD, TaskKind.EVENT_WAIT):
        return EventTask(k, kind, node.attrs["event"])
    if kind in (TaskKind.LABEL, TaskKind.GOTO):
        return JumpTask(k, kind, node.attrs["label"])
    if kind is TaskKind.SWITCH:
        return JumpTask(k, kind, node.attrs["label"], at.operand(node.inputs[0]))
    if kind is TaskKind.MEMCPY_H2D:
        return CopyTask(k, kind, node.attrs["binding"], at.operand(node.outputs[0]))
    if kind is TaskKind.MEMCPY_D2H:
        return CopyTask(k, kind, node.attrs["binding"], at.operand(node.inputs[0]))
    ws = node.meta.get("workspace", 0)
    tiling.append(node.meta.get("tiling", {}))
    attrs = ({**node.attrs, "in_place": plan.in_place[node.name]}
             if node.name in plan.in_place else node.attrs)
    return KernelTask(k, node.op, node.domain, node.version, node.name,
                      Impl.FALLBACK if node.on_fallback else Impl.NATIVE,
                      [at.operand(i) for i in node.inputs], [at.operand(o) for o in node.outputs],
                      attrs, len(tiling) - 1,
                      Workspace(Region.ARENA, plan.buffers[workspace_buffer(node.name)].offset, ws)
                      if ws else None)


def lower_static(graph: Graph, plan: MemoryPlan) -> StaticSections:
    """Sections ``tasks``, ``memory_plan`` and ``tiling``, and the weights to store."""
    weights, weights_bytes = plan_weights(graph)
    at = _Addresses(graph, plan, weights)
    nstreams = graph.meta.get("streams", 1)
    lists: list[list[Task]] = [[] for _ in range(nstreams)]
    tiling: list[dict] = []
    for k, node in enumerate(graph.nodes):
        lists[node.meta["stream"]].append(_task(node, k, at, plan, tiling))
    tasks = TasksSection(nstreams, graph.meta.get("events", 0), lists, len(graph.nodes))
    memory_plan = MemoryPlanSection(
        plan.arena_bytes, plan.lower_bound_bytes, plan.no_reuse_bytes, weights_bytes,
        plan.alignment, plan.strategy,
        [BufferRecord(b.name, b.offset, b.size, b.writer, b.last, tuple(sorted(set(b.readers))),
                      tuple(b.all_writers))
         for b in sorted(plan.buffers.values(), key=lambda b: (b.writer, b.name))],
        [AliasRecord(a.name, a.of, plan.offset(a.name)) for a in plan.aliases.values()],
        [WeightRecord(n, off, int(graph.constants[n].nbytes)) for n, off in weights.items()])
    return StaticSections(tasks, memory_plan, TilingSection(tiling),
                          {n: graph.constants[n] for n in weights})

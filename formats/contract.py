"""The sections of a model together: which a mode needs, each one typed, and the checks
between them.

``parse_sections`` is what the writer runs before it writes a model and the reader
after it reads one, so a compiler cannot produce a file the reader rejects.  On
top of each section's own checks it holds every static task to the memory its
model owns: each operand lies inside the arena or the weights region of its own
plan, each workspace inside the arena, no kernel's outputs, workspace and inputs share
bytes but where the op runs in place (:mod:`.task_operands`), each tiling index names an
entry, each copy serves an existing input or output of its shape and dtype, every output
is copied to the host, each weight the
plan places exists with the size it says, no two weights share bytes, and every weight
a task reads lies in bytes a weight is written to (:mod:`.weight_placement`).  A
dynamic model's execute graph names only the model's inputs and outputs.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from aircc.errors import ModelFormatError

from .checks import Checker, describe, is_int
from .exec_graph import ExecGraphSection, body_inputs
from .gears import GearsSection
from .host_order import check_host_order, copy_kind
from .kinds import HostKernelKind as K
from .kinds import Region, TaskKind
from .memory_plan import MemoryPlanSection
from .model_section import MODES, IOSpec, ModelSection
from .section_limits import PLAN_SLACK, task_counts
from .task_operands import check_task_operands
from .task_order import check_jumps, check_waits
from .tasks import CopyTask, KernelTask, TasksSection, TilingSection
from .weight_placement import check_weight_records, check_weight_reads

#: Revision of the payload schemas; bumped whenever a payload's shape changes.
SCHEMA_VERSION = 2

#: Sections a user puts in ``OmFile.sections`` (weights/weight_table belong to the container).
SECTION_NAMES = ("model", "tasks", "memory_plan", "tiling", "exec_graph", "gears")

#: Sections each mode must have (the container always adds weights + weight_table).
REQUIRED_SECTIONS: dict[str, tuple[str, ...]] = {
    "static": ("model", "tasks", "memory_plan", "tiling"),
    "dynamic": ("model", "exec_graph", "tiling"),
}

#: Each section's type: its dataclass, whose ``parse(payload)`` reads it strictly.
SECTION_TYPES: dict[str, type] = {
    "model": ModelSection, "tasks": TasksSection, "memory_plan": MemoryPlanSection,
    "tiling": TilingSection, "exec_graph": ExecGraphSection, "gears": GearsSection,
}

PARSERS: dict[str, Callable[[Any], Any]] = {name: t.parse for name, t in SECTION_TYPES.items()}


@dataclass
class StaticPlan:
    """One static plan: the model's own, or one gear's."""

    batch: int | None
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    tasks: TasksSection
    memory_plan: MemoryPlanSection
    tiling: TilingSection


@dataclass
class ModelContract:
    """Every section of a model, typed and checked against each other."""

    mode: str
    model: ModelSection
    tasks: TasksSection | None = None
    memory_plan: MemoryPlanSection | None = None
    tiling: TilingSection | None = None
    exec_graph: ExecGraphSection | None = None
    gears: GearsSection | None = None

    def static_plans(self) -> list[StaticPlan]:
        """The plans a static model runs: one per gear, else its own."""
        if self.gears is not None:
            return [StaticPlan(p.batch, p.inputs, p.outputs, p.tasks, p.memory_plan, p.tiling)
                    for p in self.gears.plans]
        return [StaticPlan(None, self.model.inputs, self.model.outputs, self.tasks,  # type: ignore[arg-type]
                           self.memory_plan, self.tiling)]                         # type: ignore[arg-type]


def validate_section(name: str, payload: Any) -> Any:
    """One section payload, typed; ModelFormatError if it is malformed or unknown."""
    parse = PARSERS.get(name)
    if parse is None:
        hint = " (weights go in OmFile.weights)" if name in ("weights", "weight_table") else ""
        raise ModelFormatError(f"unknown section '{name}'{hint}; "
                               f"known sections: {', '.join(SECTION_NAMES)}")
    return parse(payload)


def missing_sections(mode: str, names: Any) -> list[str]:
    """Required sections of ``mode`` not among ``names``, in canonical order."""
    present = set(names)
    return [n for n in REQUIRED_SECTIONS[mode] if n not in present]


def parse_sections(mode: str, sections: Mapping[str, Any],
                   weights: Mapping[str, np.ndarray] | None = None) -> ModelContract:
    """Every section of a ``mode`` model, typed and checked (see the module doc);
    ``weights``: the stored weights, by name."""
    if mode not in MODES:
        raise ModelFormatError(f"mode must be 'static' or 'dynamic', got {mode!r}")
    for name in sections:
        if name not in PARSERS:
            validate_section(name, None)  # raises 'unknown section'
    missing = missing_sections(mode, sections)
    if missing:
        raise ModelFormatError(f"missing section '{missing[0]}' (required for {mode} models)")
    typed = {name: MemoryPlanSection.parse(payload, max_records=task_counts(sections.get("tasks"))[0]
                                           + PLAN_SLACK) if name == "memory_plan"
             else validate_section(name, payload) for name, payload in sections.items()}
    contract = ModelContract(mode, **typed)
    if contract.model.mode != mode:
        raise ModelFormatError(f"mode is '{mode}' but section 'model' has mode "
                               f"'{contract.model.mode}'")
    if mode == "static":
        if contract.gears is not None:
            check_gears(contract)
        for k, plan in enumerate(contract.static_plans()):
            section, prefix = ("gears", f"plans[{k}].") if contract.gears else ("tasks", "")
            check_static_plan(plan, section, prefix, weights)
    else:
        check_exec_graph(contract, weights)
    return contract


def check_gears(contract: ModelContract) -> None:
    """Each gear's plan has the model's inputs and outputs, and batches at dim 0 of the one
    or more distinct inputs ``batch_inputs`` names."""
    gears, c = contract.gears, Checker("gears")
    names = [io.name for io in contract.model.inputs]
    batch = gears.batch_inputs                                       # type: ignore[union-attr]
    if not batch or len(set(batch)) != len(batch):
        c.fail("batch_inputs", f"must name one or more distinct inputs of the model, got {batch}")
    for i, name in enumerate(batch):
        if name not in names:
            c.fail(f"batch_inputs[{i}]", f"is {name!r}, which is not an input of the model ({names})")
    for k, plan in enumerate(gears.plans):                           # type: ignore[union-attr]
        for key, ios in (("inputs", contract.model.inputs), ("outputs", contract.model.outputs)):
            have, want = [io.name for io in getattr(plan, key)], [io.name for io in ios]
            if have != want:
                c.fail(f"plans[{k}].{key}", f"are {have}, but the model's are {want}")
        for j, io in enumerate(plan.inputs):
            if io.name in batch and (not io.shape or io.shape[0] != plan.batch):
                c.fail(f"plans[{k}].inputs[{j}].shape", f"is {list(io.shape or ())}, but input "
                                                        f"'{io.name}' has the gear's batch "
                                                        f"{plan.batch} at dim 0")


def check_static_plan(plan: StaticPlan, section: str, prefix: str,
                      weights: Mapping[str, np.ndarray] | None) -> None:
    """Hold every task of ``plan`` to the memory its model owns (see the module doc)."""
    mp = plan.memory_plan
    limits = {Region.ARENA: mp.arena_bytes, Region.WEIGHTS: mp.weights_bytes}
    c = Checker(section)
    order = Checker(section, f"{prefix}tasks" if prefix else "")
    check_jumps(plan.tasks, order)
    check_waits(plan.tasks, order)
    for s, tl in enumerate(plan.tasks.lists):
        for i, task in enumerate(tl):
            w = f"{prefix}{'tasks.' if prefix else ''}lists[{s}][{i}]"
            label = f" (node '{task.node}')" if isinstance(task, KernelTask) else ""
            for field_, op in task.operands():
                end = op.offset + op.nbytes
                if end > limits[op.region]:
                    c.fail(f"{w}.{field_}", f"{label.strip()} points to bytes [{op.offset}, {end}) "
                                            f"of the {op.region.value}, which has "
                                            f"{limits[op.region]} bytes")
            if isinstance(task, KernelTask):
                if task.tiling >= len(plan.tiling.entries):
                    c.fail(f"{w}.tiling", f"{label.strip()} is entry {task.tiling}, but the tiling "
                                          f"section has {len(plan.tiling.entries)} entries")
                ws = task.workspace
                if ws is not None and (ws.region is not Region.ARENA or ws.offset + ws.size > mp.arena_bytes):
                    c.fail(f"{w}.workspace", f"{label.strip()} bytes [{ws.offset}, {ws.offset + ws.size}) "
                                             f"of the {ws.region.value} are not inside the arena "
                                             f"({mp.arena_bytes} bytes)")
            elif isinstance(task, CopyTask):
                ios = plan.inputs if task.kind is TaskKind.MEMCPY_H2D else plan.outputs
                what = "input" if task.kind is TaskKind.MEMCPY_H2D else "output"
                if task.binding >= len(ios):
                    c.fail(f"{w}.binding", f"is {what} {task.binding}, but the model has "
                                           f"{len(ios)} {what}s")
                io = ios[task.binding]
                if io.dtype != task.operand.dtype or list(io.shape or ()) != list(task.operand.shape):
                    c.fail(w, f"copies {task.operand.dtype}{list(task.operand.shape)} for {what} "
                              f"'{io.name}', which is {io.dtype}{list(io.shape or ())}")
    copied = {t.binding for tl in plan.tasks.lists for t in tl
              if isinstance(t, CopyTask) and t.kind is TaskKind.MEMCPY_D2H}
    missing = sorted(set(range(len(plan.outputs))) - copied)
    if missing:
        c.fail(f"{prefix}tasks" if prefix else "lists", f"copy no output {missing[0]} "
                                                        f"('{plan.outputs[missing[0]].name}') to the "
                                                        f"host: every output needs a memcpy_d2h task")
    check_task_operands(plan.tasks, c, f"{prefix}tasks." if prefix else "")
    cm = c if prefix else Checker("memory_plan")
    for i, buf in enumerate(mp.buffers):
        for key in ("first_task", "last_task", "readers", "writers"):
            ids = getattr(buf, key)
            for j, t in enumerate(ids if isinstance(ids, tuple) else (ids,)):
                if not 0 <= t < plan.tasks.count:
                    at = f"[{j}]" if isinstance(ids, tuple) else ""
                    cm.fail(f"{prefix}memory_plan.buffers[{i}].{key}{at}" if prefix else
                            f"buffers[{i}].{key}{at}", f"('{buf.name}') is task {t}, but the "
                                                       f"tasks are 0 to {plan.tasks.count - 1}")
    spans = check_weight_records(mp, weights, cm, f"{prefix}memory_plan." if prefix else "")
    check_weight_reads(plan.tasks, spans, c, f"{prefix}tasks." if prefix else "")


def check_exec_graph(contract: ModelContract, weights: Mapping[str, np.ndarray] | None = None) -> None:
    """The execute graph's inputs and outputs are the model's, of the types it declares;
    every value a node names is typed (or a stored weight), and has one writer, which neither
    reads it nor writes a value given to the graph; copy nodes serve existing
    bindings, each output copied out once by the main body; and its host kernels come in an
    order the runtime can follow (:mod:`.host_order`)."""
    eg, model = contract.exec_graph, contract.model
    c = Checker("exec_graph")
    stored = set(weights or ())
    for key, ios in (("inputs", model.inputs), ("outputs", model.outputs)):
        names = [io.name for io in ios]
        if getattr(eg, key) != names:
            c.fail(key, f"are {getattr(eg, key)}, but section 'model' says {names}")
        for io in ios:
            t = eg.values.get(io.name)
            if t is None or t.dtype != io.dtype or t.shape != io.shape:
                have = "is not typed" if t is None else f"is {t.dtype}{list(t.shape or ())}"
                c.fail(f"values[{io.name!r}]", f"{have}, but section 'model' declares {key[:-1]} "
                                               f"'{io.name}' as {io.dtype}{list(io.shape or ())}")
    given = {*eg.inputs, *stored, *body_inputs(eg.kernels)}
    writer: dict[str, int] = {}
    for i, node in enumerate(eg.nodes):
        for key in ("inputs", "outputs"):
            for j, v in enumerate(getattr(node, key)):
                if v and v not in eg.values and v not in stored:
                    c.fail(f"nodes[{i}].{key}[{j}]", f"names value {v!r}, which the section does "
                                                     f"not type and the model does not store")
        for j, v in enumerate(node.outputs):
            if not v:
                continue
            if v in node.inputs or v in given or v in writer:
                why = ("is also its input" if v in node.inputs else f"node {writer[v]} writes too"
                       if v in writer else "is given (a model input, a weight or a body's input)")
                c.fail(f"nodes[{i}].outputs[{j}]", f"of node '{node.name}' is value {v!r}, which "
                                                   f"{why}: each value has one writer")
            writer[v] = i
        copy = copy_kind(node)
        if copy is not None:
            ios, what = (model.inputs, "input") if copy is K.MEMCPY_H2D else (model.outputs, "output")
            b = node.attrs.get("binding")
            if (b is not None or copy is K.MEMCPY_D2H) and not (is_int(b) and 0 <= b < len(ios)):
                c.fail(f"nodes[{i}].attrs.binding", f"of {node.op} node '{node.name}' must be an "
                                                    f"{what} index in [0, {len(ios)}), got {describe(b)}")
    check_host_order(eg, c, stored)
    copied = [eg.nodes[k.node].attrs.get("binding") for k in eg.kernels if k.kind is K.MEMCPY_D2H]
    if sorted(copied) != list(range(len(model.outputs))):      # ints: checked above
        c.fail("kernels", f"copy out outputs {copied}: each output of the model is copied out by "
                          f"one memcpy_d2h kernel of the main body ({len(model.outputs)} outputs)")

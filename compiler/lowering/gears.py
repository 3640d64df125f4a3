"""Gears: one static plan per batch size, in one .om (``--dynamic-batch 1,2,4,8``).

As with an offline NPU compiler's dynamic batch, the batch dim is dim 0 of
every input whose dim 0 is symbolic (or given as -1 in ``--input-shape``);
every other dim must be fixed.  The model is imported once; each gear runs
:data:`~..stages.GEAR_STAGES` (the optimisation pipeline, then the static stages)
on its own copy of the imported graph, with the same options but its own input
shapes (``dataclasses.replace``), so it gets the streams the static build of that
batch gets; the gears share one weights region (a weight that differs between
gears is stored once per gear) and, at run time, one arena as large as the largest.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from typing import Callable

import numpy as np

from aircc.errors import CompileOptionError
from aircc.formats.alignment import RegionLayout
from aircc.formats.gears import MAX_GEARS, MIN_GEARS, GearPlan, GearsSection
from aircc.formats.kinds import Region
from aircc.formats.memory_plan import WeightRecord
from aircc.formats.model_section import IOSpec
from aircc.formats.tasks import CopyTask, KernelTask, Operand

from ..assemble import CompiledModel, finish, io_specs
from ..context import CompileContext, CompileOptions
from ..ir.graph import Graph, TensorType
from ..stages import GEAR_STAGES, IMPORT, Compilation, Sections, planned_stages, run_stages


def _moved(op: Operand | None, remap: dict[int, int]) -> Operand | None:
    if op is None or op.region is not Region.WEIGHTS or not op.nbytes:
        return op
    return dataclasses.replace(op, offset=remap[op.offset])


def _moved_task(task, remap: dict[int, int]):
    if isinstance(task, KernelTask):
        return dataclasses.replace(task, inputs=[_moved(o, remap) for o in task.inputs],
                                   outputs=[_moved(o, remap) for o in task.outputs])
    if isinstance(task, CopyTask):
        return dataclasses.replace(task, operand=_moved(task.operand, remap))
    return task


def merge_weights(gears: list[tuple[GearPlan, dict]]) -> tuple[list[GearPlan], dict[str, np.ndarray], int]:
    """One weights region for all gears: each gear's plan made again with its weight records
    and weight operands moved into it (the stages' own sections are left as they made
    them), the weights by name, and the region's size."""
    merged: dict[str, np.ndarray] = {}
    layout = RegionLayout(gears[0][0].memory_plan.alignment)
    moves = []
    for plan, weights in gears:
        remap: dict[int, int] = {}
        records = []
        for w in plan.memory_plan.weights:
            arr, name = weights[w.name], w.name
            if name in merged and not (merged[name].dtype == arr.dtype and merged[name].shape == arr.shape
                                       and np.array_equal(merged[name], arr)):
                name = f"{name}@batch{plan.batch}"
            if name not in merged:
                merged[name] = arr
                layout.place(name, arr.nbytes)
            remap[w.offset] = layout.offsets[name]
            records.append(WeightRecord(name, layout.offsets[name], w.size))
        moves.append((plan, remap, records))
    plans = [dataclasses.replace(
        plan, tasks=dataclasses.replace(plan.tasks, lists=[[_moved_task(t, remap) for t in tl]
                                                           for tl in plan.tasks.lists]),
        memory_plan=dataclasses.replace(plan.memory_plan, weights=records, weights_bytes=layout.end))
        for plan, remap, records in moves]
    return plans, merged, layout.end


def compile_gears(source, options: CompileOptions,
                  progress: Callable[[str, int], None] | None = None) -> CompiledModel:
    """A static model with one plan per batch size of ``options.dynamic_batch``."""
    sizes = sorted(set(int(b) for b in options.dynamic_batch))
    if not MIN_GEARS <= len(sizes) <= MAX_GEARS or sizes[0] < 1:
        raise CompileOptionError(f"--dynamic-batch needs {MIN_GEARS} to {MAX_GEARS} distinct positive "
                                 f"batch sizes, got {list(options.dynamic_batch)}")
    t0 = time.perf_counter()
    planned = planned_stages("static", len(sizes))
    static = dataclasses.replace(options, mode="static", dynamic_batch=None)
    ctx = CompileContext(static)
    ctx.progress = progress
    imported = run_stages(Compilation(source, ctx), IMPORT, planned)
    inputs = {n: imported.graph.types[n].shape for n in imported.graph.inputs}
    batched = [n for n, s in inputs.items() if s and isinstance(s[0], str)]
    if not batched:
        raise CompileOptionError("--dynamic-batch needs an input whose dim 0 is symbolic "
                                 "(or -1 in --input-shape)")
    gears = []
    for b in sizes:
        ctx = CompileContext(dataclasses.replace(
            static, input_shapes={n: [b if n in batched and k == 0 else d for k, d in enumerate(s)]
                                  for n, s in inputs.items() if s is not None}))
        ctx.progress = progress
        gear = dataclasses.replace(imported, ctx=ctx, graph=gear_graph(imported.graph, batched, b),
                                   facts=dataclasses.replace(imported.facts))
        gears.append(run_stages(gear, GEAR_STAGES, planned))
    plans = [GearPlan(b, io_specs(c.graph, c.graph.inputs), io_specs(c.graph, c.graph.outputs),
                      c.sections.tasks, c.sections.memory_plan, c.sections.tiling)
             for b, c in zip(sizes, gears)]
    plans, weights, weights_bytes = merge_weights([(p, c.weights) for p, c in zip(plans, gears)])
    largest, last = plans[-1], gears[-1]
    for c in (imported, *gears[:-1]):            # the report's timings cover every gear
        for name, seconds in c.ctx.seconds.items():
            last.ctx.seconds[name] = last.ctx.seconds.get(name, 0.0) + seconds
    model = dataclasses.replace(
        last, weights=weights,
        sections=Sections(tasks=largest.tasks, memory_plan=largest.memory_plan,
                          tiling=largest.tiling, gears=GearsSection(batched, sizes, plans)),
        facts=dataclasses.replace(last.facts, gears=sizes, memory=dataclasses.replace(
            last.facts.memory, weights_bytes=weights_bytes,
            arena_bytes=max(p.memory_plan.arena_bytes for p in plans))))
    model_inputs = [IOSpec(i.name, i.dtype, ("batch", *i.shape[1:]) if i.name in batched else i.shape)
                    for i in plans[0].inputs]
    return finish(model, t0, model_inputs, gear_outputs(plans))


def gear_graph(imported: Graph, batched: list[str], batch: int) -> Graph:
    """A copy of the imported graph whose ``batched`` inputs have dim 0 ``batch``.  The copies
    share the weights' arrays: no stage writes a constant's array in place (most are
    read-only views of the model's bytes)."""
    shared: dict[int, object] = {}

    def share(g: Graph) -> None:
        shared.update((id(a), a) for a in g.constants.values())
        for n in g.nodes:
            for r in n.regions:
                share(r)
    share(imported)
    graph = copy.deepcopy(imported, shared)
    for name in batched:
        t = graph.types[name]
        graph.types[name] = TensorType(t.dtype, (batch, *t.shape[1:]))
    return graph


def gear_outputs(plans: list[GearPlan]) -> list[IOSpec]:
    """Outputs whose dim 0 equals the batch size in every gear get the symbol ``batch``."""
    result = []
    for k, o in enumerate(plans[0].outputs):
        shape = tuple(o.shape)
        if shape and all(p.outputs[k].shape[0] == p.batch for p in plans):
            shape = ("batch", *shape[1:])
        result.append(IOSpec(o.name, o.dtype, shape))
    return result

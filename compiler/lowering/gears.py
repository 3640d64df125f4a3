"""Gears: one static plan per batch size, in one .om (``--dynamic-batch 1,2,4,8``).

As with an offline NPU compiler's dynamic batch, the batch dim is dim 0 of
every input whose dim 0 is symbolic (or given as -1 in ``--input-shape``);
every other dim must be fixed.  Each gear is compiled by the static stages with
the same options but its own input shapes (``dataclasses.replace``), so it gets
the streams the static build of that batch gets; the gears share one weights
region (a weight that differs between gears is stored once per gear) and, at
run time, one arena as large as the largest.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from aircc.errors import CompileOptionError
from aircc.formats.gears import MAX_GEARS, MIN_GEARS, GearPlan, GearsSection
from aircc.formats.kinds import Region
from aircc.formats.memory_plan import WeightRecord
from aircc.formats.model_section import IOSpec
from aircc.formats.tasks import CopyTask, KernelTask, Operand

from ..assemble import CompiledModel, finish, io_specs
from ..context import CompileContext, CompileOptions
from ..frontend.onnx_import import import_onnx, load_onnx
from ..stages import FRONT, STATIC_STAGES, Compilation, run_stages


def gear_shapes(graph_inputs: dict[str, tuple], given: dict, batch: int) -> dict[str, list]:
    """Input shapes of the gear for ``batch``."""
    shapes = {}
    for name, shape in graph_inputs.items():
        dims = list(given.get(name, shape))
        if dims and (isinstance(dims[0], str) or dims[0] == -1):
            dims[0] = batch
        shapes[name] = dims
    return shapes


def _moved(op: Operand | None, remap: dict[int, int]) -> Operand | None:
    if op is None or op.region is not Region.WEIGHTS or not op.nbytes:
        return op
    return dataclasses.replace(op, offset=remap[op.offset])


def merge_weights(gears: list[tuple[int, GearPlan, dict]]) -> tuple[dict[str, np.ndarray], int]:
    """One weights table for all gears; rewrites each gear's weight operands to it."""
    merged: dict[str, np.ndarray] = {}
    offsets: dict[str, int] = {}
    end = 0
    for batch, plan, weights in gears:
        remap: dict[int, int] = {}
        mp = plan.memory_plan
        records = []
        for w in mp.weights:
            arr, name = weights[w.name], w.name
            if name in merged and not (merged[name].dtype == arr.dtype and merged[name].shape == arr.shape
                                       and np.array_equal(merged[name], arr)):
                name = f"{name}@batch{batch}"
            if name not in merged:
                merged[name] = arr
                offsets[name] = end
                end += (arr.nbytes + mp.alignment - 1) // mp.alignment * mp.alignment
            remap[w.offset] = offsets[name]
            records.append(WeightRecord(name, offsets[name], w.size))
        mp.weights = records
        for tl in plan.tasks.lists:
            for task in tl:
                if isinstance(task, KernelTask):
                    task.inputs = [_moved(o, remap) for o in task.inputs]
                    task.outputs = [_moved(o, remap) for o in task.outputs]
                elif isinstance(task, CopyTask):
                    task.operand = _moved(task.operand, remap)
    for _, plan, _ in gears:
        plan.memory_plan.weights_bytes = end
    return merged, end


def compile_gears(source, options: CompileOptions,
                  progress: Callable[[str], None] | None = None) -> CompiledModel:
    """A static model with one plan per batch size of ``options.dynamic_batch``."""
    sizes = sorted(set(int(b) for b in options.dynamic_batch))
    if not MIN_GEARS <= len(sizes) <= MAX_GEARS or sizes[0] < 1:
        raise CompileOptionError(f"--dynamic-batch needs {MIN_GEARS} to {MAX_GEARS} distinct positive "
                                 f"batch sizes, got {list(options.dynamic_batch)}")
    t0 = time.perf_counter()
    model = load_onnx(source)
    probe = import_onnx(model)
    inputs = {n: probe.types[n].shape for n in probe.inputs}
    batched = [n for n, s in gear_shapes(inputs, options.input_shapes, -7).items() if s and s[0] == -7]
    if not batched:
        raise CompileOptionError("--dynamic-batch needs an input whose dim 0 is symbolic "
                                 "(or -1 in --input-shape)")
    gears, last, seconds = [], None, {}
    for b in sizes:
        ctx = CompileContext(dataclasses.replace(
            options, mode="static", dynamic_batch=None,
            input_shapes=gear_shapes(inputs, options.input_shapes, b)))
        ctx.seconds = seconds                   # the report's timings cover every gear
        ctx.progress = progress
        c = run_stages(Compilation(model, ctx), FRONT + STATIC_STAGES)
        plan = GearPlan(b, io_specs(c.graph, c.graph.inputs), io_specs(c.graph, c.graph.outputs),
                        c.sections["tasks"], c.sections["memory_plan"], c.sections["tiling"])
        gears.append((b, plan, c.weights))
        last = c
    weights, weights_bytes = merge_weights(gears)
    plans = [p for _, p, _ in gears]
    largest = plans[-1]
    last.sections = {"tasks": largest.tasks, "memory_plan": largest.memory_plan,
                     "tiling": largest.tiling, "gears": GearsSection(batched, sizes, plans)}
    last.weights = weights
    last.facts.update(gears=sizes, weights_bytes=weights_bytes,
                      arena_bytes=max(p.memory_plan.arena_bytes for p in plans))
    first = plans[0]
    model_inputs = [IOSpec(i.name, i.dtype, ("batch", *i.shape[1:]) if i.name in batched else i.shape)
                    for i in first.inputs]
    return finish(last, t0, model_inputs, gear_outputs(plans))


def gear_outputs(plans: list[GearPlan]) -> list[IOSpec]:
    """Outputs whose dim 0 equals the batch size in every gear get the symbol ``batch``."""
    result = []
    for k, o in enumerate(plans[0].outputs):
        shape = tuple(o.shape)
        if shape and all(p.outputs[k].shape[0] == p.batch for p in plans):
            shape = ("batch", *shape[1:])
        result.append(IOSpec(o.name, o.dtype, shape))
    return result

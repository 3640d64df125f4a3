"""The compile driver: ONNX -> IR -> passes -> schedule -> memory plan -> lowering -> .om.

One list of stages per mode is the whole path a model takes through the
compiler: :data:`FRONT` (import, the optimisation pipeline), then
:data:`STATIC_STAGES` or :data:`DYNAMIC_STAGES`.  Each stage hands the next a
plain structure (the IR graph, then the typed sections of :mod:`aircc.formats`);
the :class:`~.context.CompileContext` carries the options, the target, the
statistics and the timings.  Gears (``--dynamic-batch``) run the static stages
once per batch size (:mod:`.lowering.gears`).
"""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from aircc.errors import CompileOptionError
from aircc.formats import OmFile
from aircc.formats.model_section import IOSpec, ModelSection, TargetRecord

from .context import MODES, CompileContext, CompileOptions
from .frontend.onnx_import import import_onnx
from .ir.graph import Graph, is_host_only
from .ir.printer import print_graph
from .ir.verifier import verify
from .lowering.control import expand_control_flow, static_control_flow_problem
from .lowering.dynamic import lower_dynamic
from .lowering.static import StaticSections, lower_static
from .lowering.tiling import compute_tiling
from .memory.planner import MemoryPlan, plan_memory
from .passes.base import declared_stats
from .passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from .schedule.events import insert_events
from .schedule.memcpy import insert_memcpy
from .schedule.placement import place_host_ops, schedule_device_nodes, schedule_regions
from .schedule.streams import assign_streams

PRODUCER = "aircc 0.1.0"

__all__ = ["CompileOptions", "CompileContext", "CompiledModel", "compile_model", "emit_ir",
           "optimize", "choose_mode"]


@dataclass
class Compilation:
    """One compile's state as it moves through the stages."""

    source: object
    ctx: CompileContext
    graph: Graph | None = None
    mode: str = ""
    plan: MemoryPlan | None = None
    sections: dict = field(default_factory=dict)
    """Typed sections by name, for the writer."""
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    """What the lowering reports (arena, host kernels, ...)."""
    kernels: int = 0


Stage = tuple[str, Callable[[Compilation], None]]


def _graph_stage(fn) -> Callable[[Compilation], None]:
    """A stage that rewrites the graph (a pass), verified after it."""
    def run(c: Compilation) -> None:
        c.graph = fn(c.graph, c.ctx)
        verify(c.graph)
    return run


def import_stage(c: Compilation) -> None:
    c.graph = import_onnx(c.source, c.ctx.options.input_shapes)
    c.facts["imported_nodes"] = len(c.graph.nodes)


def passes_stage(c: Compilation) -> None:
    names = c.ctx.options.passes
    c.graph = run_pipeline(c.graph, DEFAULT_PIPELINE if names is None else names, c.ctx)
    c.mode = choose_mode(c.graph, c.ctx.options.mode)
    c.kernels = len(c.graph.nodes)


def plan_stage(c: Compilation) -> None:
    c.plan = plan_memory(c.graph)


def lower_static_stage(c: Compilation) -> None:
    s: StaticSections = lower_static(c.graph, c.plan)
    plan = c.plan
    c.sections.update(tasks=s.tasks, memory_plan=s.memory_plan, tiling=s.tiling)
    c.weights = s.weights
    c.facts.update(arena_bytes=plan.arena_bytes, lower_bound_bytes=plan.lower_bound_bytes,
                   no_reuse_bytes=plan.no_reuse_bytes, memory_strategy=plan.strategy,
                   weights_bytes=s.memory_plan.weights_bytes,
                   concats_in_place=sum(n.op == "Concat" for n in c.graph.nodes if n.name in plan.in_place),
                   reshapes_in_place=sum(n.op != "Concat" for n in c.graph.nodes if n.name in plan.in_place),
                   values_in_place=len(plan.aliases))


def lower_dynamic_stage(c: Compilation) -> None:
    exec_graph, c.weights = lower_dynamic(c.graph)
    c.sections.update(exec_graph=exec_graph)
    c.facts.update(host_ops=exec_graph.host_ops, host_kernels=len(exec_graph.kernels))


FRONT: list[Stage] = [("import", import_stage), ("passes", passes_stage)]
STATIC_STAGES: list[Stage] = [
    ("insert-memcpy", _graph_stage(insert_memcpy)),
    ("assign-streams", _graph_stage(assign_streams)),
    ("insert-events", _graph_stage(insert_events)),
    ("expand-control-flow", _graph_stage(expand_control_flow)),
    ("tiling", _graph_stage(compute_tiling)),
    ("plan-memory", plan_stage),
    ("lower-static", lower_static_stage),
]
DYNAMIC_STAGES: list[Stage] = [
    ("insert-memcpy", _graph_stage(insert_memcpy)),
    ("place-host-ops", _graph_stage(place_host_ops)),
    ("schedule-device-nodes", _graph_stage(schedule_device_nodes)),
    ("schedule-regions", _graph_stage(schedule_regions)),
    ("lower-dynamic", lower_dynamic_stage),
]
BACK = {"static": STATIC_STAGES, "dynamic": DYNAMIC_STAGES}


def run_stages(c: Compilation, stages: list[Stage]) -> Compilation:
    for name, stage in stages:
        with c.ctx.timed(name):
            stage(c)
    return c


@dataclass
class CompiledModel:
    """What a compile gives: the optimised graph, the .om in memory, and the report."""

    graph: Graph
    om: OmFile
    report: dict

    def save(self, path) -> int:
        from aircc.formats import save_om
        return save_om(self.om, path)


def choose_mode(graph: Graph, requested: str) -> str:
    """``auto``: dynamic when an input still has a symbolic dim, else static."""
    if requested not in MODES:
        raise CompileOptionError(f"--mode must be one of {', '.join(MODES)}, got {requested!r}")
    if requested != "auto":
        return requested
    every_value = all(t is not None and t.is_static and not is_host_only(t.dtype)
                      for g in _regions(graph) for t in g.types.values())
    if every_value and static_control_flow_problem(graph) is None:
        return "static"
    return "dynamic"


def _regions(graph: Graph):
    yield graph
    for n in graph.nodes:
        for r in n.regions:
            yield from _regions(r)


def io_specs(graph: Graph, names: list[str]) -> list[IOSpec]:
    """The inputs or outputs of ``graph`` as the model section lists them."""
    return [IOSpec(n, graph.types[n].dtype,
                   None if graph.types[n].shape is None else tuple(graph.types[n].shape))
            for n in names]


def compile_report(c: Compilation, t0: float) -> dict:
    """What the compile did: every declared pass statistic, the schedule, the memory plan,
    the timings."""
    ctx = c.ctx
    return {
        "mode": c.mode, "target": ctx.target.name,
        "imported_nodes": c.facts.get("imported_nodes"), "kernels": c.kernels,
        **{stat: ctx.stats.get(stat, 0) for stat in declared_stats()},
        "streams": c.graph.meta.get("streams", 1), "events": c.graph.meta.get("events", 0),
        **{k: v for k, v in c.facts.items() if k != "imported_nodes"},
        "seconds": {k: round(v, 4) for k, v in ctx.seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 4),
    }


def finish(c: Compilation, t0: float, inputs: list[IOSpec], outputs: list[IOSpec]) -> CompiledModel:
    """The model section and the .om, from a compilation that ran its stages."""
    report = compile_report(c, t0)
    target = c.ctx.target
    model = ModelSection(
        name=c.graph.meta.get("model_name", "model"), mode=c.mode, producer=PRODUCER,
        opsets={k or "ai.onnx": v for k, v in c.graph.opsets.items()},
        inputs=inputs, outputs=outputs,
        target=TargetRecord(target.name, target.backend, target.vector_class),
        source_producer=c.graph.meta.get("producer", ""), compile_report=report)
    payloads = {"model": model.to_payload(),
                **{name: s.to_payload() for name, s in c.sections.items()}}
    if c.mode == "dynamic":
        payloads["tiling"] = {"entries": []}
    om = OmFile(mode=c.mode, sections=payloads, weights=c.weights)
    return CompiledModel(graph=c.graph, om=om, report=report)


@contextmanager
def cyclic_gc_paused():
    """Pause CPython's cyclic garbage collector while compiling.

    The compiler makes many small objects (nodes, types, dicts) and hardly any
    reference cycles, and keeps most of them until it finishes.  The collector runs
    after every so many allocations and its older generations walk the whole live
    heap, so with it on compile time grows faster than the graph (20,000 to 40,000
    synthetic nodes: 2.4x the time) and with it paused in proportion (2.2x).
    Reference counting still frees everything that is dropped; cycles made meanwhile
    are collected once the collector is back.  A collector the caller had turned off
    stays off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def compile_model(source, options: CompileOptions | None = None) -> CompiledModel:
    """Compile an ONNX model (path, bytes or ModelProto) into an in-memory .om."""
    options = options if options is not None else CompileOptions()
    with cyclic_gc_paused():
        if options.dynamic_batch:
            from .lowering.gears import compile_gears
            return compile_gears(source, options)
        t0 = time.perf_counter()
        c = run_stages(Compilation(source, CompileContext(options)), FRONT)
        run_stages(c, BACK[c.mode])
        return finish(c, t0, io_specs(c.graph, c.graph.inputs), io_specs(c.graph, c.graph.outputs))


def optimize(source, options: CompileOptions | None = None) -> Graph:
    """Import and run the optimisation pipeline (the IR that ``--emit ir`` prints)."""
    c = run_stages(Compilation(source, CompileContext(options)), FRONT)
    return c.graph


def emit_ir(source, options: CompileOptions | None = None) -> str:
    """The optimised IR as text."""
    return print_graph(optimize(source, options))

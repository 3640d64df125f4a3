"""The stages of a compile, in order: one list per mode.

:data:`FRONT` (import, the optimisation pipeline, the choice of mode) runs for every
model; then :data:`STATIC_STAGES` or :data:`DYNAMIC_STAGES`.  A stage takes the
:class:`Compilation` (the graph so far, the context, what the lowering produced)
and hands the next one a plain structure: the IR graph, then the typed sections of
:mod:`aircc.formats`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from aircc.errors import CompileOptionError
from aircc.formats.checks import PRIORITY_RANGE
from aircc.formats.exec_graph import ExecGraphSection
from aircc.formats.gears import GearsSection
from aircc.formats.memory_plan import MemoryPlanSection
from aircc.formats.tasks import TasksSection, TilingSection
from aircc.log import get as get_log

from .context import MODES, CompileContext
from .frontend.onnx_import import import_onnx
from .ir.graph import Graph, is_host_only
from .ir.static_shapes import dynamic_shape_origin
from .ir.verifier import verify
from .lowering.control import expand_control_flow, static_control_flow_problem
from .lowering.dynamic import lower_dynamic
from .lowering.static import StaticSections, lower_static
from .lowering.tiling import compute_tiling
from .memory.planner import MemoryPlan, plan_memory
from .passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from .schedule.events import insert_events
from .schedule.memcpy import insert_memcpy
from .schedule.placement import place_host_ops, schedule_device_nodes, schedule_regions
from .schedule.streams import assign_streams


@dataclass
class Sections:
    """The typed sections the lowering made for the writer, each named as in the .om;
    None: not in this model."""

    tasks: TasksSection | None = None
    memory_plan: MemoryPlanSection | None = None
    tiling: TilingSection | None = None
    exec_graph: ExecGraphSection | None = None
    gears: GearsSection | None = None

    def made(self) -> dict[str, object]:
        """The sections made, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class MemoryFacts:
    """What the static lowering reports of its memory plan."""

    arena_bytes: int
    lower_bound_bytes: int
    """The most bytes live at any one time: no plan of these buffers needs less arena."""
    no_reuse_bytes: int
    """The arena if no buffer shared memory with another."""
    memory_strategy: str
    """The placement order that gave the smallest arena."""
    weights_bytes: int
    concats_in_place: int
    reshapes_in_place: int
    values_in_place: int


@dataclass(frozen=True)
class HostFacts:
    """What the dynamic lowering reports of its execute graph."""

    host_ops: int
    """Nodes placed on the host."""
    host_kernels: int


@dataclass
class Facts:
    """What the stages report of a compile, beyond the passes' statistics."""

    imported_nodes: int = 0
    kernels: int = 0
    """Nodes after the optimisation pipeline."""
    memory: MemoryFacts | None = None
    """The static lowering's (None in dynamic mode)."""
    host: HostFacts | None = None
    """The dynamic lowering's (None in static mode)."""
    gears: list[int] | None = None
    """The batch sizes of a model with gears."""


@dataclass
class Compilation:
    """One compile's state as it moves through the stages."""

    source: object
    ctx: CompileContext
    graph: Graph | None = None
    mode: str = ""
    plan: MemoryPlan | None = None
    sections: Sections = field(default_factory=Sections)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    facts: Facts = field(default_factory=Facts)


Stage = tuple[str, Callable[[Compilation], None]]


def _graph_stage(fn) -> Callable[[Compilation], None]:
    """A stage that rewrites the graph (a pass), verified after it."""
    def run(c: Compilation) -> None:
        c.graph = fn(c.graph, c.ctx)
        verify(c.graph)
    return run


def import_stage(c: Compilation) -> None:
    c.graph = import_onnx(c.source, c.ctx.options.input_shapes)
    c.facts.imported_nodes = len(c.graph.nodes)


def passes_stage(c: Compilation) -> None:
    names = c.ctx.options.passes
    c.graph = run_pipeline(c.graph, DEFAULT_PIPELINE if names is None else names, c.ctx)
    c.mode = choose_mode(c.graph, c.ctx.options.mode)
    c.facts.kernels = len(c.graph.nodes)


def plan_stage(c: Compilation) -> None:
    c.plan = plan_memory(c.graph)


def stream_priorities(c: Compilation, streams: int) -> list[int]:
    """The ``stream_priorities`` option as one priority per stream of the compiled model
    (CompileOptionError for a stream it does not have or a priority out of range)."""
    given = dict(c.ctx.options.stream_priorities or {})
    lo, hi = PRIORITY_RANGE
    for s, p in given.items():
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < streams:
            raise CompileOptionError(f"--stream-priority: the model has streams 0-{streams - 1}, "
                                     f"not {s!r} (see the compile report's streams)")
        if isinstance(p, bool) or not isinstance(p, int) or not lo <= p <= hi:
            raise CompileOptionError(f"--stream-priority: stream {s}'s priority must be an int "
                                     f"in [{lo}, {hi}] (higher runs first), got {p!r}")
    return [given.get(s, 0) for s in range(streams)]


def lower_static_stage(c: Compilation) -> None:
    s: StaticSections = lower_static(c.graph, c.plan)
    s.tasks.priorities = stream_priorities(c, s.tasks.streams)
    plan = c.plan
    c.sections = Sections(tasks=s.tasks, memory_plan=s.memory_plan, tiling=s.tiling)
    c.weights = s.weights
    in_place = [n.op for n in c.graph.nodes if n.name in plan.in_place]
    c.facts.memory = MemoryFacts(
        arena_bytes=plan.arena_bytes, lower_bound_bytes=plan.lower_bound_bytes,
        no_reuse_bytes=plan.no_reuse_bytes, memory_strategy=plan.strategy,
        weights_bytes=s.memory_plan.weights_bytes, concats_in_place=in_place.count("Concat"),
        reshapes_in_place=len(in_place) - in_place.count("Concat"), values_in_place=len(plan.aliases))


def lower_dynamic_stage(c: Compilation) -> None:
    exec_graph, c.weights = lower_dynamic(c.graph)
    exec_graph.priorities = stream_priorities(c, exec_graph.streams)
    c.sections = Sections(exec_graph=exec_graph, tiling=TilingSection([]))  # tiled at run time
    c.facts.host = HostFacts(host_ops=exec_graph.host_ops, host_kernels=len(exec_graph.kernels))


IMPORT: list[Stage] = [("import", import_stage)]
FRONT: list[Stage] = IMPORT + [("passes", passes_stage)]
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
GEAR_STAGES: list[Stage] = FRONT[len(IMPORT):] + STATIC_STAGES
"""What each gear runs on its copy of the imported graph (:mod:`.lowering.gears`)."""


def planned_stages(mode: str, gears: int = 0) -> int:
    """How many stages a compile in ``mode`` runs; for ``auto``, before the mode is chosen,
    as many as the longer of the modes.  ``gears``: a compile with that many gears."""
    if gears:
        return len(IMPORT) + gears * len(GEAR_STAGES)
    return len(FRONT) + (len(BACK[mode]) if mode in BACK else max(len(s) for s in BACK.values()))


def choose_mode(graph: Graph, requested: str) -> str:
    """``auto``: dynamic when an input still has a symbolic dim, else static."""
    if requested not in MODES:
        raise CompileOptionError(f"--mode must be one of {', '.join(MODES)}, got {requested!r}")
    if requested == "static":
        host_only = sorted({f"{name} ({t.dtype})" for g in _regions(graph)
                            for name, t in g.types.items() if t is not None and is_host_only(t.dtype)})
        if host_only:
            raise CompileOptionError(
                f"--mode static: a static model holds device tensors only, and "
                f"{', '.join(host_only[:3])}{' ...' if len(host_only) > 3 else ''} "
                f"{'is' if len(host_only) == 1 else 'are'} not; compile with --mode dynamic or auto")
        problem = static_control_flow_problem(graph)
        if problem:
            raise CompileOptionError(f"static mode cannot lower this model: {problem}; compile it "
                                     f"with --mode dynamic")
        origin = dynamic_shape_origin(graph)
        if origin:
            raise CompileOptionError(f"--mode static needs every shape known at compile time, but "
                                     f"{origin}" + ("" if "--input-shape" in origin else
                                                    "; compile with --mode dynamic or auto"))
    if requested != "auto":
        return requested
    every_value = all(t is not None and t.is_static and not is_host_only(t.dtype)
                      for g in _regions(graph) for t in g.types.values())
    if every_value and static_control_flow_problem(graph) is None:
        return "static"
    return "dynamic"


def _regions(graph: Graph):
    """``graph`` and every body that can run (``Node.live_regions``)."""
    yield graph
    for n in graph.nodes:
        for r in n.live_regions:
            yield from _regions(r)



def run_stages(c: Compilation, stages: list[Stage], planned: int | None = None) -> Compilation:
    """Run ``stages`` in order, each timed in the context (and logged, and told to the
    context's ``progress`` callback when it has one, with the number of stages the whole
    compile runs: ``planned``, else as :func:`planned_stages` knows it then)."""
    log = get_log("compile")
    for name, stage in stages:
        with c.ctx.timed(name):
            stage(c)
        log.info("%s: %.1f ms", name, 1e3 * c.ctx.seconds[name])
        if c.ctx.progress is not None:
            c.ctx.progress(name, planned or planned_stages(c.mode or c.ctx.options.mode))
    return c

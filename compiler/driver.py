"""The compile driver: ONNX -> IR -> passes -> streams/events -> memory -> .om.

Each stage hands the next a plain structure; the stage list below is the
whole path a model takes through the compiler.
"""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from aircc.errors import CompileOptionError
from aircc.formats import OmFile

from .frontend.onnx_import import import_onnx
from .ir.graph import Dim, Graph, is_host_only
from .ir.printer import print_graph
from .ir.verifier import verify
from .lowering.control import expand_control_flow, static_control_flow_problem
from .lowering.dynamic import lower_dynamic
from .lowering.static import lower_static
from .lowering.tiling import compute_tiling
from .memory.planner import plan_memory
from .passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from .schedule.events import insert_events
from .schedule.memcpy import insert_memcpy
from .schedule.placement import place_host_ops, schedule_device_nodes, schedule_regions
from .schedule.streams import assign_streams

MODES = ("static", "dynamic", "auto")

PRODUCER = "aircc 0.1.0"


@dataclass
class CompileOptions:
    """What ``aircc compile`` lets a user choose."""

    streams: int | None = None
    """Stream cap; None = the default cap, 1 = a single stream."""
    input_shapes: Mapping[str, Sequence[Dim]] = field(default_factory=dict)
    mode: str = "auto"
    """``static``, ``dynamic``, or ``auto`` (dynamic when an input has a symbolic dim)."""
    min_branch_bytes: int | None = None
    """A branch opens its own stream only if it writes at least this many bytes (None: 128 KiB)."""
    split_matrix_branches: bool = False
    """Let branches led by a Conv or MatMul open streams too (by default they stay with a
    predecessor: the matrix engine spans every core, so they would only queue for it)."""
    dynamic_batch: list[int] | None = None
    """Gears: one static plan per batch size, in one .om."""
    passes: list[str] | None = None
    """Optimisation pipeline by pass names; None = the default pipeline."""


@dataclass
class CompiledModel:
    graph: Graph
    om: OmFile
    report: dict

    def save(self, path) -> int:
        from aircc.formats import save_om
        return save_om(self.om, path)


def optimize(source, options: CompileOptions) -> Graph:
    """Import and run the optimisation pipeline (the IR that ``--emit ir`` prints)."""
    graph = import_onnx(source, options.input_shapes)
    graph.meta["imported_nodes"] = len(graph.nodes)
    graph.meta["min_branch_bytes"] = options.min_branch_bytes
    graph.meta["split_matrix_branches"] = options.split_matrix_branches
    return run_pipeline(graph, options.passes if options.passes is not None else DEFAULT_PIPELINE)


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


def _io(graph: Graph, names: list[str]) -> list[dict]:
    return [{"name": n, "dtype": graph.types[n].dtype,
             "shape": None if graph.types[n].shape is None else list(graph.types[n].shape)}
            for n in names]


def _stage(seconds: dict, name: str, fn, graph: Graph) -> Graph:
    t = time.perf_counter()
    graph = fn(graph)
    verify(graph)
    seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t
    return graph


def _lower_static(graph: Graph, options: CompileOptions, seconds: dict) -> tuple[dict, dict, dict]:
    for name, fn in (("insert-memcpy", insert_memcpy),
                     ("assign-streams", lambda g: assign_streams(g, options.streams)),
                     ("insert-events", insert_events),
                     ("expand-control-flow", lambda g: expand_control_flow(g, options.streams)),
                     ("tiling", compute_tiling)):
        graph = _stage(seconds, name, fn, graph)
    t = time.perf_counter()
    plan = plan_memory(graph)
    sections, weights = lower_static(graph, plan)
    seconds["plan+lower"] = time.perf_counter() - t
    facts = {"arena_bytes": plan.arena_bytes, "lower_bound_bytes": plan.lower_bound_bytes,
             "no_reuse_bytes": plan.no_reuse_bytes, "memory_strategy": plan.strategy,
             "weights_bytes": sections["memory_plan"]["weights_bytes"],
             "concats_in_place": sum(n.op == "Concat" for n in graph.nodes if n.name in plan.in_place),
             "reshapes_in_place": sum(n.op != "Concat" for n in graph.nodes if n.name in plan.in_place),
             "values_in_place": len(plan.aliases)}
    return sections, weights, facts


def _lower_dynamic(graph: Graph, options: CompileOptions, seconds: dict) -> tuple[dict, dict, dict]:
    for name, fn in (("insert-memcpy", insert_memcpy),
                     ("place-host-ops", place_host_ops),
                     ("assign-streams+insert-events",
                      lambda g: schedule_device_nodes(g, options.streams)),
                     ("schedule-regions", lambda g: schedule_regions(g, options.streams))):
        graph = _stage(seconds, name, fn, graph)
    t = time.perf_counter()
    exec_graph, weights = lower_dynamic(graph)
    seconds["lower"] = time.perf_counter() - t
    facts = {"host_ops": exec_graph["host_ops"], "host_kernels": len(exec_graph["kernels"])}
    return {"exec_graph": exec_graph, "tiling": {"entries": []}}, weights, facts


def _finish(graph: Graph, mode: str, sections: dict, weights: dict, facts: dict,
            seconds: dict, t0: float, io: tuple[list, list], kernels: int) -> CompiledModel:
    stats = graph.meta.get("stats", {})
    report = {
        "mode": mode,
        "imported_nodes": graph.meta.get("imported_nodes"),
        "kernels": kernels,
        "folded_nodes": stats.get("folded_nodes", 0),
        "dead_nodes": stats.get("dead_nodes", 0),
        "identity_removed": stats.get("identity_removed", 0),
        "fused_conv_batchnorm": stats.get("fused_conv_batchnorm", 0),
        "fused_epilogues": stats.get("fused_epilogues", 0),
        "folded_channel_affine": stats.get("folded_channel_affine", 0),
        "fused_elementwise_chains": stats.get("fused_elementwise_chains", 0),
        "fused_add_layernorm": stats.get("fused_add_layernorm", 0),
        "fused_add_softmax": stats.get("fused_add_softmax", 0),
        "fused_gelu": stats.get("fused_gelu", 0),
        "fused_matmul_transposes": stats.get("fused_matmul_transposes", 0),
        "fused_softmax_matmul": stats.get("fused_softmax_matmul", 0),
        "fused_attention": stats.get("fused_attention", 0),
        "sunk_expands": stats.get("sunk_expands", 0),
        "dropped_expands": stats.get("dropped_expands", 0),
        "pushed_bn_scales": stats.get("pushed_bn_scales", 0),
        "reordered_pool_convs": stats.get("reordered_pool_convs", 0),
        "pushed_matmul_scales": stats.get("pushed_matmul_scales", 0),
        "packed_conv_weights": stats.get("packed_conv_weights", 0),
        "streams": graph.meta.get("streams", 1),
        "events": graph.meta.get("events", 0),
        **facts,
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 4),
    }
    sections["model"] = {
        "name": graph.meta.get("model_name", "model"),
        "mode": mode,
        "producer": PRODUCER,
        "source_producer": graph.meta.get("producer", ""),
        "opsets": {k or "ai.onnx": v for k, v in graph.opsets.items()},
        "inputs": io[0],
        "outputs": io[1],
        "compile_report": report,
    }
    om = OmFile(mode=mode, sections=sections, weights=weights)
    return CompiledModel(graph=graph, om=om, report=report)


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
    with cyclic_gc_paused():
        return _compile(source, options or CompileOptions())


def _compile(source, options: CompileOptions) -> CompiledModel:
    if options.dynamic_batch:
        from .lowering.gears import compile_gears
        return compile_gears(source, options)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    graph = optimize(source, options)
    seconds["import+passes"] = time.perf_counter() - t0
    mode = choose_mode(graph, options.mode)
    io = (_io(graph, graph.inputs), _io(graph, graph.outputs))
    kernels = len(graph.nodes)
    lower = _lower_static if mode == "static" else _lower_dynamic
    sections, weights, facts = lower(graph, options, seconds)
    return _finish(graph, mode, sections, weights, facts, seconds, t0, io, kernels)


def emit_ir(source, options: CompileOptions | None = None) -> str:
    """The optimised IR as text."""
    return print_graph(optimize(source, options or CompileOptions()))

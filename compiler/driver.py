"""The compile driver: ONNX -> IR -> passes -> streams/events -> memory -> .om.

Each stage hands the next a plain structure; the stage list below is the
whole path a model takes through the compiler.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from aircc.errors import CompileOptionError
from aircc.formats import OmFile

from .frontend.onnx_import import import_onnx
from .ir.graph import Dim, Graph
from .ir.printer import print_graph
from .ir.verifier import verify
from .lowering.static import lower_static
from .lowering.tiling import compute_tiling
from .memory.planner import plan_memory
from .passes.pipeline import DEFAULT_PIPELINE, run_pipeline
from .schedule.events import insert_events
from .schedule.memcpy import insert_memcpy
from .schedule.streams import assign_streams

PRODUCER = "aircc 0.1.0"


@dataclass
class CompileOptions:
    """What ``aircc compile`` lets a user choose."""

    streams: int | None = None
    """Stream cap; None = the default cap, 1 = a single stream."""
    input_shapes: Mapping[str, Sequence[Dim]] = field(default_factory=dict)
    mode: str = "static"
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
    return run_pipeline(graph, options.passes if options.passes is not None else DEFAULT_PIPELINE)


def compile_model(source, options: CompileOptions | None = None) -> CompiledModel:
    """Compile an ONNX model (path, bytes or ModelProto) into an in-memory .om."""
    options = options or CompileOptions()
    if options.mode not in ("static",):
        raise CompileOptionError(f"--mode {options.mode!r} is not supported yet; "
                                 f"this build compiles static models only (--mode static)")
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    graph = optimize(source, options)
    seconds["import+passes"] = time.perf_counter() - t0
    io_inputs = [{"name": n, "dtype": graph.types[n].dtype, "shape": list(graph.types[n].shape)}
                 for n in graph.inputs]
    io_outputs = [{"name": n, "dtype": graph.types[n].dtype, "shape": list(graph.types[n].shape)}
                  for n in graph.outputs]
    kernels = len(graph.nodes)
    for stage, fn in (("insert-memcpy", insert_memcpy),
                      ("assign-streams", lambda g: assign_streams(g, options.streams)),
                      ("insert-events", insert_events),
                      ("tiling", compute_tiling)):
        t = time.perf_counter()
        graph = fn(graph)
        verify(graph)
        seconds[stage] = time.perf_counter() - t
    t = time.perf_counter()
    plan = plan_memory(graph)
    sections, weights = lower_static(graph, plan, inputs=io_inputs, outputs=io_outputs)
    seconds["plan+lower"] = time.perf_counter() - t
    stats = graph.meta.get("stats", {})
    report = {
        "imported_nodes": graph.meta.get("imported_nodes"),
        "kernels": kernels,
        "folded_nodes": stats.get("folded_nodes", 0),
        "dead_nodes": stats.get("dead_nodes", 0),
        "identity_removed": stats.get("identity_removed", 0),
        "streams": graph.meta.get("streams", 1),
        "events": graph.meta.get("events", 0),
        "arena_bytes": plan.arena_bytes,
        "lower_bound_bytes": plan.lower_bound_bytes,
        "no_reuse_bytes": plan.no_reuse_bytes,
        "memory_strategy": plan.strategy,
        "weights_bytes": sections["memory_plan"]["weights_bytes"],
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "total_seconds": round(time.perf_counter() - t0, 4),
    }
    sections["model"] = {
        "name": graph.meta.get("model_name", "model"),
        "mode": "static",
        "producer": PRODUCER,
        "source_producer": graph.meta.get("producer", ""),
        "opsets": {k or "ai.onnx": v for k, v in graph.opsets.items()},
        "inputs": io_inputs,
        "outputs": io_outputs,
        "compile_report": report,
    }
    om = OmFile(mode="static", sections=sections, weights=weights)
    return CompiledModel(graph=graph, om=om, report=report)


def emit_ir(source, options: CompileOptions | None = None) -> str:
    """The optimised IR as text."""
    return print_graph(optimize(source, options or CompileOptions()))

"""The compile driver: ONNX -> IR -> passes -> schedule -> memory plan -> lowering -> .om.

:func:`compile_model` runs the stages of :mod:`.stages` (one list per mode) on a
:class:`~.context.CompileContext` that carries the options, the target, the
statistics and the timings, then :mod:`.assemble` makes the report and the .om.
Gears (``--dynamic-batch``) run the static stages once per batch size
(:mod:`.lowering.gears`).
"""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import Callable

from .assemble import CompiledModel, finish, io_specs
from .context import CompileContext, CompileOptions
from .ir.graph import Graph
from .ir.printer import print_graph
from .lowering.gears import compile_gears
from .stages import BACK, FRONT, Compilation, choose_mode, run_stages

__all__ = ["CompileOptions", "CompileContext", "CompiledModel", "compile_model", "emit_ir",
           "optimize", "choose_mode"]


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


def compile_model(source, options: CompileOptions | None = None,
                  progress: Callable[[str, int], None] | None = None) -> CompiledModel:
    """Compile an ONNX model (path, bytes or ModelProto) into an in-memory .om;
    ``progress`` is called with each stage's name as it ends and the number of stages
    the compile runs (:func:`~.stages.planned_stages`: known once the mode is)."""
    options = options if options is not None else CompileOptions()
    with cyclic_gc_paused():
        if options.dynamic_batch:
            return compile_gears(source, options, progress)
        t0 = time.perf_counter()
        ctx = CompileContext(options)
        ctx.progress = progress
        c = run_stages(Compilation(source, ctx), FRONT)
        run_stages(c, BACK[c.mode])
        return finish(c, t0, io_specs(c.graph, c.graph.inputs), io_specs(c.graph, c.graph.outputs))


def optimize(source, options: CompileOptions | None = None) -> Graph:
    """Import and run the optimisation pipeline (the IR that ``--emit ir`` prints)."""
    c = run_stages(Compilation(source, CompileContext(options)), FRONT)
    return c.graph


def emit_ir(source, options: CompileOptions | None = None) -> str:
    """The optimised IR as text."""
    return print_graph(optimize(source, options))

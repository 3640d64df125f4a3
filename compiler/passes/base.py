"""How a pass is declared: a name, the statistics it reports, and its function.

Every pass is ``fn(graph, ctx) -> graph`` and leaves the IR valid (the pipeline
runs the verifier after each one).  It is registered by name with
:func:`compile_pass`, which also lists the statistics it counts with
``ctx.count``, so that the compile report shows each of them (0 when the pass
did nothing).  Called on its own (tests, tools), a pass gets a default context.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Callable, Optional

from ..context import CompileContext
from ..ir.graph import Graph

PassFn = Callable[[Graph, Optional[CompileContext]], Graph]


@dataclass(frozen=True)
class PassInfo:
    """A registered pass."""

    name: str
    run: PassFn
    stats: tuple[str, ...]
    """Statistics the pass reports (keys of ``CompileContext.stats``)."""
    doc: str


PASSES: dict[str, PassInfo] = {}


def compile_pass(name: str, stats: tuple[str, ...] = ()) -> Callable[[PassFn], PassFn]:
    """Decorator: register ``fn(graph, ctx)`` as the pass ``name`` reporting ``stats``."""

    def register(fn: PassFn) -> PassFn:
        @functools.wraps(fn)
        def run(graph: Graph, ctx: CompileContext | None = None) -> Graph:
            return fn(graph, ctx if ctx is not None else CompileContext())

        if name in PASSES:
            raise ValueError(f"pass '{name}' is registered twice")
        module = sys.modules.get(fn.__module__)
        doc = (module.__doc__ if module is not None else None) or fn.__doc__ or ""
        PASSES[name] = PassInfo(name, run, tuple(stats), doc.strip().splitlines()[0] if doc else "")
        return run

    return register


def declared_stats() -> list[str]:
    """Every statistic some registered pass reports, in registration order."""
    seen: dict[str, None] = {}
    for info in PASSES.values():
        for s in info.stats:
            seen.setdefault(s, None)
    return list(seen)

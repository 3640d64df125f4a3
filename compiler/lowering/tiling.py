"""Pass ``tiling``: shape-dependent launch preparation, done once at compile time.

For every kernel node the target backend's tiling function runs on the (static)
input types; its result goes to ``node.meta["tiling"]`` and the workspace it asks
for to ``node.meta["workspace"]``, which the memory planner then places.  The
device's own tasks (events, copies, jumps) have no kernel and no tiling.
"""
from __future__ import annotations

from aircc.formats.kinds import Impl
from aircc.ops import Trait, has_trait
from aircc.ops.layout import adapt_kernel

from ..context import CompileContext
from ..ir.graph import Graph
from ..passes.base import compile_pass


@compile_pass("tiling")
def compute_tiling(graph: Graph, ctx: CompileContext) -> Graph:
    """Tile every kernel node for the compile target."""
    for node in graph.nodes:
        if has_trait(node.op, Trait.DEVICE_TASK, node.domain):
            continue
        impl = adapt_kernel(ctx.backend.impl(node.op, node.version, node.domain, node.name,
                                             fallback=node.impl is Impl.FALLBACK),
                            node.attrs)
        tiling = impl.tile([graph.types.get(i) if i else None for i in node.inputs],
                           node.attrs, ctx.target)
        node.meta["tiling"] = tiling
        node.meta["workspace"] = int(tiling.get("workspace", 0))
    return graph

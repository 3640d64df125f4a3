"""Pass ``tiling``: shape-dependent launch preparation, done once at compile time.

For every kernel node the op's tiling function runs on the (static) input
types; its result goes to ``node.meta["tiling"]`` and the workspace it asks
for to ``node.meta["workspace"]``, which the memory planner then places.
"""
from __future__ import annotations

from aircc.executor.kernels.registry import node_spec

from ..ir.graph import Graph

#: Ops that are not kernels: data movement and synchronisation tasks.
RUNTIME_OPS = frozenset({"MemcpyH2D", "MemcpyD2H", "EventRecord", "EventWait",
                         "Label", "Goto", "StreamSwitch"})


def compute_tiling(graph: Graph) -> Graph:
    for node in graph.nodes:
        if node.op in RUNTIME_OPS:
            continue
        spec = node_spec(node)
        if spec.kernel is None:
            from aircc.errors import UnsupportedOpError
            raise UnsupportedOpError(node.op, node.domain, node.version, node.name,
                                     reason="it has no kernel")
        tiling = spec.tiling([graph.types.get(i) if i else None for i in node.inputs],
                             node.attrs) if spec.tiling else {}
        node.meta["tiling"] = tiling
        node.meta["workspace"] = int(tiling.get("workspace", 0))
    return graph

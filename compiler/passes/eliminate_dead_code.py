"""Pass ``dce``: drop nodes whose results nobody reads, and unused constants.

Ops with side effects (EventRecord, EventWait, memcpy) always stay, as do
nodes whose nested regions hold such ops.
"""
from __future__ import annotations

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass


def _captures(region: Graph) -> set[str]:
    used = set(region.outputs)
    for n in region.walk():
        used.update(i for i in n.inputs if i)
    return used


def _keeps_effects(node: Node) -> bool:
    return node.has_side_effects or any(n.has_side_effects for r in node.regions for n in r.walk())


@compile_pass("dce", stats=("dead_nodes",))
def eliminate_dead_code(graph: Graph, ctx: CompileContext) -> Graph:
    """Remove dead nodes (walking backwards) and constants no node reads."""
    live: set[str] = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if _keeps_effects(node) or any(o in live for o in node.outputs if o):
            kept.append(node)
            live.update(i for i in node.inputs if i)
            for region in node.regions:
                eliminate_dead_code(region, ctx)
                live.update(_captures(region))
    removed = len(graph.nodes) - len(kept)
    graph.nodes = kept[::-1]
    for name in [c for c in graph.constants if c not in live]:
        del graph.constants[name]
    defined = set(graph.inputs) | set(graph.constants)
    defined.update(o for n in graph.nodes for o in n.outputs)
    for name in [t for t in graph.types if t not in defined]:
        del graph.types[name]
    ctx.count("dead_nodes", removed)
    return graph

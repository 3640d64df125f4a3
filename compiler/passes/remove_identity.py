"""Pass ``remove-identity``: drop Identity, and Dropout in inference.

Readers of the output read the input instead.  When the output is a graph
output, the producer of the input is renamed to it, so that outputs keep
their names; an Identity that copies a graph input or a constant straight to
a graph output stays (it is a real copy).  A Dropout whose mask is read, or
whose ``training_mode`` input is not a constant false, stays as well.
"""
from __future__ import annotations

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass


def _is_inference_dropout(graph: Graph, node: Node, read: set[str]) -> bool:
    if len(node.outputs) > 1 and node.outputs[1] in read:
        return False
    if len(node.inputs) > 2 and node.inputs[2]:
        mode = graph.constants.get(node.inputs[2])
        return mode is not None and not bool(mode)
    return True


def rename_value(graph: Graph, old: str, new: str) -> None:
    """Rename a node-defined value everywhere in ``graph`` (and nested regions)."""
    for n in graph.walk():
        n.inputs = [new if i == old else i for i in n.inputs]
        n.outputs = [new if o == old else o for o in n.outputs]
    graph.outputs = [new if o == old else o for o in graph.outputs]
    if old in graph.types:
        graph.types[new] = graph.types.pop(old)


@compile_pass("remove-identity", stats=("identity_removed",))
def remove_identity(graph: Graph, ctx: CompileContext) -> Graph:
    removed = 0
    producers = graph.producers()
    read = set(graph.outputs) | {i for n in graph.walk() for i in n.inputs}
    for node in list(graph.nodes):
        for region in node.regions:
            remove_identity(region, ctx)
        if node.op not in ("Identity", "Dropout") or node.regions:
            continue
        if node.op == "Dropout" and not _is_inference_dropout(graph, node, read):
            continue
        src, dst = node.inputs[0], node.outputs[0]
        if dst in graph.outputs:
            if src not in producers or src in graph.outputs:
                continue
            graph.nodes.remove(node)
            for extra in node.outputs[1:]:
                graph.types.pop(extra, None)
            del graph.types[dst]
            rename_value(graph, src, dst)
            producers = graph.producers()
        else:
            graph.nodes.remove(node)
            for n in graph.walk():
                n.inputs = [src if i == dst else i for i in n.inputs]
            for out in node.outputs:
                graph.types.pop(out, None)
        removed += 1
    ctx.count("identity_removed", removed)
    return graph

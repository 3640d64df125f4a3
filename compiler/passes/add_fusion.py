"""What the Add fusions share (``fuse-add-layernorm``, ``fuse-add-softmax``): find an Add
read only by a node of one op, let the pass rewire that node to take the Add's operands,
drop the Add, and count it in the compile report."""
from __future__ import annotations

from typing import Callable, Optional

from ..context import CompileContext
from ..ir.graph import Graph, Node


def fold_adds_into(graph: Graph, ctx: CompileContext, op: str, stat: str,
                   rewire: Callable[[Graph, Node, Node], Optional[list[str]]]) -> Graph:
    """For each plain Add read only by an ``op`` node: ``rewire(graph, add, reader)`` gives the
    reader's new inputs (None: leave both alone); the reader gets ``fused_add`` and the
    Add goes away."""
    removed: set[str] = set()
    for add, reader in graph.adds_read_only_by(op):
        if reader.attrs.get("fused_add"):
            continue
        inputs = rewire(graph, add, reader)
        if inputs is None:
            continue
        reader.inputs = inputs
        reader.attrs["fused_add"] = 1
        graph.types.pop(add.outputs[0], None)
        removed.add(add.name)
    graph.nodes = [n for n in graph.nodes if n.name not in removed]
    ctx.count(stat, len(removed))
    return graph

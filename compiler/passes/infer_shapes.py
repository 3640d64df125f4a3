"""Pass ``infer-shapes``: type every value from the op registry's shape rules.

Each node's rule sees its input types and, where an input is a compile-time
constant, its value (Reshape's shape, ConstantOfShape's shape, ...).
"""
from __future__ import annotations

from aircc.executor.kernels.registry import InferContext, lookup

from ..ir.graph import Graph, Node, TensorType


def infer_node(graph: Graph, node: Node, types: dict[str, TensorType] | None = None) -> list[TensorType]:
    """Output types of one node from the types (and constant values) of its inputs."""
    types = graph.types if types is None else types
    spec = lookup(node.op, node.version, node.domain, node.name)
    ctx = InferContext(types=[types.get(i) if i else None for i in node.inputs],
                       attrs=node.attrs,
                       values=[graph.constants.get(i) if i else None for i in node.inputs],
                       node=node.name, op=node.op, num_outputs=len(node.outputs))
    if spec.infer is None:
        ctx.fail("the op has no shape rule")
    out = spec.infer(ctx)
    if len(out) != len(node.outputs):
        ctx.fail(f"shape rule gave {len(out)} outputs for {len(node.outputs)}")
    return out


def infer_shapes(graph: Graph, outer: dict[str, TensorType] | None = None) -> Graph:
    """Set ``graph.types`` for every node output (nested regions included)."""
    scope = dict(outer or {})
    scope.update(graph.types)
    for name, arr in graph.constants.items():
        graph.types[name] = scope[name] = TensorType.of(arr)
    for node in graph.nodes:
        for region in node.regions:
            infer_shapes(region, scope)
        for name, t in zip(node.outputs, infer_node(graph, node, scope)):
            if name:
                graph.types[name] = scope[name] = t
    graph.meta["typed"] = True
    return graph

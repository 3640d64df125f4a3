"""Pass ``push-matmul-scale``: a MatMul's scalar scale moves into the weights that made its input.

Attention scales its scores: ``MatMul(Q, K^T) * c`` (``fused_scale`` after
``fuse-epilogues``), a pass over the largest tensor of the layer.  Q is itself
a linear layer, ``Q = x @ Wq + bq`` (a MatMul with constant weights and a fused
constant bias), seen through Reshape and Transpose, which commute with a
scalar.  So ``(x @ Wq + bq) * c = x @ (c * Wq) + c * bq``: the constants are
scaled once at compile time and the scores need no pass of their own.  Each
value on the way must have one reader; weights another node also reads are
copied, not changed.
"""
from __future__ import annotations

import numpy as np

from aircc.ops import Trait, has_trait

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass


def _reads_numbers_once(graph: Graph, value: str, users) -> bool:
    """Exactly one reader of ``value`` reads its numbers (others, such as the Shape ops
    dynamic graphs keep, read its shape only)."""
    return len(graph.number_readers(value, users)) == 1 and value not in graph.outputs


def _linear_source(graph: Graph, value: str, users, producers) -> Node | None:
    """The MatMul with constant weights (and constant fused bias, if any) whose result
    reaches ``value`` through layout ops only, every value on the way read once (its
    shape may be read more)."""
    while True:
        node = producers.get(value)
        if node is None or node.domain or not _reads_numbers_once(graph, value, users):
            return None
        if has_trait(node.op, Trait.LAYOUT):       # a scalar factor passes through unchanged
            value = node.inputs[0]
            continue
        if node.op != "MatMul" or "fused_scale" in node.attrs or node.attrs.get("fused_relu"):
            return None
        if node.inputs[1] not in graph.constants:
            return None
        if node.attrs.get("fused_add") and (len(node.inputs) < 3 or node.inputs[2] not in graph.constants):
            return None
        return node


def _scaled_constant(graph: Graph, name: str, factor: float, users) -> str:
    arr = graph.constants[name]
    scaled = (arr.astype(np.float64) * factor).astype(arr.dtype)
    if len(users.get(name, [])) == 1 and name not in graph.outputs:
        graph.constants[name] = scaled
        return name
    new = graph.fresh_name(f"{name}.scaled")
    graph.constants[new] = scaled
    graph.types[new] = TensorType.of(scaled)
    return new


@compile_pass("push-matmul-scale", stats=("pushed_matmul_scales",))
def push_matmul_scale(graph: Graph, ctx: CompileContext) -> Graph:
    pushed = 0
    for node in graph.nodes:
        if node.op != "MatMul" or node.domain or "fused_scale" not in node.attrs:
            continue
        users, producers = graph.consumers(), graph.producers()
        for side in (0, 1):
            src = _linear_source(graph, node.inputs[side], users, producers)
            if src is None or graph.types.get(src.inputs[1]) is None \
                    or graph.types[src.inputs[1]].dtype not in ("float32", "float64"):
                continue
            factor = float(node.attrs.pop("fused_scale"))
            src.inputs[1] = _scaled_constant(graph, src.inputs[1], factor, users)
            if src.attrs.get("fused_add"):
                src.inputs[2] = _scaled_constant(graph, src.inputs[2], factor, users)
            pushed += 1
            break
    ctx.count("pushed_matmul_scales", pushed)
    return graph

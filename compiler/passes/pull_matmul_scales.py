"""Pass ``pull-matmul-scales``: scalar factors on a MatMul's computed operands move to its result.

``(a * c1) @ (b * c2) = (a @ b) * (c1 * c2)``.  PyTorch exports
``scaled_dot_product_attention`` that way: Q and K^T are each multiplied by
``1 / sqrt(sqrt(d))``, two passes over the operands, where one factor on the scores
is what ``fuse-epilogues`` folds into the MatMul (``fused_scale``) and
``push-matmul-scale`` or ``fuse-attention`` into Q's weights.

Only a product of two computed values (no constant weights: a linear layer's input
scale stays where it is, often the last step of a GELU that ``fuse-gelu`` matches).
A factor is a Mul by (or a Div by) a constant of one element and the operand's float
dtype, whose result the MatMul alone reads and has the operand's type.  The MatMul
then reads the unscaled operands, and one Mul by the product of the factors (taken
in float64) writes its old result.  Counted as ``pulled_matmul_scales`` (factors
moved).  Run before ``fuse-epilogues``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass

FLOAT_TYPES = ("float16", "float32", "float64")


def _factor(graph: Graph, value: str, mm: Node, users, producers) -> Optional[tuple[str, float, Node]]:
    """(unscaled operand, factor, the scaling node) when ``value`` is a scaled operand of ``mm``."""
    node = producers.get(value)
    if node is None or not (node.is_plain("Mul") or node.is_plain("Div")) or len(node.inputs) != 2 \
            or graph.only_reader(value, users) is not mm:
        return None
    a, c = node.inputs
    if node.op == "Mul" and a in graph.constants and c not in graph.constants:
        a, c = c, a
    const = graph.constants.get(c)
    ta, tv = graph.types.get(a), graph.types.get(value)
    if const is None or const.size != 1 or a in graph.constants or ta is None or ta != tv \
            or ta.dtype not in FLOAT_TYPES or str(const.dtype) != ta.dtype:
        return None
    f = float(const.reshape(-1)[0])
    if node.op == "Div":
        if f == 0:
            return None
        f = 1.0 / f
    return a, f, node


@compile_pass("pull-matmul-scales", stats=("pulled_matmul_scales",))
def pull_matmul_scales(graph: Graph, ctx: CompileContext) -> Graph:
    users, producers = graph.consumers(), graph.producers()
    removed: set[str] = set()
    after: dict[str, Node] = {}         # a MatMul's name -> the Mul that now follows it
    pulled = 0
    for mm in graph.nodes:
        if not mm.is_plain("MatMul") or len(mm.inputs) != 2 or mm.attrs or mm.inputs[0] == mm.inputs[1] \
                or any(i in graph.constants for i in mm.inputs):
            continue
        found = [_factor(graph, v, mm, users, producers) for v in mm.inputs]
        if not any(found) or any(f is not None and f[2].name in removed for f in found):
            continue
        total = 1.0
        for side, f in enumerate(found):
            if f is not None:
                mm.inputs[side] = f[0]
                total *= f[1]
                removed.add(f[2].name)
                graph.types.pop(f[2].outputs[0], None)
                pulled += 1
        out = mm.outputs[0]
        dtype = graph.types[out].dtype
        raw, scale = graph.fresh_name(f"{out}.unscaled"), graph.fresh_name(f"{mm.name}.scale")
        graph.constants[scale] = np.array(total, dtype=dtype)
        graph.types[scale] = TensorType.of(graph.constants[scale])
        graph.types[raw] = graph.types[out]
        mm.outputs[0] = raw
        version = next(f[2].version for f in found if f is not None)
        after[mm.name] = Node("Mul", [raw, scale], [out], {}, name=f"{mm.name}/scale", version=version)
    order: list[Node] = []
    for n in graph.nodes:
        if n.name not in removed:
            order.append(n)
            if n.name in after:
                order.append(after[n.name])
    graph.nodes = order
    ctx.count("pulled_matmul_scales", pulled)
    return graph

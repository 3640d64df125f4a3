"""Pass ``fuse-gelu``: the exported form of GELU becomes one ``Gelu`` node.

Models written before ONNX had a Gelu op (opset 20) spell it out::

    x * 0.5 * (1 + erf(x / sqrt(2)))       Div (or Mul by 1/sqrt(2)), Erf, Add 1, Mul, Mul

in any order of the two products, or with the half taken first, ``(x * 0.5) * (1 +
erf(...))``.  The five nodes become ``Gelu(x)`` (approximate "none"), whose kernel
computes it as ``x / (1 + exp(-x * Q(x^2)))`` (see ``executor/kernels/elementwise``):
fewer passes than the five ops, and no cancellation in ``1 + erf`` for negative x.
The compile report counts each as ``fused_gelu``.  Run before ``fuse-elementwise``,
which would otherwise make the five nodes a generic chain.
"""
from __future__ import annotations

import math
from typing import Optional


from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass

#: The opset that defines Gelu; the fused node is looked up there.
GELU_SINCE = 20
FLOAT_TYPES = ("float16", "float32", "float64")


def _scalar(graph: Graph, name: str, value: float) -> bool:
    c = graph.constants.get(name)
    return c is not None and c.size == 1 and c.dtype.kind == "f" \
        and math.isclose(float(c.reshape(-1)[0]), value, rel_tol=1e-6)


def _other(node: Node, value: str) -> Optional[str]:
    """The operand of binary ``node`` that is not ``value`` (None unless exactly one is)."""
    if len(node.inputs) != 2 or node.inputs.count(value) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == value else node.inputs[0]



def _match(graph: Graph, erf: Node, users, producers) -> Optional[tuple[str, list[Node]]]:
    """(x, the nodes from the scaling to the last product) when ``erf`` is GELU's."""
    scale = producers.get(erf.inputs[0])
    if scale is None or not (scale.is_plain("Div") or scale.is_plain("Mul")) or len(scale.inputs) != 2 \
            or graph.only_reader(scale.outputs[0], users) is not erf:
        return None
    x, c = scale.inputs
    if not _scalar(graph, c, math.sqrt(2) if scale.op == "Div" else 1 / math.sqrt(2)):
        if scale.op == "Div" or not _scalar(graph, x, 1 / math.sqrt(2)):
            return None
        x = c                                   # Mul(1/sqrt(2), x)
    if x in graph.constants:
        return None
    add = graph.only_reader(erf.outputs[0], users)
    if add is None or not add.is_plain("Add") or not _scalar(graph, _other(add, erf.outputs[0]) or "", 1.0):
        return None
    members, value, factors = [scale, erf, add], add.outputs[0], []
    while len(factors) < 2:
        mul = graph.only_reader(value, users)
        other = _other(mul, value) if mul is not None and mul.is_plain("Mul") else None
        if other is None:
            break
        members.append(mul)
        factors.append(other)
        value = mul.outputs[0]
        if len(factors) == 1:
            half = producers.get(other)           # (x * 0.5) * (1 + erf)
            if half is not None and half.is_plain("Mul") and graph.only_reader(other, users) is mul \
                    and _other(half, x) is not None and _scalar(graph, _other(half, x), 0.5):
                return x, [half] + members
    if len(factors) == 2 and x in factors \
            and _scalar(graph, factors[1] if factors[0] == x else factors[0], 0.5):
        return x, members
    return None


@compile_pass("fuse-gelu", stats=("fused_gelu",))
def fuse_gelu(graph: Graph, ctx: CompileContext) -> Graph:
    users, producers = graph.consumers(), graph.producers()
    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    for node in graph.nodes:
        if not node.is_plain("Erf") or node.name in removed:
            continue
        t = graph.types.get(node.inputs[0])
        if t is None or t.dtype not in FLOAT_TYPES:
            continue
        found = _match(graph, node, users, producers)
        if found is None or any(m.name in removed for m in found[1]):
            continue
        x, members = found
        last = members[-1]
        if graph.types.get(last.outputs[0]) != graph.types.get(x):
            continue                            # a broadcasting step: not an elementwise GELU
        removed.update(m.name for m in members)
        for m in members[:-1]:
            graph.types.pop(m.outputs[0], None)
        replaced[last.name] = Node("Gelu", [x], [last.outputs[0]], {}, name=f"{node.name}/gelu",
                                   version=GELU_SINCE)
    graph.nodes = [replaced.get(n.name, n) for n in graph.nodes
                   if n.name not in removed or n.name in replaced]
    ctx.count("fused_gelu", len(replaced))
    return graph

"""Pass ``fuse-elementwise``: a chain of elementwise ops in one kernel launch.

A run of elementwise ops (Add, Sub, Mul, Div, Erf, Tanh, Sigmoid, Relu, Exp,
Neg, Abs, Sqrt) where each result is read only by the next op, and the other
operand of each binary op is a constant or the chain's first input, becomes
one ``aircc.ElementwiseChain`` node: GELU's Div, Erf, Add, Mul, Mul is one
launch instead of five (and one host kernel set instead of five in dynamic
mode).  Every step keeps the first input's shape and float dtype.
"""
from __future__ import annotations

from aircc.formats.kinds import Impl
from aircc.ops.defs.fused import CHAIN_BINARY_OPS, CHAIN_UNARY_OPS

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass



def _step(graph: Graph, node: Node, value: str, head: str) -> list | None:
    """The chain step ``node`` applies to ``value``, or None if it cannot join the chain."""
    if node.domain or node.impl is Impl.FALLBACK or graph.types.get(node.outputs[0]) != graph.types.get(head):
        return None
    if node.op in CHAIN_UNARY_OPS and node.inputs == [value]:
        return [node.op, "", 0]
    if node.op in CHAIN_BINARY_OPS and len(node.inputs) == 2 and node.inputs.count(value) == 1:
        other = node.inputs[1] if node.inputs[0] == value else node.inputs[0]
        if other != head and other not in graph.constants:
            return None
        return [node.op, other, 0 if node.inputs[0] == value else 1]   # 1: value is the right operand
    return None


@compile_pass("fuse-elementwise", stats=("fused_elementwise_chains",))
def fuse_elementwise(graph: Graph, ctx: CompileContext) -> Graph:
    users = graph.consumers()
    removed: set[str] = set()
    replaced: dict[str, Node] = {}
    chains = 0
    for node in graph.nodes:
        if node.name in removed or not node.inputs:
            continue
        head = node.inputs[0] if node.op in CHAIN_UNARY_OPS else next(
            (i for i in node.inputs if i and i not in graph.constants), "")
        t = graph.types.get(head)
        if not head or t is None or not t.dtype.startswith("float") or t.shape is None:
            continue
        first = _step(graph, node, head, head)
        if first is None:
            continue
        steps, members, value = [first], [node], node.outputs[0]
        while True:
            readers = users.get(value, [])
            if len(readers) != 1 or value in graph.outputs:
                break
            step = _step(graph, readers[0], value, head)
            if step is None or readers[0].name in removed:
                break
            steps.append(step)
            members.append(readers[0])
            value = readers[0].outputs[0]
        if len(members) < 2:
            continue
        operands = [head] + sorted({s[1] for s in steps if s[1] and s[1] != head})
        fused = Node("ElementwiseChain", operands, [value], {"steps": steps, "operands": operands},
                     domain="aircc",
                     version=1, name=f"{members[0].name}/chain")
        for m in members:
            removed.add(m.name)
            for o in m.outputs:
                if o != value:
                    graph.types.pop(o, None)
        replaced[members[-1].name] = fused
        chains += 1
    graph.nodes = [replaced.get(n.name, n) for n in graph.nodes
                   if n.name not in removed or n.name in replaced]
    ctx.count("fused_elementwise_chains", chains)
    return graph

"""Pass ``fuse-add-layernorm``: a residual Add and the LayerNormalization after it in one launch.

A transformer block ends in ``LayerNormalization(x + sublayer(x))``.  When the
Add's only reader is a LayerNormalization (as its X), the LayerNormalization
takes the Add's operands instead and adds them as it starts (``fused_add``,
the second operand as input 3): one launch fewer, and the sum is not written
and read back.  The Add's other operand may broadcast; its result must keep
the first operand's shape.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node
from .add_fusion import fold_adds_into


def _rewire(graph: Graph, add: Node, ln: Node) -> list[str] | None:
    """LayerNormalization(X = the Add's full-shape operand, scale, bias, residual)."""
    out = add.outputs[0]
    if ln.inputs[0] != out or ln.inputs.count(out) != 1 or len(ln.outputs) > 1:
        return None
    t_out = graph.types.get(out)
    a, b = add.inputs
    if graph.types.get(a) != t_out:
        a, b = b, a
    if t_out is None or graph.types.get(a) != t_out or graph.types.get(b) is None \
            or graph.types[b].dtype != t_out.dtype:
        return None
    scale_bias = ln.inputs[1:3] + [""] * (3 - len(ln.inputs))
    return [a, *scale_bias[:2], b]


def fuse_add_layernorm(graph: Graph) -> Graph:
    return fold_adds_into(graph, "LayerNormalization", "fused_add_layernorm", _rewire)

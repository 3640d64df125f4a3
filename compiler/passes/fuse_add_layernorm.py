"""Pass ``fuse-add-layernorm``: a residual Add and the LayerNormalization after it in one launch.

A transformer block ends in ``LayerNormalization(x + sublayer(x))``.  When the
Add's only reader is a LayerNormalization (as its X), the LayerNormalization
takes the Add's operands instead and adds them as it starts (``fused_add``,
the second operand as input 3): one launch fewer, and the sum is not written
and read back.  The Add's other operand may broadcast; its result must keep
the first operand's shape.
"""
from __future__ import annotations

from ..ir.graph import Graph


def fuse_add_layernorm(graph: Graph) -> Graph:
    removed: set[str] = set()
    for add, ln in graph.adds_read_only_by("LayerNormalization"):
        out = add.outputs[0]
        if ln.inputs[0] != out or ln.inputs.count(out) != 1 or ln.attrs.get("fused_add") \
                or len(ln.outputs) > 1:
            continue
        t_out = graph.types.get(out)
        a, b = add.inputs
        if graph.types.get(a) != t_out:
            a, b = b, a
        if t_out is None or graph.types.get(a) != t_out or graph.types.get(b) is None \
                or graph.types[b].dtype != t_out.dtype:
            continue
        scale_bias = ln.inputs[1:3] + [""] * (3 - len(ln.inputs))
        ln.inputs = [a, *scale_bias[:2], b]
        ln.attrs["fused_add"] = 1
        graph.types.pop(out, None)
        removed.add(add.name)
    graph.nodes = [n for n in graph.nodes if n.name not in removed]
    stats = graph.meta.setdefault("stats", {})
    stats["fused_add_layernorm"] = stats.get("fused_add_layernorm", 0) + len(removed)
    return graph

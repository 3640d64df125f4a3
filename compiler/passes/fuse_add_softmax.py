"""Pass ``fuse-add-softmax``: an Add and the Softmax after it in one launch.

Attention computes ``Softmax(scores + mask)``.  When the Add's only reader is a
Softmax (opset 13 or later, so ``axis`` is one axis of the Add's result), the
Softmax takes both operands (``fused_add``) and adds them as it shifts its
input: softmax(a + b) = softmax(a + (b - c)) for any c, and with c = max(a) +
max(b) every exponential is at most 1.  The sum is never written on its own,
and the shift costs no pass of its own.  Either operand may broadcast; the
result has the Add's shape, as before.  Run before ``fuse-epilogues``, which
would otherwise put the Add into the MatMul before it (a pass of its own).
"""
from __future__ import annotations

from ..ir.graph import Graph

FLOAT_TYPES = ("float16", "float32", "float64")


def fuse_add_softmax(graph: Graph) -> Graph:
    removed: set[str] = set()
    for add, sm in graph.adds_read_only_by("Softmax"):
        out = add.outputs[0]
        if sm.version < 13 or sm.inputs != [out] or sm.attrs.get("fused_add"):
            continue
        ta, tb = (graph.types.get(i) for i in add.inputs)
        if ta is None or tb is None or ta.dtype != tb.dtype or ta.dtype not in FLOAT_TYPES:
            continue
        sm.inputs = list(add.inputs)
        sm.attrs["fused_add"] = 1
        graph.types.pop(out, None)
        removed.add(add.name)
    graph.nodes = [n for n in graph.nodes if n.name not in removed]
    stats = graph.meta.setdefault("stats", {})
    stats["fused_add_softmax"] = stats.get("fused_add_softmax", 0) + len(removed)
    return graph

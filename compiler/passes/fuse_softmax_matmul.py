"""Pass ``fuse-softmax-matmul``: attention's Softmax and the MatMul that reads it, one kernel.

``softmax(S + M) @ V`` normalises every row of the scores, then multiplies.  The
normalisation can wait: softmax(S + M) @ V = (E @ V') / (E @ w) with E = exp(S),
w = exp(M) and V' = w * V when the mask is one value per key (see
``aircc.SoftmaxMatMul``).  The scores are then exponentiated in place of
three more passes over them (the mask add, the sums, the division), and the
division is over the much smaller result.  Fused when a Softmax (opset 13 or
later, along the last axis, with or without its ``fused_add`` mask) is read only
by a MatMul, as that MatMul's first operand, with no epilogue of its own.  The
MatMul's ``perm_b`` / ``perm_y`` carry over.  Counted as ``fused_softmax_matmul``.
Run after ``fuse-add-softmax`` and ``fuse-matmul-transpose``.
"""
from __future__ import annotations

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass

FLOAT_TYPES = ("float32", "float64")


def _fusable(graph: Graph, sm: Node, mm: Node) -> bool:
    t = graph.types.get(sm.outputs[0])
    if sm.version < 13 or t is None or t.shape is None or len(t.shape) < 2 \
            or t.dtype not in FLOAT_TYPES or len(sm.outputs) != 1:
        return False
    if int(sm.attrs.get("axis", -1)) not in (-1, len(t.shape) - 1):
        return False
    if len(mm.inputs) != 2 or mm.inputs[0] != sm.outputs[0] or mm.inputs[1] == sm.outputs[0] \
            or "perm_a" in mm.attrs or any(k.startswith("fused_") for k in mm.attrs):
        return False
    vt = graph.types.get(mm.inputs[1])
    return vt is not None and vt.shape is not None and len(vt.shape) >= 2 and vt.dtype == t.dtype


@compile_pass("fuse-softmax-matmul", stats=("fused_softmax_matmul",))
def fuse_softmax_matmul(graph: Graph, ctx: CompileContext) -> Graph:
    users, producers = graph.consumers(), graph.producers()
    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    for mm in graph.nodes:
        if not mm.is_plain("MatMul"):
            continue
        sm = producers.get(mm.inputs[0])
        if sm is None or not sm.is_plain("Softmax") or graph.only_reader(sm.outputs[0], users) is not mm \
                or not _fusable(graph, sm, mm):
            continue
        mask = sm.inputs[1:2] if sm.attrs.get("fused_add") else []
        attrs = {k: mm.attrs[k] for k in ("perm_b", "perm_y") if k in mm.attrs}
        replaced[mm.name] = Node("SoftmaxMatMul", [sm.inputs[0], mm.inputs[1], *mask], list(mm.outputs),
                                 attrs, name=f"{mm.name}/softmax", domain="aircc", version=1)
        removed.add(sm.name)
        graph.types.pop(sm.outputs[0], None)
    graph.nodes = [replaced.get(n.name, n) for n in graph.nodes if n.name not in removed]
    ctx.count("fused_softmax_matmul", len(replaced))
    return graph

"""Pass ``fuse-matmul-transpose``: Transposes around a MatMul become strided views.

Attention transposes its heads into place before and after each product:
``Transpose(Q) @ Transpose(K)`` and ``Transpose(P @ V)``.  Each Transpose is a
copy and a launch.  numpy's matmul (and the BLAS under it) reads and writes
matrices with any row stride, so the MatMul can take the Transpose's input and
look at it through the permutation instead (``perm_a`` / ``perm_b``), and write
its result through the inverse of a Transpose that is its only reader
(``perm_y``).  Only permutations that keep the last axis last: then every
matrix still has unit stride along its rows and BLAS takes it as it is (a
matrix read down its columns sends numpy's batched matmul to a path 1.6x
slower than the copy it saves, as for attention's K^T at (8, 128)).  A
Transpose read by anything else, or that is a graph output, stays.  Counted as ``fused_matmul_transposes``.  Run after ``push-matmul-scale``,
which follows scales through Transposes.
"""
from __future__ import annotations

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass


def _perm(graph: Graph, t: Node) -> list[int] | None:
    """The Transpose's permutation (the default reverses the axes), None if unknown."""
    perm = t.attrs.get("perm")
    if perm is not None:
        return [int(p) for p in perm]
    tt = graph.types.get(t.inputs[0])
    if tt is None or tt.shape is None:
        return None
    return list(range(len(tt.shape)))[::-1]


def _foldable(graph: Graph, t: Node) -> list[int] | None:
    """The Transpose's permutation if a MatMul can look through it (see module doc)."""
    perm = _perm(graph, t)
    if perm is None or len(perm) < 2 or perm[-1] != len(perm) - 1:
        return None
    return perm



@compile_pass("fuse-matmul-transpose", stats=("fused_matmul_transposes",))
def fuse_matmul_transpose(graph: Graph, ctx: CompileContext) -> Graph:
    users, producers = graph.consumers(), graph.producers()
    removed: set[str] = set()
    for mm in graph.nodes:
        if not mm.is_plain("MatMul"):
            continue
        for k, attr in ((0, "perm_a"), (1, "perm_b")):
            t = producers.get(mm.inputs[k])
            if t is None or not t.is_plain("Transpose") or t.name in removed or attr in mm.attrs \
                    or graph.only_reader(t.outputs[0], users) is not mm \
                    or mm.inputs.count(t.outputs[0]) != 1:
                continue
            perm = _foldable(graph, t)
            if perm is None:
                continue
            mm.inputs[k] = t.inputs[0]
            mm.attrs[attr] = perm
            graph.types.pop(t.outputs[0], None)
            removed.add(t.name)
        t = graph.only_reader(mm.outputs[0], users)
        if t is not None and t.is_plain("Transpose") and "perm_y" not in mm.attrs and t.name not in removed:
            perm = _foldable(graph, t)
            if perm is not None:
                graph.types.pop(mm.outputs[0], None)
                mm.outputs[0] = t.outputs[0]
                mm.attrs["perm_y"] = perm
                removed.add(t.name)
    graph.nodes = [n for n in graph.nodes if n.name not in removed]
    ctx.count("fused_matmul_transposes", len(removed))
    return graph

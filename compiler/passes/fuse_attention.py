"""Pass ``fuse-attention``: a self-attention block, from its input to its heads' context, one kernel.

After the earlier fusions an exported self-attention is still six launches:
three linear layers ``x @ Wq + bq``, ``x @ Wk + bk``, ``x @ Wv + bv`` reshaped
to heads ``[B, S, H, D]``; K's Transpose to ``[B, H, D, S]``; the scores
``Q @ K^T`` (``perm_a`` reading Q's heads in place); and ``aircc.SoftmaxMatMul``
with the mask, writing the context as ``[B, S, H, D]`` (``perm_b`` / ``perm_y``).
This pass makes them one ``aircc.Attention(x, [Wq | Wk | Wv], [bq | bk | bv],
mask)``: one product for Q, K and V (a wider GEMM, where BLAS is efficient,
instead of three narrow ones), the heads read as views of its result, and no
intermediate leaving the kernel's workspace.  Q's weights and bias are scaled by
log2 e at compile time (``base2``), so the kernel exponentiates its scores with
numpy's exp2, twice as fast as its exp.

Matched when the three linear layers read the same 3-D ``x`` with constant
weights (and constant or no bias), each Reshape target is ``[x's B, x's S,
H, D]`` with the same ``H`` and ``D`` (followed through the exporter's
Shape / Gather / Concat arithmetic by :func:`shape_value`), and every value
in between has one reader of its numbers (readers of its shape only, which
the Reshape targets are, go dead with it).  Counted as ``fused_attention``.
Run after ``fuse-softmax-matmul``.
"""
from __future__ import annotations

import numpy as np

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass
from .eliminate_dead_code import eliminate_dead_code
from .shape_values import shape_value

HEADS_PERM = [0, 2, 1, 3]
KEYS_PERM = [0, 2, 3, 1]


def _numbers_read_by(graph: Graph, value: str, users, reader: Node) -> bool:
    """``reader`` is the one node reading ``value``'s numbers (others read its shape)."""
    return graph.number_readers(value, users) == [reader] and value not in graph.outputs


def _linear_heads(graph: Graph, value: str, users, producers, reader: Node):
    """(linear MatMul, Reshape, heads, head_dim) for ``value`` = Reshape(x @ W (+ b)) to
    [B, S, H, D] read only by ``reader``; None if it is not that."""
    rs = producers.get(value)
    if rs is None or not rs.is_plain("Reshape") or not _numbers_read_by(graph, value, users, reader):
        return None
    lin = producers.get(rs.inputs[0])
    if lin is None or not lin.is_plain("MatMul") or not _numbers_read_by(graph, lin.outputs[0], users, rs):
        return None
    if any(k.startswith(("perm_", "fused_")) and k != "fused_add" for k in lin.attrs):
        return None
    w = graph.constants.get(lin.inputs[1])
    if w is None or w.ndim != 2 or w.dtype != np.float32:
        return None
    if lin.attrs.get("fused_add"):
        b = graph.constants.get(lin.inputs[2]) if len(lin.inputs) > 2 else None
        if b is None or b.shape != (w.shape[1],) or b.dtype != w.dtype:
            return None
    xt, yt = graph.types.get(lin.inputs[0]), graph.types.get(lin.outputs[0])
    if xt is None or xt.shape is None or len(xt.shape) != 3 or yt is None or yt.shape is None:
        return None
    target = shape_value(graph, rs.inputs[1], producers)
    if target is None or len(target) != 4 or not all(isinstance(d, int) and d > 0 for d in target[2:]):
        return None
    allow_zero = int(rs.attrs.get("allowzero", 0))
    for want, got in zip(yt.shape[:2], target[:2]):
        if got != want and not (got == 0 and not allow_zero):
            return None
    heads, head_dim = target[2], target[3]
    if heads * head_dim != w.shape[1]:
        return None
    return lin, rs, heads, head_dim


def _match(graph: Graph, sm: Node, users, producers):
    """The nodes of one attention block ending in SoftmaxMatMul ``sm``, or None."""
    if sm.attrs.get("perm_b") != HEADS_PERM or sm.attrs.get("perm_y") != HEADS_PERM or len(sm.inputs) > 3:
        return None
    scores = producers.get(sm.inputs[0])
    if scores is None or not scores.is_plain("MatMul") or len(scores.inputs) != 2 \
            or scores.attrs.get("perm_a") != HEADS_PERM or set(scores.attrs) != {"perm_a"} \
            or graph.only_reader(scores.outputs[0], users) is not sm:
        return None
    kt = producers.get(scores.inputs[1])
    if kt is None or not kt.is_plain("Transpose") or [int(p) for p in kt.attrs.get("perm", [])] != KEYS_PERM \
            or graph.only_reader(kt.outputs[0], users) is not scores:
        return None
    q = _linear_heads(graph, scores.inputs[0], users, producers, scores)
    k = _linear_heads(graph, kt.inputs[0], users, producers, kt)
    v = _linear_heads(graph, sm.inputs[1], users, producers, sm)
    if q is None or k is None or v is None:
        return None
    x = q[0].inputs[0]
    if any(p[0].inputs[0] != x or p[2:] != q[2:] for p in (k, v)):
        return None
    if len({p[0].name for p in (q, k, v)}) != 3:
        return None
    return q, k, v, scores, kt


def _in_log2_units(a: np.ndarray) -> np.ndarray:
    """Q's weights or bias times log2 e: the scores come out in units of log2, for exp2."""
    return (a.astype(np.float64) * np.log2(np.e)).astype(a.dtype)


def _packed(graph: Graph, parts: list[np.ndarray], base: str) -> str:
    arr = np.ascontiguousarray(np.concatenate(parts, axis=-1))
    name = graph.fresh_name(base)
    graph.constants[name] = arr
    graph.types[name] = TensorType.of(arr)
    return name


@compile_pass("fuse-attention", stats=("fused_attention",))
def fuse_attention(graph: Graph, ctx: CompileContext) -> Graph:
    fused = 0
    removed: set[str] = set()
    replaced: dict[str, Node] = {}
    for sm in graph.nodes:
        if sm.op != "SoftmaxMatMul" or sm.domain != "aircc" or sm.name in removed:
            continue
        users, producers = graph.consumers(), graph.producers()
        found = _match(graph, sm, users, producers)
        if found is None:
            continue
        q, k, v, scores, kt = found
        lins = [q[0], k[0], v[0]]
        ws = [graph.constants[n.inputs[1]] for n in lins]
        bs = [graph.constants[n.inputs[2]] if n.attrs.get("fused_add")
              else np.zeros(ws[i].shape[1], np.float32) for i, n in enumerate(lins)]
        ws[0], bs[0] = (_in_log2_units(a) for a in (ws[0], bs[0]))
        weights = _packed(graph, ws, f"{sm.name}/qkv.weight")
        bias = _packed(graph, bs, f"{sm.name}/qkv.bias")
        node = Node("Attention", [lins[0].inputs[0], weights, bias, *sm.inputs[2:]], list(sm.outputs),
                    {"heads": q[2], "base2": 1}, name=f"{sm.name}/attention", domain="aircc",
                    version=1)
        replaced[sm.name] = node
        for n in (*lins, q[1], k[1], v[1], scores, kt):
            removed.add(n.name)
            for out in n.outputs:
                graph.types.pop(out, None)
        fused += 1
    if fused:
        graph.nodes = [replaced.get(n.name, n) for n in graph.nodes if n.name not in removed]
        eliminate_dead_code(graph, ctx)   # the Reshape targets' shape arithmetic, Q/K/V's own weights
    ctx.count("fused_attention", fused)
    return graph

"""Pass ``fold-constants``: evaluate at compile time what only depends on constants.

A node folds when every input it reads is a constant (or it has none, like
Constant) and its op allows folding; its outputs become constants and the
node goes away.  ``Shape``/``Size`` of a value whose shape is fully static
fold too, whatever produced the value.  This is what turns the light models'
``ConstantOfShape`` weight builders into plain weights.
"""
from __future__ import annotations

import numpy as np

from aircc.executor.kernels.registry import lookup

from ..ir.graph import Graph, Node, TensorType
from .infer_shapes import infer_node

#: Folding may not create constants larger than this (bytes).
MAX_FOLDED_BYTES = 1 << 30


def _static_shape_value(graph: Graph, node: Node) -> np.ndarray | None:
    t = graph.types.get(node.inputs[0])
    if t is None or not t.is_static:
        return None
    if node.op == "Size":
        return np.array(t.numel, dtype=np.int64)
    shape = list(t.shape)  # type: ignore[arg-type]
    rank = len(shape)
    start = node.attrs.get("start", 0)
    end = node.attrs.get("end", rank)
    start = max(0, min(rank, start + rank if start < 0 else start))
    end = max(0, min(rank, end + rank if end < 0 else end))
    return np.array(shape[start:end], dtype=np.int64)


def evaluate(graph: Graph, node: Node) -> list[np.ndarray]:
    """Run a node's kernel on its constant inputs, in host memory."""
    spec = lookup(node.op, node.version, node.domain, node.name)
    out_types = infer_node(graph, node)
    ins = [graph.constants[i] if i else None for i in node.inputs]
    outs = [np.empty(t.shape, dtype=t.dtype) for t in out_types]
    tiling = spec.tiling([graph.types.get(i) if i else None for i in node.inputs], node.attrs) \
        if spec.tiling else {}
    ws_bytes = int(tiling.get("workspace", 0))
    ws = np.empty(ws_bytes, dtype=np.uint8) if ws_bytes else None
    spec.kernel(ins, outs, node.attrs, tiling, ws)
    return outs


def _foldable(graph: Graph, node: Node) -> bool:
    if node.regions or node.has_side_effects:
        return False
    spec = lookup(node.op, node.version, node.domain, node.name)
    if not spec.foldable or spec.kernel is None:
        return False
    if not all(i == "" or i in graph.constants for i in node.inputs):
        return False
    for o in node.outputs:
        t = graph.types.get(o) if o else None
        if o and (t is None or not t.is_static or t.nbytes > MAX_FOLDED_BYTES):
            return False
    return True


def fold_constants(graph: Graph) -> Graph:
    """Replace constant-only nodes by the constants they compute."""
    kept: list[Node] = []
    folded = 0
    for node in graph.nodes:
        for region in node.regions:
            fold_constants(region)
        values = None
        if node.op in ("Shape", "Size"):
            v = _static_shape_value(graph, node)
            values = None if v is None else [v]
        if values is None and _foldable(graph, node):
            values = evaluate(graph, node)
        if values is None:
            kept.append(node)
            continue
        for name, v in zip(node.outputs, values):
            if name:
                graph.constants[name] = v
                graph.types[name] = TensorType.of(v)
        folded += 1
    graph.nodes = kept
    graph.meta.setdefault("stats", {})["folded_nodes"] = \
        graph.meta.get("stats", {}).get("folded_nodes", 0) + folded
    return graph

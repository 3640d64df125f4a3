"""Pass ``mask-fill-to-add``: scores whose masked entries are replaced before a Softmax get the
mask added instead.

Older exports write attention's mask as ``masked_fill``: ``Softmax(Where(mask, fill,
scores))`` (or ``Where(keep, scores, fill)``).  With a fill of -inf, or one so large
(at most -1e30) that adding any score of magnitude below 1e22 rounds back to it, that
is ``Softmax(scores + Where(mask, fill, 0))`` entry by entry, for finite scores: the
form ``fuse-add-softmax`` and the attention fusions take, with a mask of the
condition's shape (one row per key for a padding mask) instead of the scores'.
Both broadcast the condition and the scores alike.  Matched when the Where's only
reader is a Softmax and the fill is a constant of one element and the scores' float
dtype.
Counted as ``mask_fills_to_add``.  Run before ``fuse-add-softmax``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from aircc.errors import AirccError

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass
from .infer_shapes import infer_node

#: A fill at most this adds to any score of magnitude below 1e22 as itself (float32).
FILL_LIMIT = -1e30
FLOAT_TYPES = ("float32", "float64")


def _fill_branch(graph: Graph, where: Node) -> Optional[int]:
    """Which branch of ``where`` (1 or 2) holds the fill, if the other holds the scores."""
    for k in (1, 2):
        fill, scores = graph.constants.get(where.inputs[k]), where.inputs[3 - k]
        ts = graph.types.get(scores)
        if fill is None or fill.size != 1 or scores in graph.constants or ts is None \
                or ts.dtype not in FLOAT_TYPES or str(fill.dtype) != ts.dtype:
            continue
        if float(fill.reshape(-1)[0]) <= FILL_LIMIT:
            return k
    return None


@compile_pass("mask-fill-to-add", stats=("mask_fills_to_add",))
def mask_fill_to_add(graph: Graph, ctx: CompileContext) -> Graph:
    users = graph.consumers()
    after: dict[str, Node] = {}
    for where in graph.nodes:
        if not where.is_plain("Where") or len(where.inputs) != 3:
            continue
        sm = graph.only_reader(where.outputs[0], users)
        k = _fill_branch(graph, where) if sm is not None and sm.is_plain("Softmax") else None
        if k is None:
            continue
        scores, fill = where.inputs[3 - k], graph.constants[where.inputs[k]]
        zero = graph.fresh_name(f"{where.name}.zero")
        graph.constants[zero] = np.zeros((), fill.dtype)
        graph.types[zero] = TensorType.of(graph.constants[zero])
        mask = graph.fresh_name(f"{where.outputs[0]}.mask")
        where.inputs[3 - k] = zero
        out = where.outputs[0]
        where.outputs[0] = mask
        graph.types[mask] = graph.types[out]
        after[where.name] = Node("Add", [scores, mask], [out], {}, name=f"{where.name}/add",
                                 version=where.version)
    order: list[Node] = []
    for n in graph.nodes:
        order.append(n)
        if n.name in after:
            order.append(after[n.name])
    graph.nodes = order
    for where_name in after:                     # the mask has the condition's shape
        where = graph.node(where_name)
        try:
            graph.types[where.outputs[0]] = infer_node(graph, where)[0]
        except AirccError:
            pass                                 # typed by the next infer-shapes
    ctx.count("mask_fills_to_add", len(after))
    return graph


"""Values of shape computations, as far as the types tell them.

Exporters build a Reshape's target at run time from the shapes of other
values: ``Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)),
[heads], [head_dim])``.  With symbolic dims the target is no constant, but its
entries are still known to be x's first dim, x's second dim, and two ints.
:func:`shape_value` follows such a computation through the graph and gives its
entries as dims (ints, or the symbols of the shapes they came from), which a
fusion can compare with the dims of other values.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.graph import Dim, Graph, Node

#: Ops whose (0-d or 1-d integer) output entries follow from their inputs' entries.
_FOLLOWED = ("Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Identity")


def shape_value(graph: Graph, value: str, producers: dict[str, Node] | None = None,
                depth: int = 16) -> Optional[list[Dim]]:
    """The entries of the 0-d or 1-d integer ``value`` as dims, or None when some entry
    is not known from constants and types alone (a 0-d value gives one entry)."""
    producers = graph.producers() if producers is None else producers
    const = graph.constants.get(value)
    if const is not None:
        if const.ndim > 1 or const.dtype.kind not in "iu":
            return None
        return [int(v) for v in np.asarray(const).reshape(-1)]
    node = producers.get(value)
    if node is None or node.domain or node.op not in _FOLLOWED or depth <= 0:
        return None
    ins = [shape_value(graph, i, producers, depth - 1) if i else None for i in node.inputs]
    if node.op == "Shape":
        t = graph.types.get(node.inputs[0])
        if t is None or t.shape is None:
            return None
        dims = list(t.shape)
        start, end = int(node.attrs.get("start", 0)), node.attrs.get("end")
        return dims[start:None if end is None else int(end)]
    if node.op == "Gather":
        data, idx = ins[0], graph.constants.get(node.inputs[1])
        if data is None or idx is None or idx.ndim > 1 or int(node.attrs.get("axis", 0)) != 0:
            return None
        picked = [int(i) for i in np.asarray(idx).reshape(-1)]
        if any(not -len(data) <= i < len(data) for i in picked):
            return None
        return [data[i] for i in picked]
    if node.op in ("Unsqueeze", "Squeeze", "Cast", "Identity"):
        return ins[0]           # 0-d <-> [1]: the entries stay
    if node.op == "Concat":
        if any(v is None for v in ins) or int(node.attrs.get("axis", 0)) not in (0, -1):
            return None
        return [d for v in ins for d in v]
    return None

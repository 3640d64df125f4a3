"""Values of shape computations, as far as the types tell them.

Exporters build a Reshape's target at run time from the shapes of other
values: ``Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)),
[heads], [head_dim])``.  With symbolic dims the target is no constant, but its
entries are still known to be x's first dim, x's second dim, and two ints.
:func:`shape_value` follows such a computation through the graph and gives its
entries as dims (ints, or the symbols of the shapes they came from), which a
fusion can compare with the dims of other values.  Arithmetic is followed where its
result is still a dim: on ints (``Div(Gather(Shape(x), 2), heads)`` is the head size),
or leaving a symbol as it is (``Mul(S, 1)``); a symbolic product is not a dim.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.graph import Dim, Graph, Node

#: Ops whose (0-d or 1-d integer) output entries follow from their inputs' entries.
_FOLLOWED = ("Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Identity", "Reshape",
             "Slice", "Add", "Sub", "Mul", "Div", "Mod")

#: Binary ops on entries: (fn on ints, the operand that leaves a symbol unchanged).
_ARITHMETIC = {"Add": (lambda a, b: a + b, 0), "Sub": (lambda a, b: a - b, 0),
               "Mul": (lambda a, b: a * b, 1),
               "Div": (lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1), 1),
               "Mod": (lambda a, b: a % b, None)}


def shape_value(graph: Graph, value: str, producers: dict[str, Node] | None = None,
                depth: int = 16) -> Optional[list[Dim]]:
    """The entries of the 0-d or 1-d integer ``value`` as dims, or None when some entry
    is not known from constants and types alone (a 0-d value gives one entry)."""
    entries = shape_entries(graph, value, producers, depth)
    return None if entries is None or any(d is None for d in entries) else entries


def shape_entries(graph: Graph, value: str, producers: dict[str, Node] | None = None,
                  depth: int = 16) -> Optional[list[Optional[Dim]]]:
    """:func:`shape_value` entry by entry: None for an entry not known, the whole None
    when not even the number of entries is."""
    producers = graph.producers() if producers is None else producers
    const = graph.constants.get(value)
    if const is not None:
        if const.ndim > 1 or const.dtype.kind not in "iu":
            return None
        return [int(v) for v in np.asarray(const).reshape(-1)]
    node = producers.get(value)
    if node is None or node.domain or node.op not in _FOLLOWED or depth <= 0:
        return _unknown(graph, value)
    ins = [shape_entries(graph, i, producers, depth - 1) if i else None for i in node.inputs]
    out = _follow(graph, node, ins)
    return _unknown(graph, value) if out is None else out


def _unknown(graph: Graph, value: str) -> Optional[list[Optional[Dim]]]:
    """Entries all unknown, as many as ``value``'s type says (None if it does not)."""
    t = graph.types.get(value)
    if t is None or t.shape is None or len(t.shape) > 1 or t.dtype not in ("int32", "int64"):
        return None
    if t.shape == ():
        return [None]
    return [None] * t.shape[0] if isinstance(t.shape[0], int) else None


def _follow(graph: Graph, node: Node, ins: list) -> Optional[list[Optional[Dim]]]:
    """The entries of ``node``'s output from its inputs' entries ``ins`` (integer outputs
    only: a float Div of two dims is no dim)."""
    t = graph.types.get(node.outputs[0])
    if t is None or t.dtype not in ("int32", "int64"):
        return None
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
    if node.op in ("Unsqueeze", "Squeeze", "Cast", "Identity", "Reshape"):
        return ins[0]           # 0-d <-> [1]: the entries stay
    if node.op == "Slice":
        return _sliced(graph, node, ins[0])
    if node.op in _ARITHMETIC and not node.attrs.get("fmod"):   # fmod=1: C's sign rule
        return _arithmetic(node.op, ins[0], ins[1])
    if node.op == "Concat":
        if any(v is None for v in ins) or int(node.attrs.get("axis", 0)) not in (0, -1):
            return None
        return [d for v in ins for d in v]
    return None


def _sliced(graph: Graph, node: Node, data: Optional[list]) -> Optional[list]:
    """The entries a Slice of a 1-D shape value keeps (constant starts, ends, axes, steps)."""
    args = [graph.constants.get(i) if i else None for i in node.inputs[1:5]]
    args += [None] * (4 - len(args))
    if data is None or args[0] is None or args[1] is None or any(a is not None and a.size != 1 for a in args):
        return None
    if args[2] is not None and int(args[2].reshape(-1)[0]) not in (0, -1):
        return None
    step = 1 if args[3] is None else int(args[3].reshape(-1)[0])
    if step == 0:
        return None
    n = len(data)
    start, end = (int(a.reshape(-1)[0]) for a in args[:2])
    start, end = (max(-n - 1, min(n, v)) for v in (start, end))   # past either end: clamped
    return data[slice(start, end, step)]


def _arithmetic(op: str, a: Optional[list], b: Optional[list]) -> Optional[list]:
    """Entries of an elementwise ``op`` on two shape values (one-entry operands broadcast);
    an entry that is not a dim (a symbolic product, say) is None."""
    if a is None or b is None or (len(a) != len(b) and 1 not in (len(a), len(b))):
        return None
    fn, neutral = _ARITHMETIC[op]
    out: list = []
    for x, y in zip(a * (len(b) if len(a) == 1 else 1), b * (len(a) if len(b) == 1 else 1)):
        if isinstance(x, int) and isinstance(y, int) and not (op in ("Div", "Mod") and y == 0):
            out.append(fn(x, y))
        elif x is not None and neutral is not None and y == neutral:
            out.append(x)
        elif y is not None and neutral is not None and op in ("Add", "Mul") and x == neutral:
            out.append(y)
        else:
            out.append(None)
    return out

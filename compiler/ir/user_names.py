"""Values as the user knows them, for error messages.

The compiler makes values of its own for the user's: a feed's device copy ``x.dev``
(a ``MemcpyH2D`` node named ``h2d_0``), a host value's copy, a value reordered into
another layout.  A message about one of them names the user's value it stands for.
"""
from __future__ import annotations

from aircc.ops import Trait, has_trait
from aircc.ops.device import MEMCPY_H2D

from .graph import Graph, Node


def user_value(graph: Graph, value: str, producers: dict[str, Node] | None = None) -> str:
    """``value`` in an error message: ``input 'x'`` for a graph input or a device copy of
    one, ``'v' (output of node 'n')`` for a node's output (a copy: of the value copied)."""
    producers = graph.producers() if producers is None else producers
    seen: set[str] = set()
    while value not in seen:
        seen.add(value)
        if value in graph.inputs:
            return f"input '{value}'"
        node = producers.get(value)
        if node is None:
            return f"'{value}'"
        if node.op == MEMCPY_H2D and has_trait(node.op, Trait.INTERNAL, node.domain):
            value = node.inputs[0]
            continue
        return f"'{value}' (output of node '{node.name}')"
    return f"'{value}'"

"""IR invariants, checked after every pass.

- SSA: every value is defined once (graph input, constant, or node output);
- every use refers to a value defined earlier in the region or in an
  enclosing region (captured values), so ``nodes`` is a topological order;
- every defined value has a type, and constants' types match their arrays;
- node names are unique; graph outputs are defined;
- once streams are assigned, every node has one, and each EventWait has a
  matching EventRecord earlier in the order.
"""
from __future__ import annotations

from aircc.errors import VerificationError
from aircc.formats.kinds import Placement
from aircc.ops import device

from .graph import Graph, TensorType


def verify(graph: Graph, *, outer: frozenset[str] = frozenset(), require_types: bool = True) -> None:
    """Raise :class:`VerificationError` on the first broken invariant."""
    errors = list(_check(graph, outer, require_types))
    if errors:
        shown = "; ".join(errors[:10])
        more = f" (+{len(errors) - 10} more)" if len(errors) > 10 else ""
        raise VerificationError(f"graph @{graph.name}: {shown}{more}")


def _check(graph: Graph, outer: frozenset[str], require_types: bool):
    defined: set[str] = set()

    def define(name: str, what: str):
        if name in defined:
            yield f"value '{name}' is defined more than once ({what})"
        defined.add(name)
        if require_types and name not in graph.types:
            yield f"value '{name}' ({what}) has no type"

    for name in graph.inputs:
        yield from define(name, "graph input")
    for name, arr in graph.constants.items():
        yield from define(name, "constant")
        t = graph.types.get(name)
        if t is not None and t != TensorType.of(arr):
            yield f"constant '{name}' is typed {t} but holds {arr.dtype}{list(arr.shape)}"

    names: set[str] = set()
    records: set[int] = set()
    streams_assigned = any("stream" in n.meta for n in graph.nodes)
    for node in graph.nodes:
        if not node.name:
            yield f"a {node.op} node has no name"
        elif node.name in names:
            yield f"node name '{node.name}' is used twice"
        names.add(node.name)
        for i in node.inputs:
            if i and i not in defined and i not in outer:
                yield f"node '{node.name}' ({node.op}) uses '{i}' before it is defined"
        for region in node.regions:
            yield from _check(region, outer | frozenset(defined), require_types)
        for o in node.outputs:
            if o:
                yield from define(o, f"output of '{node.name}'")
        if streams_assigned and "stream" not in node.meta and node.placement is Placement.DEVICE:
            yield f"node '{node.name}' ({node.op}) has no stream while others do"
        if node.op == device.EVENT_RECORD and node.domain == device.DOMAIN:
            records.add(node.attrs["event"])
        elif node.op == device.EVENT_WAIT and node.domain == device.DOMAIN \
                and node.attrs["event"] not in records:
            yield f"EventWait '{node.name}' waits on event {node.attrs['event']} before it is recorded"
    for o in graph.outputs:
        if o not in defined and o not in outer:
            yield f"graph output '{o}' is not defined"

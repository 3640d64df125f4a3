"""Pass ``fuse-channel-shuffle``: ShuffleNet's channel shuffle becomes one node.

Exporters write a channel shuffle of ``x: (N, C, H, W)`` in ``groups`` groups as::

    Reshape(x, (N, groups, C / groups, H, W)) -> Transpose(perm 0 2 1 3 4) -> Reshape(x's shape)

(and the same around any one axis of any rank).  The three nodes become
``aircc.ChannelShuffle(x) {axis, groups}``: one copy instead of a copy and two views,
and above all an op ``plan-layouts`` can keep inside a channels-last region by moving
its axis, where the 5-D Transpose would cut the region in two (two layout reorders
around every shuffle).  Counted as ``fused_channel_shuffles``.  Run before
``plan-layouts``.
"""
from __future__ import annotations

from typing import Optional

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass


def _static(graph: Graph, value: str) -> Optional[tuple[int, ...]]:
    t = graph.types.get(value)
    if t is None or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return tuple(t.shape)


def _split_axis(before: tuple[int, ...], split: tuple[int, ...]) -> Optional[tuple[int, int]]:
    """(axis, groups) when ``split`` is ``before`` with one axis split in two, else None."""
    if len(split) != len(before) + 1:
        return None
    for axis in range(len(before)):
        if before[:axis] == split[:axis] and before[axis + 1:] == split[axis + 2:] \
                and split[axis] * split[axis + 1] == before[axis] and split[axis] > 1 \
                and split[axis + 1] > 1:
            return axis, split[axis]
    return None


def _match(graph: Graph, first: Node, users) -> Optional[tuple[Node, Node, int, int]]:
    """(transpose, last reshape, axis, groups) when ``first`` begins a channel shuffle."""
    x = first.inputs[0]
    before, split = _static(graph, x), _static(graph, first.outputs[0])
    if before is None or split is None or len(first.inputs) < 2 or first.inputs[1] not in graph.constants:
        return None
    found = _split_axis(before, split)
    if found is None:
        return None
    axis, groups = found
    transpose = graph.only_reader(first.outputs[0], users)
    if transpose is None or not transpose.is_plain("Transpose"):
        return None
    swap = list(range(len(split)))
    swap[axis], swap[axis + 1] = axis + 1, axis
    if [int(p) for p in transpose.attrs.get("perm", [])] != swap:
        return None
    last = graph.only_reader(transpose.outputs[0], users)
    if last is None or not last.is_plain("Reshape") or _static(graph, last.outputs[0]) != before:
        return None
    return transpose, last, axis, groups


@compile_pass("fuse-channel-shuffle", stats=("fused_channel_shuffles",))
def fuse_channel_shuffle(graph: Graph, ctx: CompileContext) -> Graph:
    users = graph.consumers()
    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    for node in graph.nodes:
        if not node.is_plain("Reshape") or node.name in removed:
            continue
        found = _match(graph, node, users)
        if found is None:
            continue
        transpose, last, axis, groups = found
        removed.update((node.name, transpose.name, last.name))
        for m in (node, transpose):
            graph.types.pop(m.outputs[0], None)
        replaced[last.name] = Node("ChannelShuffle", [node.inputs[0]], [last.outputs[0]],
                                   {"axis": axis, "groups": int(groups)},
                                   name=f"{transpose.name}/shuffle", domain="aircc", version=1)
    graph.nodes = [replaced.get(n.name, n) for n in graph.nodes
                   if n.name not in removed or n.name in replaced]
    ctx.count("fused_channel_shuffles", len(replaced))
    return graph


"""Pass ``insert-memcpy``: make host<->device transfers explicit.

Each runtime input ``x`` gets ``%x.dev = MemcpyH2D(%x) {binding=i}`` and every
reader of ``x`` reads ``x.dev``; each graph output gets a ``MemcpyD2H(%y)
{binding=j}``, a side-effect op with no result.  After this pass every value
a kernel touches lives in device memory.
"""
from __future__ import annotations

from aircc.ops.device import MEMCPY_D2H, MEMCPY_H2D

from ..context import CompileContext
from ..ir.graph import Graph, Node, device_node, is_host_only
from ..passes.base import compile_pass


def device_name(graph: Graph, name: str) -> str:
    return graph.fresh_name(f"{name}.dev")


@compile_pass("insert-memcpy")
def insert_memcpy(graph: Graph, ctx: CompileContext) -> Graph:
    """A MemcpyH2D after every runtime input, a MemcpyD2H for every output."""
    head: list[Node] = []
    for i, name in enumerate(graph.inputs):
        if is_host_only(graph.types[name].dtype):
            continue            # strings and sequences stay on the host
        dev = device_name(graph, name)
        graph.types[dev] = graph.types[name]
        for n in graph.walk():
            n.inputs = [dev if x == name else x for x in n.inputs]
        head.append(device_node(MEMCPY_H2D, [name], [dev], {"binding": i},
                                graph.fresh_name(f"h2d_{i}")))
    # graph outputs that were inputs must be read from the device copy too
    dev_of = {n.inputs[0]: n.outputs[0] for n in head}
    tail = [device_node(MEMCPY_D2H, [dev_of.get(name, name)], [], {"binding": j},
                        graph.fresh_name(f"d2h_{j}"))
            for j, name in enumerate(graph.outputs)]
    graph.nodes = head + graph.nodes + tail
    return graph

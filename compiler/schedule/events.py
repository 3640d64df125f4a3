"""Pass ``insert-events``: Signal/Wait on every cross-stream dependency, pruned.

Walking the topological order with a vector clock per stream, a dependency
``p -> n`` across streams needs a wait only if the consumer's stream does not
already know (through earlier waits, transitively) that ``p`` finished, and
only if no other needed wait of ``n`` already implies it.  Each kept edge
becomes one ``EventRecord`` right after ``p`` on its stream and one
``EventWait`` right before ``n`` on its stream.  Events are numbered densely
from 0 in recording order.
"""
from __future__ import annotations

from aircc.ops.device import EVENT_RECORD, EVENT_WAIT

from ..context import CompileContext
from ..ir.graph import Graph, Node, device_node
from ..passes.base import compile_pass
from .streams import dataflow_dag


@compile_pass("insert-events")
def insert_events(graph: Graph, ctx: CompileContext) -> Graph:
    """An EventRecord / EventWait pair on every cross-stream dependency no other implies."""
    nodes = graph.nodes
    nstreams = graph.meta.get("streams", 1)
    dag = dataflow_dag(graph)
    stream = [n.meta["stream"] for n in nodes]
    pos = [0] * len(nodes)
    count = [0] * nstreams
    for k in range(len(nodes)):
        pos[k] = count[stream[k]]
        count[stream[k]] += 1

    clock = [[-1] * nstreams for _ in range(nstreams)]
    after: list[list[int]] = [[]] * len(nodes)   # vector clock right after node k
    edges: list[tuple[int, int]] = []
    for k in range(len(nodes)):
        s = stream[k]
        needed = [p for p in sorted(set(dag.predecessors(k)))
                  if stream[p] != s and clock[s][stream[p]] < pos[p]]
        needed = [p for p in needed
                  if not any(q != p and after[q][stream[p]] >= pos[p] for q in needed)]
        for p in needed:
            edges.append((p, k))
            clock[s] = [max(a, b) for a, b in zip(clock[s], after[p])]
        clock[s][s] = pos[k]
        after[k] = list(clock[s])

    # edges sorted by producer position are in recording order: ids are dense from 0
    edges.sort()
    records: dict[int, list[int]] = {}
    waits: dict[int, list[int]] = {}
    for e, (p, k) in enumerate(edges):
        records.setdefault(p, []).append(e)
        waits.setdefault(k, []).append(e)

    def sync(op: str, e: int, k: int) -> Node:
        p, q = edges[e]
        kind = "record" if op == EVENT_RECORD else "wait"
        return device_node(op, [], [], {"event": e, "src": nodes[p].name, "dst": nodes[q].name},
                           f"{kind}_e{e}", stream[k])

    order: list[Node] = []
    for k, node in enumerate(nodes):
        order.extend(sync(EVENT_WAIT, e, k) for e in waits.get(k, []))
        order.append(node)
        order.extend(sync(EVENT_RECORD, e, k) for e in records.get(k, []))
    graph.nodes = order
    graph.meta["events"] = len(edges)
    return graph

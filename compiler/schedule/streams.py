"""Pass ``assign-streams``: put independent branches on different streams.

Data-flow analysis over the DAG (networkx): walking a topological order, a
node continues the stream of a predecessor that is still that stream's last
node (so chains stay on one stream and need no events); a node that cannot
continue a chain opens a new stream while fewer than ``max_streams`` exist,
it writes at least ``min_branch_bytes`` (smaller ones stay with a
predecessor) and it does not run on the matrix engine (a branch led by a
Conv or MatMul stays with a predecessor too: the device's matrix engine
already spans every core, so a second stream of GEMMs only queues for it and
pays the events), nor on a backend whose every kernel spans the cores
(``KernelBackend.kernels_span_cores``, oneDNN's OpenMP teams: on 2 CPUs Inception
v1 ran 19.4 ms on 4 streams, 16.8 on one); ``split_matrix_branches`` lets them open
streams as well.  Otherwise it joins the stream with the least work so far.  Host-to-device
copies go on stream 0; other nodes without predecessors (the entry points
of a body's parallel branches) are treated like new branches.  Stream ids are dense
from 0 and recorded in ``node.meta["stream"]``.
"""
from __future__ import annotations

import networkx as nx

from aircc.errors import CompileOptionError
from aircc.ops import device

from ..context import CompileContext
from ..ir.graph import Graph, Node
from ..passes.base import compile_pass

DEFAULT_MAX_STREAMS = 4
#: A branch opens a stream of its own only if its first node writes at least this many bytes
#: (as the graph engine drops multi-stream that brings no benefit: handing small work to
#: another stream costs more than it saves).  Symbolic sizes count as small.
DEFAULT_MIN_BRANCH_BYTES = 128 << 10


def dataflow_dag(graph: Graph) -> nx.DiGraph:
    """Nodes of ``graph`` (by index) with an edge for every value one reads from another."""
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(graph.nodes)))
    producer = {o: k for k, n in enumerate(graph.nodes) for o in n.outputs if o}
    for k, n in enumerate(graph.nodes):
        reads = set(i for i in n.inputs if i)
        for r in n.regions:   # a body reads values of the enclosing graph too
            reads |= {i for b in r.walk() for i in b.inputs if i} | set(r.outputs)
        for i in reads:
            if i in producer and producer[i] != k:
                dag.add_edge(producer[i], k)
    return dag


def _work(node: Node, graph: Graph) -> int:
    """A rough cost: bytes the node writes (at least 1)."""
    total = 1
    for o in node.outputs:
        t = graph.types.get(o)
        if t is not None and t.is_static:
            total += t.nbytes
    return total


def _on_matrix_engine(node: Node) -> bool:
    return node.definition.engine == "cube"


@compile_pass("assign-streams")
def assign_streams(graph: Graph, ctx: CompileContext) -> Graph:
    """Put every node on a stream (``options.streams``, ``min_branch_bytes`` and
    ``split_matrix_branches`` of the context decide how many and which)."""
    options = ctx.options
    cap = DEFAULT_MAX_STREAMS if options.streams is None else options.streams
    threshold = DEFAULT_MIN_BRANCH_BYTES if options.min_branch_bytes is None else options.min_branch_bytes
    split_matrix = options.split_matrix_branches
    spans_cores = ctx.backend.kernels_span_cores
    if cap < 1:
        raise CompileOptionError(f"--streams must be at least 1, got {cap}")
    dag = dataflow_dag(graph)
    if not nx.is_directed_acyclic_graph(dag):
        raise CompileOptionError("the graph has a cycle; it cannot be scheduled")
    tail: list[int] = []     # stream -> index of its last node
    load: list[int] = []     # stream -> work assigned
    stream_of: dict[int, int] = {}
    for k in range(len(graph.nodes)):  # graph.nodes is a topological order
        preds = sorted(dag.predecessors(k))
        chains = [p for p in preds if tail[stream_of[p]] == p]
        if not preds and (not tail or graph.nodes[k].op == device.MEMCPY_H2D):
            s = 0 if tail else None
        elif chains:
            s = stream_of[max(chains, key=lambda p: load[stream_of[p]])]
        elif preds and not split_matrix and (spans_cores or _on_matrix_engine(graph.nodes[k])):
            s = stream_of[preds[-1]]       # a GEMM branch (any, if kernels span the cores): no stream
        elif len(tail) < cap and _work(graph.nodes[k], graph) >= threshold:
            s = None
        elif len(tail) < cap:
            s = stream_of[preds[-1]] if preds else 0      # too small to be worth a stream
        else:
            s = min(range(len(tail)), key=lambda t: load[t])
        if s is None:
            tail.append(k)
            load.append(0)
            s = len(tail) - 1
        stream_of[k] = s
        tail[s] = k
        load[s] += _work(graph.nodes[k], graph)
    for k, node in enumerate(graph.nodes):
        node.meta["stream"] = stream_of[k]
    graph.meta["streams"] = max(1, len(tail))
    return graph

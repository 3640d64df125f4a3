"""Pass ``place-host-ops``: run small shape computations on the host.

In dynamic mode, ops that compute shapes (Shape, Gather on a shape, Concat,
Unsqueeze, Range, Slice, Cast, ...) work on tiny host tensors, so that the
InferShape of a value-dependent op (Reshape, Expand, ConstantOfShape, ...)
never waits on a device-to-host copy.  As in the graph engine's host CPU
engine, ``Shape``/``Size`` always run on the host (they only read a shape),
and another op does when all it reads is host data and its result is small:
at most 8 elements, or a 1-D integer tensor (a shape or index vector).

Host values that a device kernel reads as data get an explicit
``MemcpyH2D {from_host=1}``; value inputs (a Reshape's shape, say) are read
on the host by InferShape and need no copy.
"""
from __future__ import annotations

from aircc.executor.kernels.registry import node_spec

from ..ir.graph import Graph, Node, is_host_only

SHAPE_ONLY_OPS = frozenset({"Shape", "Size"})
HOST_CAPABLE_OPS = frozenset({
    "Gather", "Concat", "Unsqueeze", "Squeeze", "Range", "Slice", "Cast", "Reshape", "Identity",
    "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Min", "Max", "Floor", "Ceil", "Sqrt",
    "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Where",
    "ConstantOfShape", "Expand", "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin", "Tile",
    "Flatten", "Sign", "Transpose",
})
SMALL_ELEMENTS = 8


def _small(graph: Graph, value: str) -> bool:
    t = graph.types.get(value)
    if t is None or t.shape is None:
        return False
    if t.is_static and t.numel <= SMALL_ELEMENTS:
        return True
    return len(t.shape) <= 1 and (t.dtype.startswith("int") or t.dtype.startswith("uint")
                                  or t.dtype == "bool")


def _touches_host_only(graph: Graph, node: Node) -> bool:
    values = [v for v in [*node.inputs, *node.outputs] if v]
    return any(is_host_only(graph.types[v].dtype) for v in values if graph.types.get(v) is not None)


def place_host_ops(graph: Graph, host_values: set[str] | None = None) -> Graph:
    """Mark host ops with ``meta["placement"] = "host"``, others ``"device"``.

    ``host_values``: values already on the host (from an enclosing scope)."""
    host_values = set(host_values or ())
    host_values.update(i for i in graph.inputs if is_host_only(graph.types[i].dtype))
    for node in graph.nodes:
        on_host = False
        if node.op in SHAPE_ONLY_OPS or _touches_host_only(graph, node):
            on_host = True      # strings and sequences: run by the host, D2H for device inputs
        elif node.op in HOST_CAPABLE_OPS and not node.regions:
            reads = [i for i in node.inputs if i]
            on_host = (all(i in host_values or i in graph.constants for i in reads)
                       and all(_small(graph, o) for o in node.outputs if o))
        node.meta["placement"] = "host" if on_host else "device"
        if on_host:
            host_values.update(o for o in node.outputs if o)
    _copy_host_data_to_device(graph, host_values)
    graph.meta["host_ops"] = sum(1 for n in graph.nodes if n.meta["placement"] == "host")
    graph.meta["host_values"] = host_values
    return graph


def schedule_regions(graph: Graph, max_streams: int | None, _count: dict | None = None) -> Graph:
    """Place and schedule the bodies of If/Loop/Scan nodes (dynamic mode), recursively.

    Body streams map onto the model's streams; body events are numbered after
    those already used, so ids stay dense over the whole model."""
    count = _count if _count is not None else {
        "events": graph.meta.get("events", 0), "streams": graph.meta.get("streams", 1),
        "host_ops": graph.meta.get("host_ops", 0)}
    for node in graph.nodes:
        for region in node.regions:
            host = set(graph.meta.get("host_values", ()))
            if node.op == "Loop":
                host.update(region.inputs[:2])      # iteration number and condition
            place_host_ops(region, host)
            region.meta["min_branch_bytes"] = graph.meta.get("min_branch_bytes")
            region.meta["split_matrix_branches"] = graph.meta.get("split_matrix_branches", False)
            schedule_device_nodes(region, max_streams)
            for n in region.nodes:
                if n.op in ("EventRecord", "EventWait"):
                    n.attrs["event"] += count["events"]
                    n.name = f"{n.name}_{node.name}"
            count["events"] += region.meta.get("events", 0)
            count["streams"] = max(count["streams"], region.meta.get("streams", 1))
            count["host_ops"] += region.meta.get("host_ops", 0)
            region.meta["host_values"] = host | region.meta.get("host_values", set())
            schedule_regions(region, max_streams, count)
    if _count is None:
        graph.meta.update(count)
    return graph


def _copy_host_data_to_device(graph: Graph, host_values: set[str]) -> None:
    copies: dict[str, str] = {}
    order: list[Node] = []
    for node in graph.nodes:
        if node.meta["placement"] == "device" and node.op not in ("MemcpyH2D", "MemcpyD2H"):
            spec = node_spec(node)
            for k, i in enumerate(node.inputs):
                if i in host_values and k not in spec.value_inputs:
                    if i not in copies:
                        dev = graph.fresh_name(f"{i}.dev")
                        graph.types[dev] = graph.types[i]
                        copies[i] = dev
                        order.append(Node("MemcpyH2D", [i], [dev], {"from_host": 1},
                                          name=graph.fresh_name(f"h2d_{i}"),
                                          meta={"placement": "device"}))
                    node.inputs[k] = copies[i]
        if node.op == "MemcpyD2H" and node.inputs[0] in host_values:
            node.meta["placement"] = "host"   # the output is already on the host
        order.append(node)
    graph.nodes = order


def schedule_device_nodes(graph: Graph, max_streams: int | None) -> Graph:
    """Assign streams and insert events over the device nodes only; host nodes keep their place."""
    from .events import insert_events
    from .streams import assign_streams

    device = [n for n in graph.nodes if n.meta.get("placement", "device") != "host"]
    view = Graph(name=graph.name, nodes=device, types=graph.types, constants=graph.constants,
                 meta=graph.meta)
    insert_events(assign_streams(view, max_streams))
    chunks: dict[int, list[Node]] = {}
    waits: list[Node] = []
    last = None
    for n in view.nodes:
        if n.op == "EventWait":
            waits.append(n)
        elif n.op == "EventRecord":
            chunks[id(last)].append(n)
        else:
            chunks[id(n)], waits, last = waits + [n], [], n
    graph.nodes = [x for n in graph.nodes
                   for x in ([n] if n.meta.get("placement") == "host" else chunks[id(n)])]
    return graph

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

from aircc.formats.kinds import Placement
from aircc.ops import Trait
from aircc.ops.device import EVENT_RECORD, EVENT_WAIT, MEMCPY_D2H, MEMCPY_H2D, SYNC_OPS

from ..context import CompileContext
from ..ir.graph import Graph, Node, device_node, is_host_only
from ..passes.base import compile_pass
from .events import insert_events
from .streams import assign_streams

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


@compile_pass("place-host-ops")
def place_host_ops(graph: Graph, ctx: CompileContext) -> Graph:
    """Mark host ops ``Placement.HOST`` (``Node.placement``), others ``Placement.DEVICE`` (the main
    graph; bodies are placed by ``schedule-regions``)."""
    return place_region(graph)


def place_region(graph: Graph, host_values: set[str] | None = None) -> Graph:
    """:func:`place_host_ops` for one region; ``host_values``: values already on the host
    (from an enclosing scope)."""
    host_values = set(host_values or ())
    host_values.update(i for i in graph.inputs if is_host_only(graph.types[i].dtype))
    for node in graph.nodes:
        on_host = False
        definition = node.definition
        if definition.has(Trait.SHAPE_ONLY) or _touches_host_only(graph, node):
            on_host = True      # strings and sequences: run by the host, D2H for device inputs
        elif definition.has(Trait.HOST_CAPABLE) and not node.regions:
            reads = [i for i in node.inputs if i]
            on_host = (all(i in host_values or i in graph.constants for i in reads)
                       and all(_small(graph, o) for o in node.outputs if o))
        node.placement = Placement.HOST if on_host else Placement.DEVICE
        if on_host:
            host_values.update(o for o in node.outputs if o)
    _copy_host_data_to_device(graph, host_values)
    graph.meta["host_ops"] = sum(1 for n in graph.nodes if n.placement is Placement.HOST)
    graph.meta["host_values"] = host_values
    return graph


@compile_pass("schedule-regions")
def schedule_regions(graph: Graph, ctx: CompileContext) -> Graph:
    """Place and schedule the bodies of If/Loop/Scan nodes (dynamic mode), recursively.

    Body streams map onto the model's streams; body events are numbered after
    those already used, so ids stay dense over the whole model."""
    count = {"events": graph.meta.get("events", 0), "streams": graph.meta.get("streams", 1),
             "host_ops": graph.meta.get("host_ops", 0)}
    _schedule_bodies(graph, ctx, count)
    graph.meta.update(count)
    return graph


def _schedule_bodies(graph: Graph, ctx: CompileContext, count: dict) -> None:
    for node in graph.nodes:
        for region in node.regions:
            host = set(graph.meta.get("host_values", ()))
            if node.op == "Loop":
                host.update(region.inputs[:2])      # iteration number and condition
            place_region(region, host)
            schedule_device_nodes(region, ctx)
            for n in region.nodes:
                if n.op in SYNC_OPS:
                    n.attrs["event"] += count["events"]
                    n.name = f"{n.name}_{node.name}"
            count["events"] += region.meta.get("events", 0)
            count["streams"] = max(count["streams"], region.meta.get("streams", 1))
            count["host_ops"] += region.meta.get("host_ops", 0)
            region.meta["host_values"] = host | region.meta.get("host_values", set())
            _schedule_bodies(region, ctx, count)


def _copy_host_data_to_device(graph: Graph, host_values: set[str]) -> None:
    copies: dict[str, str] = {}
    order: list[Node] = []
    for node in graph.nodes:
        if node.placement is Placement.DEVICE and node.op not in (MEMCPY_H2D, MEMCPY_D2H):
            value_inputs = node.definition.value_inputs
            for k, i in enumerate(node.inputs):
                if i in host_values and k not in value_inputs:
                    if i not in copies:
                        dev = graph.fresh_name(f"{i}.dev")
                        graph.types[dev] = graph.types[i]
                        copies[i] = dev
                        order.append(device_node(MEMCPY_H2D, [i], [dev], {"from_host": 1},
                                                 graph.fresh_name(f"h2d_{i}"), placement=Placement.DEVICE))
                    node.inputs[k] = copies[i]
        if node.op == MEMCPY_D2H and node.inputs[0] in host_values:
            node.placement = Placement.HOST   # the output is already on the host
        order.append(node)
    graph.nodes = order


@compile_pass("schedule-device-nodes")
def schedule_device_nodes(graph: Graph, ctx: CompileContext) -> Graph:
    """Assign streams and insert events over the device nodes only; host nodes keep their place."""
    device = [n for n in graph.nodes if n.placement is Placement.DEVICE]
    view = Graph(name=graph.name, nodes=device, types=graph.types, constants=graph.constants,
                 meta=graph.meta)
    insert_events(assign_streams(view, ctx), ctx)
    chunks: dict[int, list[Node]] = {}
    waits: list[Node] = []
    last = None
    for n in view.nodes:
        if n.op == EVENT_WAIT:
            waits.append(n)
        elif n.op == EVENT_RECORD:
            chunks[id(last)].append(n)
        else:
            chunks[id(n)], waits, last = waits + [n], [], n
    graph.nodes = [x for n in graph.nodes
                   for x in ([n] if n.placement is Placement.HOST else chunks[id(n)])]
    return graph

"""Section ``exec_graph``: a dynamic model's Host Kernel execute graph.

Nodes are the model's ops (shared by every body, named by index); host kernels
are the host's work per run, in order: InferShape, Tiling, Alloc and Launch of
each device op, a Free after the last use of each buffer, a HostCompute per
host op, a Control kernel (with bodies of their own) per If, Loop or Scan.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .checks import Checker, stream_priorities
from .kinds import HostKernelKind, Impl, Placement
from .model_section import value_dtype
from .node_signature import check_signature
from .tasks import MAX_STREAMS

K = HostKernelKind
#: Host kernels that act on one node, and those that run on a stream.
NODE_KINDS = frozenset({K.INFER_SHAPE, K.TILING, K.HOST_COMPUTE, K.ALLOC, K.LAUNCH,
                        K.MEMCPY_H2D, K.MEMCPY_D2H, K.CONTROL})
STREAM_KINDS = frozenset({K.ALLOC, K.LAUNCH, K.MEMCPY_H2D, K.EVENT_RECORD, K.EVENT_WAIT})
#: Host kernels whose node must run on the device / on the host.
DEVICE_NODE_KINDS = frozenset({K.TILING, K.ALLOC, K.LAUNCH, K.MEMCPY_H2D})
#: Most control-flow bodies nested inside each other.
MAX_BODY_DEPTH = 32


@dataclass(slots=True)
class ValueType:
    dtype: str
    shape: tuple | None

    def to_payload(self) -> dict:
        return {"dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}


@dataclass(slots=True)
class ExecNode:
    """One op of the model."""

    op: str
    domain: str
    version: int
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict
    placement: Placement
    stream: int | None
    impl: Impl = Impl.NATIVE

    def to_payload(self) -> dict:
        return {"op": self.op, "domain": self.domain, "version": self.version, "name": self.name,
                "inputs": self.inputs, "outputs": self.outputs, "attrs": self.attrs,
                "placement": self.placement._value_, "stream": self.stream, "impl": self.impl._value_}


@dataclass(slots=True)
class HostKernel:
    """One piece of host work (see :class:`~aircc.formats.kinds.HostKernelKind`)."""

    kind: HostKernelKind
    node: int | None = None
    stream: int | None = None
    event: int | None = None
    values: list[str] = field(default_factory=list)
    """Alloc: the node's outputs to allocate; Free: the buffers to give back."""
    bodies: dict[str, "Body"] | None = None
    """Control: the op's bodies by attribute name."""

    def to_payload(self) -> dict:
        out: dict = {"kind": self.kind._value_}
        if self.node is not None:
            out["node"] = self.node
        if self.kind in STREAM_KINDS or self.kind in (K.MEMCPY_D2H, K.CONTROL):
            out["stream"] = self.stream
        if self.event is not None:
            out["event"] = self.event
        if self.kind in (K.ALLOC, K.FREE):
            out["values"] = list(self.values)
        if self.bodies is not None:
            out["bodies"] = {k: b.to_payload() for k, b in self.bodies.items()}
        return out


@dataclass(slots=True)
class Body:
    """A kernel list: the main graph's, or a body of a control kernel."""

    inputs: list[str]
    outputs: list[str]
    kernels: list[HostKernel]
    device_values: list[str]

    def to_payload(self) -> dict:
        return {"inputs": self.inputs, "outputs": self.outputs,
                "kernels": [k.to_payload() for k in self.kernels],
                "device_values": self.device_values}


@dataclass(slots=True)
class ExecGraphSection:
    """Section ``exec_graph``."""

    inputs: list[str]
    outputs: list[str]
    values: dict[str, ValueType]
    streams: int
    events: int
    host_ops: int
    nodes: list[ExecNode]
    kernels: list[HostKernel]
    device_values: list[str]
    priorities: list[int] = field(default_factory=list)
    """Each stream's priority (higher is served first; empty: all 0)."""

    def to_payload(self) -> dict:
        out = {"inputs": self.inputs, "outputs": self.outputs,
               "values": {k: v.to_payload() for k, v in self.values.items()},
               "streams": self.streams, "events": self.events, "host_ops": self.host_ops,
               "nodes": [n.to_payload() for n in self.nodes],
               "kernels": [k.to_payload() for k in self.kernels],
               "device_values": self.device_values}
        if any(self.priorities):
            out["priorities"] = list(self.priorities)
        return out

    @staticmethod
    def parse(payload: Any) -> "ExecGraphSection":
        return _Parser(Checker("exec_graph")).section(payload)


def body_inputs(kernels: list[HostKernel]) -> list[str]:
    """The inputs of every body of these kernels' control flow, nested bodies included."""
    out: list[str] = []
    stack = [kernels]
    while stack:
        for k in stack.pop():
            for b in (k.bodies or {}).values():
                out += b.inputs
                stack.append(b.kernels)
    return out


class _Parser:
    def __init__(self, c: Checker):
        self.c = c
        self.streams = self.events = 0
        self.nodes: list[ExecNode] = []
        self.values: dict[str, ValueType] = {}
        self.depth = 0

    def section(self, payload: Any) -> ExecGraphSection:
        c = self.c
        d = c.dict(payload, "")
        self.streams = c.int(d, "streams", "", lo=1, hi=MAX_STREAMS + 1)
        self.events = c.int(d, "events", "", lo=0)
        host_ops = c.int(d, "host_ops", "", lo=0)
        values = c.dict(c.get(d, "values", ""), "values")
        for name, t in values.items():
            w = f"values[{name!r}]"
            if not isinstance(name, str):
                c.fail("values", f"keys must be value names (str), got {name!r}")
            td = c.dict(t, w)
            self.values[name] = ValueType(value_dtype(c, td, "dtype", w), c.symbolic_shape(td, "shape", w))
        self.nodes = [self.node(x, f"nodes[{i}]")
                      for i, x in enumerate(c.list(c.get(d, "nodes", ""), "nodes"))]
        main = self.body(d, "")
        used = {n.stream for n in self.nodes} | {0}
        idle = sorted(set(range(self.streams)) - used)
        if idle:
            c.fail("streams", f"is {self.streams}, but no node runs on stream {idle[0]} (each "
                              f"stream is a device worker thread)")
        return ExecGraphSection(main.inputs, main.outputs, self.values, self.streams, self.events,
                                host_ops, self.nodes, main.kernels, main.device_values,
                                stream_priorities(c, d, self.streams))

    def node(self, x: Any, w: str) -> ExecNode:
        c = self.c
        d = c.dict(x, w)
        stream = c.optional_int(d, "stream", w, lo=0, hi=self.streams)
        node = ExecNode(c.str(d, "op", w), c.str(d, "domain", w), c.int(d, "version", w, lo=0),
                        c.str(d, "name", w), c.strs(d, "inputs", w), c.strs(d, "outputs", w),
                        dict(c.dict(c.get(d, "attrs", w), f"{w}.attrs")),
                        c.kind(d, "placement", w, Placement), stream,
                        c.kind(d, "impl", w, Impl) if "impl" in d else Impl.NATIVE)
        check_signature(c, w, f"node '{node.name}'", node.domain, node.op, node.version,
                        node.inputs, node.outputs, node.attrs)
        return node

    def body(self, d: Mapping, w: str) -> Body:
        c = self.c
        kernels = [self.kernel(k, f"{w}kernels[{i}]" if not w else f"{w}.kernels[{i}]")
                   for i, k in enumerate(c.list(c.get(d, "kernels", w), f"{w}kernels" if not w else f"{w}.kernels"))]
        device_values = c.strs(d, "device_values", w)
        self.known(device_values, f"{w}device_values" if not w else f"{w}.device_values")
        return Body(c.strs(d, "inputs", w), c.strs(d, "outputs", w), kernels, device_values)

    def known(self, names: list[str], w: str) -> None:
        for i, v in enumerate(names):
            if v not in self.values:
                self.c.fail(f"{w}[{i}]", f"names value {v!r}, which section 'exec_graph' does not type")

    def kernel(self, x: Any, w: str) -> HostKernel:
        c = self.c
        d = c.dict(x, w)
        kind = c.kind(d, "kind", w, HostKernelKind)
        k = HostKernel(kind)
        if kind in NODE_KINDS:
            k.node = c.int(d, "node", w, lo=0, hi=len(self.nodes))
            placement = self.nodes[k.node].placement
            if kind in DEVICE_NODE_KINDS and placement is not Placement.DEVICE:
                c.fail(f"{w}.node", f"{kind.value} of node {k.node}, which runs on the host")
            if kind is K.HOST_COMPUTE and placement is not Placement.HOST:
                c.fail(f"{w}.node", f"host_compute of node {k.node}, which runs on the device")
        if kind in STREAM_KINDS:
            k.stream = c.int(d, "stream", w, lo=0, hi=self.streams)
        elif kind in (K.MEMCPY_D2H, K.CONTROL):
            k.stream = c.optional_int(d, "stream", w, lo=0, hi=self.streams)
        if kind in (K.EVENT_RECORD, K.EVENT_WAIT):
            k.event = c.int(d, "event", w, lo=0, hi=self.events)
        if kind in (K.ALLOC, K.FREE):
            k.values = c.strs(d, "values", w)
            self.known(k.values, f"{w}.values")
        if kind is K.CONTROL:
            bodies = c.dict(c.get(d, "bodies", w), f"{w}.bodies")
            if bodies and self.depth >= MAX_BODY_DEPTH:
                c.fail(f"{w}.bodies", f"nest control flow more than {MAX_BODY_DEPTH} bodies deep")
            self.depth += 1
            k.bodies = {}
            for name, b in bodies.items():
                if not isinstance(name, str):
                    c.fail(f"{w}.bodies", f"keys must be attribute names (str), got {name!r}")
                k.bodies[name] = self.body(c.dict(b, f"{w}.bodies[{name!r}]"), f"{w}.bodies[{name!r}]")
            self.depth -= 1
        return k

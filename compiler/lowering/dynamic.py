"""Dynamic lowering: the Host Kernel execute graph.

Each device op becomes the host kernels InferShape, Tiling, AllocMem and
Launch, plus a Free after the launch of the last use of each buffer; a host
op becomes one HostCompute; EventWait/EventRecord and memcpy become launch
kernels on their streams.  An If, Loop or Scan becomes one Control kernel
whose bodies are kernel lists of their own: the host runs the control flow,
reading conditions and trip counts as it goes.  Shapes are left symbolic:
the runtime infers them, tiles (through its tiling cache) and allocates per
run.  Nodes of every body share one node table, so kernels name nodes by
index.
"""
from __future__ import annotations

import numpy as np

from aircc.formats.exec_graph import Body, ExecGraphSection, ExecNode, HostKernel, ValueType
from aircc.formats.kinds import HostKernelKind as K
from aircc.formats.kinds import Impl, Placement
from aircc.ops import Trait, device, has_trait

from ..ir.graph import Graph, Node


def _type(types: dict, name: str) -> ValueType:
    t = types[name]
    return ValueType(t.dtype, None if t.shape is None else tuple(t.shape))


def _captures(region: Graph) -> set[str]:
    """Values a region reads from enclosing scopes."""
    defined = set(region.inputs) | set(region.constants)
    defined.update(o for n in region.nodes for o in n.outputs)
    used = {i for n in region.walk() for i in n.inputs if i} | set(region.outputs)
    return used - defined


def _is_sync(n: Node) -> bool:
    return n.domain == device.DOMAIN and n.op in device.SYNC_OPS


def _is_device(n: Node) -> bool:
    return n.placement is Placement.DEVICE and not _is_sync(n)


class _Lowering:
    def __init__(self):
        self.nodes: list[ExecNode] = []
        self.types: dict = {}
        self.constants: dict[str, np.ndarray] = {}

    def body(self, graph: Graph, keep: set[str]) -> Body:
        """Kernels of one region; values in ``keep`` (its outputs) are not freed by it."""
        self.types.update(graph.types)
        self.constants.update({c: graph.constants[c] for c in graph.constants
                               if any(c in n.inputs for n in graph.walk()) or c in graph.outputs})
        reads: list[set[str]] = []
        for n in graph.nodes:
            r = {i for i in n.inputs if i}
            for region in n.regions:
                r |= _captures(region)
            reads.append(r)
        last_use: dict[str, int] = {}
        for k, r in enumerate(reads):
            for i in r:
                last_use[i] = k
        frees_after: dict[int, list[str]] = {}
        device_values: list[str] = []
        for k, n in enumerate(graph.nodes):
            if _is_device(n):
                for o in n.outputs:
                    if o and o not in keep:
                        device_values.append(o)
                        frees_after.setdefault(last_use.get(o, k), []).append(o)
        kernels: list[HostKernel] = []
        for k, n in enumerate(graph.nodes):
            stream = n.meta.get("stream")
            if _is_sync(n):
                kind = K.EVENT_RECORD if n.op == device.EVENT_RECORD else K.EVENT_WAIT
                kernels.append(HostKernel(kind, stream=stream, event=n.attrs["event"]))
                continue
            idx = len(self.nodes)
            self.nodes.append(ExecNode(n.op, n.domain, n.version, n.name, list(n.inputs),
                                       list(n.outputs), n.attrs,
                                       n.placement, stream,
                                       Impl.FALLBACK if n.on_fallback else Impl.NATIVE))
            kernels.extend(self._kernels(n, idx, stream))
            if frees_after.get(k):
                kernels.append(HostKernel(K.FREE, values=frees_after[k]))
        return Body(list(graph.inputs), list(graph.outputs), kernels, device_values)

    def _kernels(self, n: Node, idx: int, stream) -> list[HostKernel]:
        if has_trait(n.op, Trait.CONTROL_FLOW, n.domain):
            bodies = {r.meta.get("attribute", f"body{j}"): self.body(r, set(r.outputs))
                      for j, r in enumerate(n.regions)}
            return [HostKernel(K.CONTROL, idx, stream, bodies=bodies)]
        copy = n.op if n.domain == device.DOMAIN and n.op in device.COPY_OPS else None
        if n.placement is Placement.HOST:
            if copy == device.MEMCPY_D2H:
                return [HostKernel(K.MEMCPY_D2H, idx, None)]
            return [HostKernel(K.HOST_COMPUTE, idx)]
        if copy == device.MEMCPY_H2D:
            return [HostKernel(K.INFER_SHAPE, idx),
                    HostKernel(K.ALLOC, idx, stream, values=list(n.outputs)),
                    HostKernel(K.MEMCPY_H2D, idx, stream)]
        if copy == device.MEMCPY_D2H:
            return [HostKernel(K.MEMCPY_D2H, idx, stream)]
        return [HostKernel(K.INFER_SHAPE, idx),
                HostKernel(K.TILING, idx),
                HostKernel(K.ALLOC, idx, stream, values=[o for o in n.outputs if o]),
                HostKernel(K.LAUNCH, idx, stream)]


def lower_dynamic(graph: Graph) -> tuple[ExecGraphSection, dict[str, np.ndarray]]:
    """The ``exec_graph`` section and the weights it reads."""
    lowering = _Lowering()
    main = lowering.body(graph, set())
    section = ExecGraphSection(
        list(graph.inputs), list(graph.outputs),
        {v: _type(lowering.types, v) for v in lowering.types
         if v not in lowering.constants or v in graph.outputs},
        graph.meta.get("streams", 1), graph.meta.get("events", 0), graph.meta.get("host_ops", 0),
        lowering.nodes, main.kernels, main.device_values)
    return section, lowering.constants

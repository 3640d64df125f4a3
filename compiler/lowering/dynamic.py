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

from ..ir.graph import Graph, Node
from ..passes.control_flow import CONTROL_FLOW_OPS

#: Host kernels by pipeline stage: normal (shape work), memory, launch.
STAGE = {"infer_shape": "normal", "tiling": "normal", "host_compute": "normal",
         "control": "normal",
         "alloc": "memory", "free": "memory",
         "launch": "launch", "memcpy_h2d": "launch", "memcpy_d2h": "launch",
         "event_record": "launch", "event_wait": "launch"}


def _type(types: dict, name: str) -> dict:
    t = types[name]
    return {"dtype": t.dtype, "shape": None if t.shape is None else list(t.shape)}


def _captures(region: Graph) -> set[str]:
    """Values a region reads from enclosing scopes."""
    defined = set(region.inputs) | set(region.constants)
    defined.update(o for n in region.nodes for o in n.outputs)
    used = {i for n in region.walk() for i in n.inputs if i} | set(region.outputs)
    return used - defined


def _is_device(n: Node) -> bool:
    return n.meta.get("placement") != "host" and n.op not in ("EventRecord", "EventWait")


class _Lowering:
    def __init__(self):
        self.nodes: list[dict] = []
        self.types: dict = {}
        self.constants: dict[str, np.ndarray] = {}

    def body(self, graph: Graph, keep: set[str]) -> dict:
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
        kernels: list[dict] = []
        for k, n in enumerate(graph.nodes):
            stream = n.meta.get("stream")
            if n.op in ("EventRecord", "EventWait"):
                kind = "event_record" if n.op == "EventRecord" else "event_wait"
                kernels.append({"kind": kind, "event": n.attrs["event"], "stream": stream})
                continue
            idx = len(self.nodes)
            self.nodes.append({"op": n.op, "domain": n.domain, "version": n.version,
                               "name": n.name, "inputs": list(n.inputs),
                               "outputs": list(n.outputs), "attrs": n.attrs,
                               "placement": n.meta.get("placement", "device"), "stream": stream,
                               "impl": n.meta.get("impl", "native")})
            kernels.extend(self._kernels(n, idx, stream))
            if frees_after.get(k):
                kernels.append({"kind": "free", "values": frees_after[k]})
        return {"inputs": list(graph.inputs), "outputs": list(graph.outputs),
                "kernels": kernels, "device_values": device_values}

    def _kernels(self, n: Node, idx: int, stream) -> list[dict]:
        if n.op in CONTROL_FLOW_OPS and not n.domain:
            bodies = {r.meta.get("attribute", f"body{j}"): self.body(r, set(r.outputs))
                      for j, r in enumerate(n.regions)}
            return [{"kind": "control", "node": idx, "bodies": bodies, "stream": stream}]
        if n.meta.get("placement") == "host":
            if n.op == "MemcpyD2H":
                return [{"kind": "memcpy_d2h", "node": idx, "stream": None}]
            return [{"kind": "host_compute", "node": idx}]
        if n.op == "MemcpyH2D":
            return [{"kind": "infer_shape", "node": idx},
                    {"kind": "alloc", "node": idx, "values": list(n.outputs), "stream": stream},
                    {"kind": "memcpy_h2d", "node": idx, "stream": stream}]
        if n.op == "MemcpyD2H":
            return [{"kind": "memcpy_d2h", "node": idx, "stream": stream}]
        return [{"kind": "infer_shape", "node": idx},
                {"kind": "tiling", "node": idx},
                {"kind": "alloc", "node": idx, "values": [o for o in n.outputs if o],
                 "stream": stream},
                {"kind": "launch", "node": idx, "stream": stream}]


def lower_dynamic(graph: Graph) -> tuple[dict, dict[str, np.ndarray]]:
    """The ``exec_graph`` section and the weights it reads."""
    lowering = _Lowering()
    main = lowering.body(graph, set())
    section = {
        "inputs": list(graph.inputs),
        "outputs": list(graph.outputs),
        "values": {v: _type(lowering.types, v) for v in lowering.types
                   if v not in lowering.constants},
        "streams": graph.meta.get("streams", 1),
        "events": graph.meta.get("events", 0),
        "host_ops": graph.meta.get("host_ops", 0),
        "nodes": lowering.nodes,
        "kernels": main["kernels"],
        "device_values": main["device_values"],
    }
    return section, lowering.constants

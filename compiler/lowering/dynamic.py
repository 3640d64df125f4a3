"""Dynamic lowering: the Host Kernel execute graph.

Each device op becomes the host kernels InferShape, Tiling, AllocMem and
Launch, plus a Free after the launch of the last use of each buffer; a host
op becomes one HostCompute; EventWait/EventRecord and memcpy become launch
kernels on their streams.  Shapes are left symbolic: the runtime infers
them, tiles (through its tiling cache) and allocates per run.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph

#: Host kernels by pipeline stage: normal (shape work), memory, launch.
STAGE = {"infer_shape": "normal", "tiling": "normal", "host_compute": "normal",
         "alloc": "memory", "free": "memory",
         "launch": "launch", "memcpy_h2d": "launch", "memcpy_d2h": "launch",
         "event_record": "launch", "event_wait": "launch"}


def _type(graph: Graph, name: str) -> dict:
    t = graph.types[name]
    return {"dtype": t.dtype, "shape": None if t.shape is None else list(t.shape)}


def lower_dynamic(graph: Graph) -> tuple[dict, dict[str, np.ndarray]]:
    """The ``exec_graph`` section and the weights it reads."""
    nodes, kernels = [], []
    used_consts = [c for c in graph.constants if any(c in n.inputs for n in graph.nodes)]
    # last node (index in graph.nodes) reading each device value
    last_use: dict[str, int] = {}
    for k, n in enumerate(graph.nodes):
        for i in n.inputs:
            if i:
                last_use[i] = k
    frees_after: dict[int, list[str]] = {}
    device_values: set[str] = set()
    for k, n in enumerate(graph.nodes):
        if n.meta.get("placement") != "host" and n.op not in ("EventRecord", "EventWait"):
            for o in n.outputs:
                if o:
                    device_values.add(o)
                    frees_after.setdefault(last_use.get(o, k), []).append(o)
    for k, n in enumerate(graph.nodes):
        stream = n.meta.get("stream")
        if n.op in ("EventRecord", "EventWait"):
            kind = "event_record" if n.op == "EventRecord" else "event_wait"
            kernels.append({"kind": kind, "event": n.attrs["event"], "stream": stream})
            continue
        idx = len(nodes)
        nodes.append({"op": n.op, "domain": n.domain, "version": n.version, "name": n.name,
                      "inputs": list(n.inputs), "outputs": list(n.outputs), "attrs": n.attrs,
                      "placement": n.meta.get("placement", "device"), "stream": stream})
        if n.meta.get("placement") == "host":
            if n.op == "MemcpyD2H":
                kernels.append({"kind": "memcpy_d2h", "node": idx, "stream": None})
            else:
                kernels.append({"kind": "host_compute", "node": idx})
        elif n.op == "MemcpyH2D":
            kernels += [{"kind": "infer_shape", "node": idx},
                        {"kind": "alloc", "node": idx, "values": list(n.outputs), "stream": stream},
                        {"kind": "memcpy_h2d", "node": idx, "stream": stream}]
        elif n.op == "MemcpyD2H":
            kernels.append({"kind": "memcpy_d2h", "node": idx, "stream": stream})
        else:
            kernels += [{"kind": "infer_shape", "node": idx},
                        {"kind": "tiling", "node": idx},
                        {"kind": "alloc", "node": idx, "values": [o for o in n.outputs if o],
                         "stream": stream},
                        {"kind": "launch", "node": idx, "stream": stream}]
        dead = frees_after.get(k, [])
        if dead:
            kernels.append({"kind": "free", "values": dead, "after": idx})
    section = {
        "inputs": list(graph.inputs),
        "outputs": list(graph.outputs),
        "values": {v: _type(graph, v) for v in graph.types if v not in graph.constants},
        "streams": graph.meta.get("streams", 1),
        "events": graph.meta.get("events", 0),
        "host_ops": graph.meta.get("host_ops", 0),
        "nodes": nodes,
        "kernels": kernels,
        "device_values": sorted(device_values),
    }
    return section, {c: graph.constants[c] for c in used_consts}

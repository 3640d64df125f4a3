"""Static sink lowering: per-stream task lists, the memory plan and tiling data.

The result is plain data for the .om writer: every operand of every task is
an address (region, offset, dtype, shape) decided here, so the device walks
its task lists with nothing left to compute.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, TensorType
from ..memory.planner import ALIGNMENT, MemoryPlan, align_up


def plan_weights(graph: Graph, alignment: int = ALIGNMENT) -> tuple[dict[str, int], int]:
    """Offsets of the constants the tasks read, in the weights region."""
    used = [c for c in graph.constants if any(c in n.inputs for n in graph.nodes)]
    offsets, end = {}, 0
    for name in used:
        offsets[name] = end
        end += align_up(graph.constants[name].nbytes, alignment)
    return offsets, end


def _operand(graph: Graph, name: str, plan: MemoryPlan, weights: dict[str, int]):
    if not name:
        return None
    t: TensorType = graph.types[name]
    if name in weights:
        region, offset = "weights", weights[name]
    else:
        region, offset = "arena", plan.offset(name)
    return {"mem": region, "offset": offset, "dtype": t.dtype, "shape": list(t.shape)}


def lower_static(graph: Graph, plan: MemoryPlan) -> tuple[dict, dict[str, np.ndarray]]:
    """Sections ``tasks``, ``memory_plan`` and ``tiling``, and the weights to store."""
    weights, weights_bytes = plan_weights(graph)
    nstreams = graph.meta.get("streams", 1)
    lists: list[list[dict]] = [[] for _ in range(nstreams)]
    tiling_entries: list[dict] = []
    for k, node in enumerate(graph.nodes):
        s = node.meta["stream"]
        if node.op in ("EventRecord", "EventWait"):
            kind = "event_record" if node.op == "EventRecord" else "event_wait"
            task = {"kind": kind, "event": node.attrs["event"]}
        elif node.op in ("Label", "Goto"):
            task = {"kind": node.op.lower(), "label": node.attrs["label"]}
        elif node.op == "StreamSwitch":
            task = {"kind": "switch", "label": node.attrs["label"],
                    "cond": _operand(graph, node.inputs[0], plan, weights)}
        elif node.op == "MemcpyH2D":
            task = {"kind": "memcpy_h2d", "binding": node.attrs["binding"],
                    "dst": _operand(graph, node.outputs[0], plan, weights)}
        elif node.op == "MemcpyD2H":
            task = {"kind": "memcpy_d2h", "binding": node.attrs["binding"],
                    "src": _operand(graph, node.inputs[0], plan, weights)}
        else:
            ws = node.meta.get("workspace", 0)
            tiling_entries.append(node.meta.get("tiling", {}))
            task = {"kind": "kernel", "op": node.op, "domain": node.domain,
                    "version": node.version, "node": node.name, "impl": node.meta.get("impl", "native"),
                    "inputs": [_operand(graph, i, plan, weights) for i in node.inputs],
                    "outputs": [_operand(graph, o, plan, weights) for o in node.outputs],
                    "attrs": ({**node.attrs, "in_place": plan.in_place[node.name]}
                              if node.name in plan.in_place else node.attrs),
                    "tiling": len(tiling_entries) - 1,
                    "workspace": ({"mem": "arena", "offset": plan.buffers[f"{node.name}#workspace"].offset,
                                   "size": ws} if ws else None)}
        task["id"] = k
        lists[s].append(task)
    tasks = {"streams": nstreams, "events": graph.meta.get("events", 0), "lists": lists,
             "count": len(graph.nodes)}
    memory_plan = {
        "arena_bytes": plan.arena_bytes,
        "lower_bound_bytes": plan.lower_bound_bytes,
        "no_reuse_bytes": plan.no_reuse_bytes,
        "weights_bytes": weights_bytes,
        "alignment": plan.alignment,
        "strategy": plan.strategy,
        "buffers": [{"name": b.name, "offset": b.offset, "size": b.size,
                     "first_task": b.writer, "last_task": b.last, "readers": sorted(set(b.readers)),
                     "writers": b.all_writers}
                    for b in sorted(plan.buffers.values(), key=lambda b: (b.writer, b.name))],
        "aliases": [{"name": a.name, "of": a.of, "offset": plan.offset(a.name)}
                    for a in plan.aliases.values()],
        "weights": [{"name": n, "offset": off, "size": int(graph.constants[n].nbytes)}
                    for n, off in weights.items()],
    }
    sections = {"tasks": tasks, "memory_plan": memory_plan, "tiling": {"entries": tiling_entries}}
    return sections, {n: graph.constants[n] for n in weights}

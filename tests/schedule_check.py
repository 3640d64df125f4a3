"""Independent checks of a compiled schedule, built from the .om task lists with networkx.

These do not reuse the compiler's own happens-before code: they rebuild the
order the device will follow (stream order + record -> wait) from the tasks.
"""
from __future__ import annotations

import networkx as nx


def sync_graph(tasks: dict, drop_event: int | None = None) -> nx.DiGraph:
    g = nx.DiGraph()
    record, waits = {}, {}
    for lst in tasks["lists"]:
        ids = [t["id"] for t in lst]
        g.add_nodes_from(ids)
        g.add_edges_from(zip(ids, ids[1:]))
        for t in lst:
            if t["kind"] == "event_record":
                record[t["event"]] = t["id"]
            elif t["kind"] == "event_wait":
                waits.setdefault(t["event"], []).append(t["id"])
    for e, r in record.items():
        if e != drop_event:
            g.add_edges_from((r, w) for w in waits.get(e, []))
    return g


#: Device control kernels that write into buffers they take as inputs.
IN_PLACE_WRITERS = {"LoopUpdate", "BranchOut", "ScanSlice", "ScanUpdate"}


def data_dependencies(tasks: dict) -> list[tuple[int, int]]:
    """(writer task, reader task) for every value passed between tasks, by address."""
    writer = {}
    deps = []
    all_tasks = sorted((t for lst in tasks["lists"] for t in lst), key=lambda t: t["id"])
    for t in all_tasks:
        reads = [o for o in t.get("inputs", []) if o] + ([t["src"]] if "src" in t else [])
        for o in reads:
            key = (o["mem"], o["offset"], tuple(o["shape"]), o["dtype"])
            if key in writer:
                deps.append((writer[key], t["id"]))
        writes = [o for o in t.get("outputs", []) if o] + ([t["dst"]] if "dst" in t else [])
        if t.get("op") in IN_PLACE_WRITERS:
            writes += [o for o in t["inputs"] if o and o["mem"] == "arena"]
        for o in writes:
            writer[(o["mem"], o["offset"], tuple(o["shape"]), o["dtype"])] = t["id"]
    return deps


def unordered_dependencies(tasks: dict, drop_event: int | None = None) -> list[tuple[int, int]]:
    g = sync_graph(tasks, drop_event)
    closure = {n: nx.descendants(g, n) for n in g.nodes}
    return [(a, b) for a, b in data_dependencies(tasks) if b not in closure[a]]


def overlapping_live_buffers(tasks: dict, plan: dict) -> list[tuple[str, str]]:
    """Pairs of arena buffers that share bytes although neither is done before the other starts."""
    g = sync_graph(tasks)
    closure = {n: nx.descendants(g, n) for n in g.nodes}
    bufs = plan["buffers"]

    def done_before(a, b):     # every use of a happens before every write of b
        uses = [*a.get("writers", [a["first_task"]]), *a["readers"]]
        return all(w in closure[u] for u in uses for w in b.get("writers", [b["first_task"]]))

    bad = []
    for i, a in enumerate(bufs):
        for b in bufs[i + 1:]:
            if a["size"] == 0 or b["size"] == 0:
                continue
            if a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]:
                if not (done_before(a, b) or done_before(b, a)):
                    bad.append((a["name"], b["name"]))
    return bad

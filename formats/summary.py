"""What ``aircc inspect`` shows: a summary of an .om's sections."""
from __future__ import annotations

from collections import Counter
from typing import Callable, Optional

from .graph_view import HOST, KERNEL, graph_view
from .kinds import Impl, Placement
from .schema import summary
from .tasks import KernelTask

KernelSource = Callable[[str, int, str, bool], Optional[str]]
"""``(op, version, domain, fallback) -> name`` of the kernel backend that runs an op on the
model's target (None: unknown); asked for the nodes whose tiling the file does not hold."""


def summarize(om, kernel_source: KernelSource | None = None) -> dict:
    """A JSON-able summary: every shown field of the model section (:func:`.schema.summary`),
    streams, events, tasks per stream, memory plan, gears, the kernels (per node: stream, op,
    kernel backend, fused ops, fallback) and layouts."""
    contract = om.parsed()
    out = summary(contract.model)
    report = out.pop("compile_report", None)
    out.update(mode=om.mode, weights=len(om.weights),
               weights_bytes_stored=int(sum(w.nbytes for w in om.weights.values())))
    tasks, graph, plan = contract.tasks, contract.exec_graph, contract.memory_plan
    if tasks is not None:
        kernel_tasks = [t for tl in tasks.lists for t in tl if isinstance(t, KernelTask)]
        out.update({
            "streams": tasks.streams,
            "events": tasks.events,
            "tasks_per_stream": [len(tl) for tl in tasks.lists],
            "task_kinds": dict(sorted(Counter(t.kind.value for tl in tasks.lists for t in tl).items())),
            "ops": dict(sorted(Counter(t.op for t in kernel_tasks).items())),
        })
        out["layouts"] = layouts([(t.node, t.op, t.attrs) for t in kernel_tasks])
    if graph is not None:
        out.update({"streams": graph.streams, "events": graph.events, "host_ops": graph.host_ops})
        out["layouts"] = layouts([(n.name, n.op, n.attrs) for n in graph.nodes])
    if plan is not None:
        out.update({
            "arena_bytes": plan.arena_bytes,
            "lower_bound_bytes": plan.lower_bound_bytes,
            "no_reuse_bytes": plan.no_reuse_bytes,
            "weights_bytes": plan.weights_bytes,
            "alignment": plan.alignment,
            "memory_plan": [{"name": b.name, "offset": b.offset, "size": b.size,
                             "first_task": b.first_task, "last_task": b.last_task}
                            for b in plan.buffers],
            "in_place": [summary(a) for a in plan.aliases],
        })
    if contract.gears is not None:
        out["gears"] = gears(contract)
    out["kernels"] = kernels(contract, kernel_source)
    out["fallback_kernels"] = [k["node"] for k in out["kernels"]
                               if Impl(k["impl"]) is Impl.FALLBACK]
    if report:
        out["compile_report"] = report              # last: the longest
    return out


def layouts(kernels: list[tuple[str, str, dict]]) -> dict:
    """How many of the ``(node, op, attrs)`` kernels run channels-last, and the reorders
    between layouts (named ``<value>/layout`` by the compiler's ``plan-layouts``: a Transpose
    moves bytes, a Reshape is a view)."""
    reorders = [(node, op) for node, op, _ in kernels if node.endswith("/layout")]
    return {"channels_last_kernels": sum(bool(attrs.get("channels_last")) for _, _, attrs in kernels),
            "reorders": [node for node, op in reorders if op == "Transpose"],
            "views": [node for node, op in reorders if op != "Transpose"]}


def gears(contract) -> dict:
    """A gear model's batch inputs and sizes, and each gear's plan in brief."""
    g = contract.gears
    return {"batch_inputs": list(g.batch_inputs), "sizes": list(g.sizes),
            "plans": [{"batch": p.batch, "streams": p.tasks.streams, "events": p.tasks.events,
                       "tasks": p.tasks.count, "arena_bytes": p.memory_plan.arena_bytes}
                      for p in g.plans]}


def kernels(contract, kernel_source: KernelSource | None = None) -> list[dict]:
    """Every op the model runs (a gear model: its largest gear's), in order: where it runs
    (a stream, or the host), its kernel backend (as the static tiling chose it, else as
    ``kernel_source`` says), the backend's implementation, and what it fused."""
    out = []
    view = graph_view(contract)
    for n in view.nodes:
        if n.kind not in (KERNEL, HOST):
            continue
        backend = n.backend
        if n.kind == HOST:
            backend = "host"
        elif not backend and kernel_source is not None:
            backend = kernel_source(n.op, n.version, n.domain, n.impl is Impl.FALLBACK) or ""
        placement = Placement.HOST if n.kind == HOST else Placement.DEVICE
        out.append({"node": n.name, "op": n.op, "domain": n.domain,
                    "placement": placement.value, "stream": n.stream,
                    "backend": backend, "kernel": n.kernel, "why": n.why, "impl": n.impl.value,
                    "fused": list(n.fused), "channels_last": n.channels_last,
                    "body": view.groups.get(n.group)})
    return out


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


#: Keys of a summary that :func:`format_summary` writes in its own way, or leaves to
#: ``--json``; it writes any other (a field the model section gained) as ``key value``.
TEXT_KEYS = frozenset({
    "name", "mode", "producer", "opsets", "onnx", "target", "inputs", "outputs", "weights",
    "weights_bytes_stored", "streams", "events", "tasks_per_stream", "task_kinds", "ops",
    "host_ops", "gears", "layouts", "kernels", "fallback_kernels", "arena_bytes",
    "lower_bound_bytes", "no_reuse_bytes", "weights_bytes", "alignment", "memory_plan",
    "in_place", "compile_report"})


def format_summary(s: dict, *, buffers: int = 10) -> str:
    """The summary as readable text."""
    lines = [f"model      {s['name']}  ({s['mode']} mode, produced by {s['producer']})",
             f"opsets     {', '.join(f'{k} {v}' for k, v in (s.get('opsets') or {}).items())}"]
    if s.get("onnx"):
        lines.append(f"onnx       {format_onnx_metadata(s['onnx'])}")
    t = s.get("target")
    if t:
        lines.append(f"target     {t['name']} (kernel backend {t['backend']}, vector class "
                     f"{t['vector_class']})")
    for kind in ("inputs", "outputs"):
        for io in s[kind]:
            lines.append(f"{kind[:-1]:<10} {io['name']}: {io['dtype']}{io['shape']}")
    for key, value in s.items():
        if key not in TEXT_KEYS:                # a field the model section gained
            lines.append(f"{key:<10} {value}")
    lines.append(f"weights    {s['weights']} tensors, {_mib(s['weights_bytes_stored'])}")
    if "tasks_per_stream" in s:
        per = ", ".join(f"s{i}: {n}" for i, n in enumerate(s["tasks_per_stream"]))
        lines.append(f"streams    {s['streams']}  (tasks {per})")
        lines.append(f"events     {s['events']}")
        lines.append("tasks      " + ", ".join(f"{k} {v}" for k, v in s["task_kinds"].items()))
        lines.append("ops        " + ", ".join(f"{k} {v}" for k, v in s["ops"].items()))
    elif "streams" in s:
        lines.append(f"streams    {s['streams']}")
        lines.append(f"events     {s['events']}")
        lines.append(f"host ops   {s['host_ops']}")
    g = s.get("gears")
    if g:
        lines.append(f"gears      batch {', '.join(map(str, g['sizes']))} (batch inputs "
                     f"{', '.join(g['batch_inputs'])}); the plans below are batch {g['sizes'][-1]}'s")
        for p in g["plans"]:
            lines.append(f"  batch {p['batch']:<5} {p['tasks']} tasks on {p['streams']} stream(s), "
                         f"{p['events']} events, arena {p['arena_bytes']} bytes")
    lay = s.get("layouts") or {}
    if lay.get("channels_last_kernels"):
        lines.append(f"layouts    {lay['channels_last_kernels']} kernels channels-last; reorders "
                     f"{len(lay['reorders'])} ({', '.join(lay['reorders'][:4])}"
                     f"{', ...' if len(lay['reorders']) > 4 else ''}), views {len(lay['views'])}")
    elif "layouts" in s:
        lines.append("layouts    as ONNX (channels-first): no kernel runs channels-last")
    lines += format_kernels(s.get("kernels") or [], s.get("fallback_kernels") or [])
    if s["mode"] == "dynamic" and s.get("kernels"):
        lines.append("           (backends per op: a kernel may hand a shape it does not cover "
                     "to its base backend at run time)")
    if "arena_bytes" in s:
        ratio = s["arena_bytes"] / s["lower_bound_bytes"] if s["lower_bound_bytes"] else 0
        lines.append(f"arena      {s['arena_bytes']} bytes ({_mib(s['arena_bytes'])}), "
                     f"{ratio:.3f} x lower bound {s['lower_bound_bytes']}, "
                     f"no reuse {s['no_reuse_bytes']}")
        shown = sorted(s["memory_plan"], key=lambda b: -b["size"])[:buffers]
        lines.append(f"largest buffers (of {len(s['memory_plan'])}):")
        for b in shown:
            lines.append(f"  {b['name']:<40} offset {b['offset']:>12}  size {b['size']:>10}  "
                         f"tasks {b['first_task']}..{b['last_task']}")
    return "\n".join(lines)


def format_onnx_metadata(m: dict) -> str:
    """The ONNX model's metadata on one line: what is set of it."""
    parts = [f"graph {m['graph_name']!r}"]
    if m["producer_name"] or m["producer_version"]:
        parts.append(f"producer {' '.join(filter(None, (m['producer_name'], m['producer_version'])))}")
    if m["domain"]:
        parts.append(f"domain {m['domain']}")
    if m["model_version"] is not None:
        parts.append(f"version {m['model_version']}")
    if m["doc_string"]:
        doc = m["doc_string"].splitlines()[0]
        parts.append(f"doc {doc[:60]!r}{'...' if len(doc) > 60 else ''}")
    if m["metadata_props"]:
        parts.append("props " + ", ".join(f"{k}={v}" for k, v in sorted(m["metadata_props"].items())))
    return "; ".join(parts)


def format_kernels(kernels: list[dict], fallback: list[str]) -> list[str]:
    """The kernels as text: one line each, and the nodes on fallback kernels."""
    if not kernels:
        return []
    host = [Placement(k["placement"]) is Placement.HOST for k in kernels]
    lines = [f"kernels    {len(kernels)} ({sum(host)} on the host)"]
    width = min(40, max(len(k["node"]) for k in kernels))
    for k, on_host in zip(kernels, host):
        where = "host" if on_host else f"s{k['stream']}"
        how = ("fallback (onnx reference)" if Impl(k["impl"]) is Impl.FALLBACK else
               " ".join(x for x in (k["backend"], k["kernel"]) if x))
        extra = [f"fused {' + '.join(k['fused'])}"] if k["fused"] else []
        if k["channels_last"]:
            extra.append("channels-last")
        if k["body"]:
            extra.append(f"in {k['body']}")
        if k["why"]:
            extra.append(k["why"])
        lines.append(f"  {where:<5} {k['node']:<{width}} {k['op']:<20} {how:<28} {'; '.join(extra)}".rstrip())
    if fallback:
        lines.append(f"fallback   {len(fallback)} node(s) on onnx's reference implementation: "
                     f"{', '.join(fallback)}")
    else:
        lines.append("fallback   none: every node runs a native kernel")
    return lines

"""What ``aircc inspect`` shows: a summary of an .om's sections."""
from __future__ import annotations

from collections import Counter


def summarize(om) -> dict:
    """A JSON-able summary: mode, streams, events, tasks per stream, memory plan."""
    model = om.sections["model"]
    out = {
        "name": model.get("name"),
        "mode": om.mode,
        "producer": model.get("producer"),
        "target": model.get("target"),
        "opsets": model.get("opsets"),
        "inputs": model.get("inputs"),
        "outputs": model.get("outputs"),
        "weights": len(om.weights),
        "weights_bytes_stored": int(sum(w.nbytes for w in om.weights.values())),
    }
    tasks = om.sections.get("tasks")
    if tasks:
        lists = tasks["lists"]
        kinds = Counter(t["kind"] for lst in lists for t in lst)
        out.update({
            "streams": tasks["streams"],
            "events": tasks["events"],
            "tasks_per_stream": [len(lst) for lst in lists],
            "task_kinds": dict(sorted(kinds.items())),
            "ops": dict(sorted(Counter(t["op"] for lst in lists for t in lst
                                       if t["kind"] == "kernel").items())),
        })
    plan = om.sections.get("memory_plan")
    if plan:
        out.update({
            "arena_bytes": plan["arena_bytes"],
            "lower_bound_bytes": plan["lower_bound_bytes"],
            "no_reuse_bytes": plan["no_reuse_bytes"],
            "weights_bytes": plan["weights_bytes"],
            "alignment": plan["alignment"],
            "memory_plan": [{k: b[k] for k in ("name", "offset", "size", "first_task", "last_task")}
                            for b in plan["buffers"]],
            "in_place": [dict(a) for a in plan.get("aliases", [])],
        })
    nodes = ([t for lst in tasks["lists"] for t in lst if t["kind"] == "kernel"] if tasks else
             (om.sections.get("exec_graph") or {}).get("nodes", []))
    out["layouts"] = layouts(nodes)
    report = model.get("compile_report")
    if report:
        out["compile_report"] = report
    return out


def layouts(kernels: list[dict]) -> dict:
    """How many kernels run channels-last, and the reorders between layouts (named
    ``<value>/layout`` by the compiler's ``plan-layouts``: a Transpose moves bytes, a
    Reshape is a view)."""
    reorders = [k for k in kernels if str(k.get("node", k.get("name", ""))).endswith("/layout")]
    return {"channels_last_kernels": sum(bool((k.get("attrs") or {}).get("channels_last"))
                                         for k in kernels),
            "reorders": [k.get("node", k.get("name")) for k in reorders if k["op"] == "Transpose"],
            "views": [k.get("node", k.get("name")) for k in reorders if k["op"] != "Transpose"]}


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def format_summary(s: dict, *, buffers: int = 10) -> str:
    """The summary as readable text."""
    lines = [f"model      {s['name']}  ({s['mode']} mode, produced by {s['producer']})",
             f"opsets     {', '.join(f'{k} {v}' for k, v in (s.get('opsets') or {}).items())}"]
    t = s.get("target")
    if t:
        lines.append(f"target     {t['name']} (kernel backend {t['backend']}, vector class "
                     f"{t['vector_class']})")
    for kind in ("inputs", "outputs"):
        for io in s[kind]:
            lines.append(f"{kind[:-1]:<10} {io['name']}: {io['dtype']}{io['shape']}")
    lines.append(f"weights    {s['weights']} tensors, {_mib(s['weights_bytes_stored'])}")
    if "streams" in s:
        per = ", ".join(f"s{i}: {n}" for i, n in enumerate(s["tasks_per_stream"]))
        lines.append(f"streams    {s['streams']}  (tasks {per})")
        lines.append(f"events     {s['events']}")
        lines.append("tasks      " + ", ".join(f"{k} {v}" for k, v in s["task_kinds"].items()))
        lines.append("ops        " + ", ".join(f"{k} {v}" for k, v in s["ops"].items()))
    lay = s.get("layouts") or {}
    if lay.get("channels_last_kernels"):
        lines.append(f"layouts    {lay['channels_last_kernels']} kernels channels-last; reorders "
                     f"{len(lay['reorders'])} ({', '.join(lay['reorders'][:4])}"
                     f"{', ...' if len(lay['reorders']) > 4 else ''}), views {len(lay['views'])}")
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

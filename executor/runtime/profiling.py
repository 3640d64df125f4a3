"""A profiling timeline of a model's runs: a Chrome trace that Perfetto opens, and a
summary that says whether the runs were Host Bound or Device Bound.

While a :class:`Profiler` is attached to a loaded model (``model.start_profiling()``,
``airrun --profile trace.json``, ``SessionOptions.enable_profiling``), every run records:

- on the **host** track of each host thread: the run, and its host work (a static run's
  submission; a dynamic run's InferShape, Tiling, Alloc, Launch... per node);
- on one **device stream** track per stream: every task with its op, node, shapes and
  bytes (kernels), event records and waits;
- on the device's **copies** track: host-to-device and device-to-host copies;
- **flow arrows** from each event record to the waits it releases, across streams.

:meth:`Profiler.trace` is the Chrome trace event format (``traceEvents`` of complete
``X`` events, ``s``/``f`` flow events and ``M`` track names; timestamps in µs), with
:meth:`Profiler.summary` in its ``otherData``.  A run is **Host Bound** when its host
work takes longer than the busiest stream's tasks (the device waits for the host), else
**Device Bound**.

Cost while profiling: two clock reads and one list append per task.  Off (the
default), nothing: the walks check one attribute per run.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict

#: Task kinds that count as a stream's work (waits are not).
WAIT_KINDS = frozenset({"event_wait"})
COPY_KINDS = frozenset({"memcpy_h2d", "memcpy_d2h"})
HOST_PID, DEVICE_PID0 = 1, 100


class Profiler:
    """Collects what runs do while attached (thread-safe; see the module doc)."""

    def __init__(self, model_name: str = "model"):
        self.model_name = model_name
        self.origin = time.perf_counter()
        self._lock = threading.Lock()
        self.host: list[tuple[int, str, str, float, float, dict]] = []
        """(thread id, name, category, start, end, args), seconds on perf_counter."""
        self.tasks: list[tuple[int, int, str, float, float, dict]] = []
        """(device id, stream id, kind, start, end, desc)."""
        self.runs: list[tuple[float, float, str]] = []
        self.records: dict[tuple, tuple[int, int, float]] = {}
        """(device, event, generation) -> (device, stream, end of the record)."""
        self.waits: list[tuple[tuple, int, int, float]] = []
        self.threads: dict[int, str] = {}
        self.streams: dict[tuple[int, int], str] = {}

    # ------------------------------------------------------------ recording
    def host_span(self, name: str, category: str, start: float, end: float, **args) -> None:
        t = threading.current_thread()
        with self._lock:
            self.threads.setdefault(t.ident, t.name)
            self.host.append((t.ident, name, category, start, end, args))

    def run_span(self, start: float, end: float, mode: str) -> None:
        with self._lock:
            self.runs.append((start, end, mode))

    def name_stream(self, device: int, stream: int, name: str) -> None:
        with self._lock:
            self.streams.setdefault((device, stream), name)

    def task(self, device: int, stream: int, desc: dict, start: float, end: float,
             event_key: tuple | None = None) -> None:
        """One task of ``stream`` ran from ``start`` to ``end``; ``event_key`` (event id,
        generation) pairs a record with its waits."""
        kind = desc.get("kind", "task")
        with self._lock:
            self.tasks.append((device, stream, kind, start, end, desc))
            if event_key is not None:
                key = (device, *event_key)
                if kind == "event_record":
                    self.records[key] = (device, stream, end)
                else:
                    self.waits.append((key, device, stream, end))

    def timed(self, device: int, stream: int, desc: dict, fn, event_key: tuple | None = None):
        """``fn`` (a stream task) timed into this profile when it runs."""
        clock = time.perf_counter

        def task():
            start = clock()
            try:
                return fn()
            finally:
                self.task(device, stream, desc, start, clock(), event_key)
        task.node = getattr(fn, "node", None)
        return task

    # ------------------------------------------------------------ results
    def _us(self, t: float) -> float:
        return round((t - self.origin) * 1e6, 3)

    def summary(self) -> dict:
        """Runs, wall time, host busy time, device busy and idle time per stream, the
        verdict, and a per-op table of the device's kernels."""
        with self._lock:
            runs, host, tasks = list(self.runs), list(self.host), list(self.tasks)
        wall = sum(e - s for s, e, _ in runs)
        host_busy = sum(e - s for _, _, cat, s, e, _ in host if cat == "host")
        busy: dict[str, float] = defaultdict(float)
        ops: dict[str, list[float]] = defaultdict(list)
        for dev, stream, kind, s, e, desc in tasks:
            if kind in WAIT_KINDS:
                continue
            busy[self._stream_name(dev, stream)] += e - s
            if kind == "kernel":
                ops[desc.get("op", "?")].append(e - s)
        device_busy = max(busy.values(), default=0.0)
        total = sum(sum(v) for v in ops.values()) or 1.0
        table = sorted(({"op": op, "count": len(v), "total_ms": round(1e3 * sum(v), 3),
                         "mean_us": round(1e6 * sum(v) / len(v), 2),
                         "share": round(sum(v) / total, 4)} for op, v in ops.items()),
                       key=lambda r: -r["total_ms"])
        verdict = "Host Bound" if host_busy > device_busy else "Device Bound"
        return {"model": self.model_name, "runs": len(runs),
                "modes": sorted({m for _, _, m in runs}),
                "wall_ms": round(1e3 * wall, 3), "host_busy_ms": round(1e3 * host_busy, 3),
                "device_busy_ms": {k: round(1e3 * v, 3) for k, v in sorted(busy.items())},
                "device_idle_ms": {k: round(1e3 * max(0.0, wall - v), 3)
                                   for k, v in sorted(busy.items())},
                "verdict": verdict,
                "why": (f"the host worked {1e3 * host_busy:.3f} ms against "
                        f"{1e3 * device_busy:.3f} ms on the busiest stream: "
                        + ("the device waited for the host" if verdict == "Host Bound"
                           else "the host waited for the device")),
                "ops": table}

    def _stream_name(self, device: int, stream: int) -> str:
        return self.streams.get((device, stream), f"device {device} stream {stream}")

    def trace(self) -> dict:
        """The Chrome trace (see the module doc)."""
        with self._lock:
            host, tasks, runs = list(self.host), list(self.tasks), list(self.runs)
            records, waits = dict(self.records), list(self.waits)
            threads, streams = dict(self.threads), dict(self.streams)
        ev: list[dict] = [{"ph": "M", "pid": HOST_PID, "name": "process_name",
                           "args": {"name": "host"}}]
        tids = {ident: i + 1 for i, ident in enumerate(threads)}
        for ident, name in threads.items():
            ev.append({"ph": "M", "pid": HOST_PID, "tid": tids[ident], "name": "thread_name",
                       "args": {"name": f"host thread {name}"}})
        devices = sorted({d for d, *_ in tasks} | {d for d, _ in streams})
        for d in devices:
            ev.append({"ph": "M", "pid": DEVICE_PID0 + d, "name": "process_name",
                       "args": {"name": f"device {d}"}})
            ev.append({"ph": "M", "pid": DEVICE_PID0 + d, "tid": 0, "name": "thread_name",
                       "args": {"name": "copies"}})
        for (d, s), name in sorted(streams.items()):
            ev.append({"ph": "M", "pid": DEVICE_PID0 + d, "tid": s + 1, "name": "thread_name",
                       "args": {"name": name}})
        main_tid = tids.get(threading.main_thread().ident, 1)
        for start, end, mode in runs:
            ev.append({"ph": "X", "pid": HOST_PID, "tid": main_tid, "name": f"run ({mode})",
                       "cat": "run", "ts": self._us(start), "dur": round((end - start) * 1e6, 3)})
        for ident, name, cat, start, end, args in host:
            ev.append({"ph": "X", "pid": HOST_PID, "tid": tids[ident], "name": name, "cat": cat,
                       "ts": self._us(start), "dur": round((end - start) * 1e6, 3), "args": args})
        for d, s, kind, start, end, desc in tasks:
            name = (f"{desc.get('op')} {desc.get('node')}" if kind == "kernel" else
                    f"{kind} e{desc['event']}" if "event" in desc else kind)
            args = {k: v for k, v in desc.items() if k != "kind"}
            ev.append({"ph": "X", "pid": DEVICE_PID0 + d, "tid": 0 if kind in COPY_KINDS else s + 1,
                       "name": name, "cat": kind, "ts": self._us(start),
                       "dur": round((end - start) * 1e6, 3), "args": {**args, "stream": s}})
        flow = 0
        for key, d, s, end in waits:
            rec = records.get(key)
            if rec is None:
                continue
            flow += 1
            rd, rs, rend = rec
            ev.append({"ph": "s", "id": flow, "pid": DEVICE_PID0 + rd, "tid": rs + 1,
                       "name": f"event {key[1]}", "cat": "event", "ts": self._us(rend) - 0.001})
            ev.append({"ph": "f", "bp": "e", "id": flow, "pid": DEVICE_PID0 + d, "tid": s + 1,
                       "name": f"event {key[1]}", "cat": "event", "ts": self._us(end) - 0.001})
        return {"traceEvents": ev, "displayTimeUnit": "ms",
                "otherData": {"generator": "aircc", "summary": self.summary()}}

    def write(self, path: str | os.PathLike) -> str:
        """Write :meth:`trace` as JSON to ``path`` (atomically); returns the path."""
        path = os.fspath(path)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.trace(), f)
        os.replace(tmp, path)
        return path


def format_summary(s: dict) -> str:
    """The summary as text: the verdict, busy and idle time, and the per-op table."""
    lines = [f"profile of {s['model']}: {s['runs']} run(s), {s['wall_ms']:.3f} ms: "
             f"{s['verdict']} ({s['why']})",
             f"host busy            {s['host_busy_ms']:.3f} ms"]
    for name, ms in s["device_busy_ms"].items():
        lines.append(f"{name:<20} busy {ms:.3f} ms, idle {s['device_idle_ms'][name]:.3f} ms")
    lines.append(f"{'op':<28} {'count':>6} {'total ms':>10} {'mean us':>10} {'share':>7}")
    for r in s["ops"]:
        lines.append(f"{r['op']:<28} {r['count']:>6} {r['total_ms']:>10.3f} {r['mean_us']:>10.2f} "
                     f"{100 * r['share']:>6.1f}%")
    return "\n".join(lines)

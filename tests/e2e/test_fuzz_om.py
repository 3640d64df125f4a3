"""Mutated .om files of real compiled models (static on several streams, gears, dynamic,
control flow; tests/fuzz_om.py) fail only with aircc's own errors: every case is loaded
and, if it loads, run once, in worker subprocesses, so that a crash or a hang is caught
and named by its case id.  A quarter of the cases are hostile shapes (tests/om_hostile.py:
overlapping operands, attributes of the wrong type, inputs emptied or reordered, a Loop that
never exits, empty containers by the million, huge sizes, msgpack bombs, long strings, NaN,
event cycles).  ``AIRCC_FUZZ_CASES`` raises the count (default 3,000) for longer local runs
(``AIRCC_FUZZ_CASES=20000 python -m pytest -q tests/e2e/test_fuzz_om.py``);
``python tests/fuzz_om.py --case ID`` replays one case."""
from __future__ import annotations

import collections
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time

import fuzz_om
import om_hostile

CASES = int(os.environ.get("AIRCC_FUZZ_CASES", "3000"))
WORKERS = 2
CASE_TIMEOUT = 10.0      # seconds without a word from a worker: it hangs
SETUP_TIMEOUT = 120.0    # its imports and seed models
#: What a container-level refusal names instead of a section.
CONTAINER_PARTS = ("section '", "header", "table", "magic", "truncated", "checksum", "format version")
#: What else may refuse a model at load: an op this build has no kernel for, a full device.
LOAD_REFUSALS = ("UnsupportedOpError", "DeviceOutOfMemoryError")
FAILURES = ("FOREIGN", "WRAPPED", "CRASH", "HANG", "HARNESS")
#: Host memory a case may add to the worker's peak: the device's (256 MiB, which its pages
#: take once touched), some slack for what the first cases warm up, and what decoding a file
#: may cost at most (docs/om-format.md: 32 bytes per byte).
MEMORY_SLACK, MEMORY_PER_FILE_BYTE = (256 + 128) << 20, 32
#: Seconds past its deadline a run may take to end (the endless Loop's, at most).
DEADLINE_GRACE = 2.0


class _Worker:
    """One worker subprocess running cases ``first..stop-1``."""

    def __init__(self, seed_dir: str, first: int, stop: int):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, fuzz_om.__file__, "--worker", seed_dir,
                                      str(first), str(stop)], stdout=subprocess.PIPE,
                                     stderr=self.stderr)
        self.case, self.next, self.stop = None, first, stop
        self.since, self.limit = time.monotonic(), SETUP_TIMEOUT
        self.pending = b""

    def lines(self) -> list[str] | None:
        """The complete lines it has written since the last call (None: it has exited)."""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not chunk:
            return None
        *done, self.pending = (self.pending + chunk).split(b"\n")
        return [line.decode() for line in done]

    def end(self, outcome: str | None) -> dict | None:
        """Stop it; the result of the case it was on when it crashed or hung, if any."""
        if outcome is not None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:].decode(errors="replace")
        self.stderr.close()
        if outcome is None and self.next >= self.stop:
            return None
        case = self.case if self.case is not None else self.next
        return {"case": case, "seed": fuzz_om.SEEDS[case % len(fuzz_om.SEEDS)],
                "outcome": outcome or "CRASH", "returncode": self.proc.returncode, "stderr": tail}


def fuzz(cases: range, seed_dir: str, workers: int = WORKERS) -> list[dict]:
    """One outcome per case, from ``workers`` subprocesses; a worker that crashed or hung is
    recorded against its case and started again from the next one."""
    results: dict[int, dict] = {}
    sel = selectors.DefaultSelector()

    def spawn(first: int, stop: int) -> None:
        if first < stop:
            w = _Worker(seed_dir, first, stop)
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)

    def end(w: _Worker, outcome: str | None) -> None:
        sel.unregister(w.proc.stdout)
        r = w.end(outcome)
        if r is not None:
            results[r["case"]] = r
            spawn(r["case"] + 1, w.stop)

    n = len(cases)
    for k in range(workers):
        spawn(cases.start + k * n // workers, cases.start + (k + 1) * n // workers)
    try:
        while sel.get_map():
            for key, _ in sel.select(timeout=0.5):
                w = key.data
                lines = w.lines()
                if lines is None:
                    end(w, None)
                    continue
                w.since, w.limit = time.monotonic(), CASE_TIMEOUT
                for line in lines:
                    if line.startswith("start "):
                        w.case = int(line.split()[1])
                    elif line.startswith("{"):
                        r = json.loads(line)
                        results[r["case"]] = r
                        w.case, w.next = None, r["case"] + 1
            for key in list(sel.get_map().values()):
                if time.monotonic() - key.data.since > key.data.limit:
                    end(key.data, "HANG")
    finally:
        for key in list(sel.get_map().values()):
            key.data.end("HANG")
    return [results[c] for c in sorted(results)]


def _summary(results: list[dict], wall: float) -> str:
    by = collections.Counter(r["outcome"] for r in results)
    errors = collections.Counter(f"{r['outcome']}:{r['error']}" for r in results if "error" in r)
    kinds = collections.Counter(r.get("mutation", "?").split()[0] for r in results)
    hostile = collections.Counter(_shape(r) for r in results if _shape(r))
    reached = sum(bool(r.get("reached")) for r in results)
    lines = [f"fuzz .om: {len(results)} cases in {wall:.1f} s on {WORKERS} workers "
             f"({len(fuzz_om.SEEDS)} seed models): " + ", ".join(f"{k} {v}" for k, v in by.most_common()),
             f"  reached the section checks: {reached} ({100 * reached / len(results):.0f}%)",
             "  mutations: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()),
             "  hostile shapes: " + ", ".join(f"{k} {v}" for k, v in hostile.most_common()),
             "  errors: " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items()))]
    growth = max(results, key=lambda r: r.get("rss_growth", 0))
    lines.append(f"  largest rise of a worker's peak memory: {growth.get('rss_growth', 0) >> 20} MiB "
                 f"(case {growth['case']}); peak memory of a worker: "
                 f"{max(r.get('rss', 0) for r in results) >> 20} MiB")
    slowest = max(results, key=lambda r: r.get("load_seconds", 0))
    lines.append(f"  slowest load: {slowest.get('load_seconds', 0):.2f} s (case {slowest['case']}); "
                 f"longest run: {max(r.get('run_seconds', 0) for r in results):.2f} s")
    leaks = [r["case"] for r in results if r.get("leak")]
    if leaks:
        lines.append(f"  cases that left device memory or streams behind: {leaks[:20]}")
    for r in results:
        if r["outcome"] in FAILURES:
            lines.append("  " + json.dumps({k: r.get(k) for k in ("case", "seed", "outcome", "mutation",
                                                                   "stage", "error", "message",
                                                                   "aircc_frame", "returncode")}))
    return "\n".join(lines)


def _shape(r: dict) -> str | None:
    """The hostile shape of a case's mutation (None: not a hostile case)."""
    words = r.get("mutation", "").split()
    return words[1].rstrip(":") if words[:1] == ["hostile"] else None


def test_mutated_models_fail_only_with_aircc_errors(tmp_path):
    """No exception but aircc's, no crash, no hang; a refused file is a ModelFormatError naming
    the section (or the part of the container), or an op or a device that cannot run it; no
    case takes much more host memory than its file; most mutations reach the section checks."""
    t0 = time.monotonic()
    fuzz_om.build_seeds(str(tmp_path))
    results = fuzz(range(CASES), str(tmp_path))
    fuzz_om.SUMMARY[:] = [_summary(results, time.monotonic() - t0)]
    print("\n" + fuzz_om.SUMMARY[0])
    assert [r["case"] for r in results] == list(range(CASES))
    failed = [r for r in results if r["outcome"] in FAILURES]
    assert not failed, (f"{len(failed)} cases failed (replay: python tests/fuzz_om.py --case ID): "
                        + ", ".join(f"{r['case']} {r['outcome']}" for r in failed[:50]) + "\n"
                        + "\n".join(f"{r['case']} {r['outcome']} {r.get('error')} at "
                                    f"{r.get('aircc_frame')} ({r.get('mutation')}): {r.get('message')}"
                                    for r in failed[:10]))
    refused = [r for r in results if r["outcome"] == "refused"]
    unnamed = [r for r in refused if r["format_error"] and r["error"] != "TargetUnavailableError"
               and not any(part in r["message"] for part in CONTAINER_PARTS)]
    assert not unnamed, [(r["case"], r["message"]) for r in unnamed[:10]]
    other = [r for r in refused if not r["format_error"] and r["error"] not in LOAD_REFUSALS]
    assert not other, [(r["case"], r["error"], r["message"]) for r in other[:10]]
    hungry = [r for r in results
              if r.get("rss_growth", 0) > MEMORY_SLACK + MEMORY_PER_FILE_BYTE * r["size"]]
    assert not hungry, [(r["case"], r["rss_growth"], r["mutation"]) for r in hungry[:10]]
    field_level = [r for r in results if r.get("mutation", "").split()[0]
                   in ("field", "plausible", "bump", "move", "swap")]
    assert len(field_level) >= 0.45 * len(results)
    shapes = collections.Counter(_shape(r) for r in results if _shape(r))
    assert sum(shapes.values()) >= 0.2 * len(results)
    assert len(results) < 2000 or set(om_hostile.WEIGHTS) <= set(shapes), shapes
    endless = [r for r in results if _shape(r) == "endless"]
    late = [r for r in endless if r["outcome"] != "run_error" or r["error"] != "RunTimeoutError"
            or r["run_seconds"] > fuzz_om.RUN_DEADLINE + DEADLINE_GRACE]
    assert not late, late[:5]
    slow = [r for r in results if r.get("run_seconds", 0) > fuzz_om.RUN_DEADLINE + DEADLINE_GRACE]
    assert not slow, [(r["case"], r["run_seconds"], r["mutation"]) for r in slow[:10]]
    assert sum(bool(r.get("reached")) for r in results) >= 0.3 * len(results)
    assert sum(r["outcome"] == "ran" for r in results) >= 0.05 * len(results)

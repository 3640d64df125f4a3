"""The profiling timeline: a Chrome trace of host threads, device streams, copies and
events, checked for its structure against what the compiled model holds, and the
summary's verdict."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import aircc
from aircc.cli.airrun_cmd import main as airrun
from aircc.formats import save_om
from graphs import diamond

X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
RUNS = 3


def check_trace(trace: dict, streams: int, waits_per_run: int, runs: int) -> dict:
    """The structure every trace must have; returns the device events by track."""
    json.dumps(trace)                                   # valid JSON all the way down
    ev = trace["traceEvents"]
    assert trace["displayTimeUnit"] == "ms" and isinstance(ev, list) and ev
    for e in ev:
        assert e["ph"] in "XMsf" and isinstance(e["pid"], int) and isinstance(e["name"], str)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["ts"], float) and isinstance(e["tid"], int)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    stream_tracks = {k: v for k, v in names.items() if " stream " in v}
    assert len(stream_tracks) == streams                # one track per stream
    assert any(v == "copies" for v in names.values()) and any(v.startswith("host") for v in names.values())
    # flow events: every wait paired with the record that released it, once per run
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert set(starts) == set(ends) and len(starts) == waits_per_run * runs
    for i, s in starts.items():
        assert s["ts"] <= ends[i]["ts"] and (s["pid"], s["tid"]) in stream_tracks
        assert (ends[i]["pid"], ends[i]["tid"]) in stream_tracks
    # durations inside the runs
    run_spans = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["ph"] == "X" and e["cat"] == "run"]
    assert len(run_spans) == runs
    tasks = [e for e in ev if e["ph"] == "X" and e["pid"] >= 100]
    for t in tasks:
        assert any(lo - 1 <= t["ts"] and t["ts"] + t["dur"] <= hi + 1 for lo, hi in run_spans), t
    kernels = [t for t in tasks if t["cat"] == "kernel"]
    assert kernels and all(t["args"]["op"] and t["args"]["node"] and "bytes" in t["args"] for t in kernels)
    copies = [t for t in tasks if t["cat"].startswith("memcpy")]
    assert copies and all(names[(t["pid"], t["tid"])] == "copies" for t in copies)
    return {"kernels": kernels, "summary": trace["otherData"]["summary"]}


@pytest.fixture(scope="module")
def builds():
    return {mode: aircc.compile(diamond(), mode=mode, min_branch_bytes=0,
                                 split_matrix_branches=True).om for mode in ("static", "dynamic")}


def expected(om) -> tuple[int, int]:
    """Streams, and event waits per run, as the compiled model holds them."""
    c = om.parsed()
    if c.mode == "static":
        tasks = c.static_plans()[0].tasks
        waits = sum(t.kind.value == "event_wait" for tl in tasks.lists for t in tl)
        return tasks.streams, waits
    eg = c.exec_graph
    return eg.streams, sum(k.kind.value == "event_wait" for k in eg.kernels)


@pytest.mark.parametrize("mode, replay", [("static", True), ("dynamic", False), ("dynamic", True)])
def test_a_profiled_multi_stream_run_gives_a_well_formed_trace(builds, mode, replay, tmp_path):
    om = builds[mode]
    streams, waits = expected(om)
    assert streams > 1 and waits > 0
    with aircc.load(om, replay=replay) as m:
        want = m.run({"x": X})["y"]                     # replays are recorded here
        m.start_profiling()
        for _ in range(RUNS):
            np.testing.assert_array_equal(m.run({"x": X})["y"], want)
        path = m.end_profiling(tmp_path / "trace.json")
        assert m.end_profiling() == ""                  # no longer profiling
    got = check_trace(json.loads(open(path).read()), streams, waits, RUNS)
    s = got["summary"]
    assert s["runs"] == RUNS and s["verdict"] in ("Host Bound", "Device Bound")
    assert len(s["device_busy_ms"]) == streams and s["wall_ms"] > 0
    assert sum(r["count"] for r in s["ops"]) == len(got["kernels"])
    assert abs(sum(r["share"] for r in s["ops"]) - 1) < 1e-3
    if mode == "dynamic" and not replay:             # per-op host work is on the host tracks
        assert s["host_busy_ms"] > 0 and s["verdict"] == (
            "Host Bound" if s["host_busy_ms"] > max(s["device_busy_ms"].values()) else "Device Bound")


def test_airrun_profile_writes_the_trace_and_prints_the_summary(builds, tmp_path):
    om = tmp_path / "d.om"
    save_om(builds["static"], om)
    trace = tmp_path / "t.json"
    r = CliRunner().invoke(airrun, [str(om), "--random", "0", "--quiet", "--repeat", "4",
                                    "--profile", str(trace), "--profile-summary"])
    assert r.exit_code == 0, r.output
    streams, waits = expected(builds["static"])
    check_trace(json.loads(trace.read_text()), streams, waits, 4)
    assert "Device Bound" in r.output or "Host Bound" in r.output
    assert "op " in r.output and "share" in r.output and "Sum" in r.output

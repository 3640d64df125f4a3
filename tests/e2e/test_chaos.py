"""Chaos under load (``tests/chaos.py``): a static and a dynamic model served from four
threads while kernel errors, hangs past short deadlines, out-of-memory, device losses with
failover and devices that stop answering fire at random, for ten seeds.

In a subprocess, so that a crash fails the test.  Each seed storms until 250 requests
have ended and every kind of fault was armed (at least 0.3 s, at most 6 s: about ten
seconds in all); ``AIRCC_CHAOS_REQUESTS`` and ``AIRCC_CHAOS_SECONDS`` make a longer storm
of the same test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHAOS = Path(__file__).resolve().parent.parent / "chaos.py"
SEEDS = range(10)
KINDS = {"kernel_error", "hang", "oom", "device_lost", "pulled", "unresponsive"}


@pytest.fixture(scope="module")
def storms() -> list[dict]:
    requests = int(os.environ.get("AIRCC_CHAOS_REQUESTS", "250"))
    seconds = float(os.environ.get("AIRCC_CHAOS_SECONDS", "6"))
    env = dict(os.environ, AIR_LOG="error")
    command = [sys.executable, str(CHAOS), "--seeds", f"{SEEDS[0]}-{SEEDS[-1]}",
               "--requests", str(requests), "--seconds", str(seconds)]
    out = subprocess.run(command, capture_output=True, text=True, env=env,
                         timeout=len(SEEDS) * (seconds + 40) + 60)
    assert out.returncode == 0, f"the storm ended with exit {out.returncode}: {out.stderr[-3000:]}"
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [r["seed"] for r in results] == list(SEEDS)
    return results


def test_every_request_is_right_or_a_named_error_with_no_hang(storms):
    for r in storms:
        assert r.get("raw", 0) == 0, (r["seed"], r["raw_traces"])
        assert r.get("wrong", 0) == 0, (r["seed"], r["wrong_samples"])
        assert r["hung"] == 0, r
        assert r["right"] > 0 and r["named"] > 0, r          # the storm stormed, work went on
        assert set(r["faults"]) == KINDS, r["faults"]
        assert set(r["errors"]) <= {"KernelError", "RunTimeoutError", "DeviceOutOfMemoryError",
                                    "DeviceLostError", "DeviceError"}, r["errors"]
        assert r["after_ok"] == r["after_of"], r               # right again once it stops
    assert sum(r["requests"] for r in storms) >= int(os.environ.get("AIRCC_CHAOS_REQUESTS", "250")) * 8
    failovers = sum(r["recoveries"].get("failed over from device", 0) for r in storms)
    assert failovers >= len(storms), [r["recoveries"] for r in storms]


def test_memory_units_streams_threads_and_files_come_back(storms):
    for r in storms:
        assert r["settled"], r
        before, after = r["idle"]
        assert after == before, (r["seed"], before, after)   # device memory, units, streams
        loaded, still = r["loaded_bytes"]
        assert still == loaded, r                             # no block lost while loaded
        assert r["threads"][1] == r["threads"][0] and not r["stuck_threads"], r
        assert r["fds"][1] == r["fds"][0], r

"""The benchmark script runs end to end on a small model and writes what the README shows."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_benchmark_quick_run_writes_json_and_table(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick",
                           "--only", "sample_mlp", "--rounds", "3", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    (row,) = results["models"]
    assert row["model"] == "sample_mlp" and row["mode"] == "static" and row["rounds"] == 3
    assert row["aircc_ms"] > 0 and row["onnxruntime_ms"] > 0 and row["ratio"] > 0
    assert row["host_us_per_inference"] > 0 and row["peak_device_bytes"] > 0
    assert results["machine"]["blas_kernels"]                      # which BLAS kernels ran
    table = (tmp_path / "results.md").read_text()
    assert "OpenBLAS kernels" in table and "| sample_mlp | static |" in table

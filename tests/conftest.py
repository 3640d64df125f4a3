"""Shared fixtures: the onnx package's light models, samples, small graphs."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

# the Winograd mode's thresholds of AVX2 BLAS kernels, whatever the BLAS of the machine
# running the tests (and of the compilers they start): tile choices mean the same everywhere
os.environ["AIRCC_VECTOR_CLASS"] = "avx2"

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_MODELS = sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT_DIR)
                      if f.endswith(".onnx"))
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")


def light_path(name: str) -> str:
    return os.path.join(LIGHT_DIR, f"light_{name}.onnx")


@pytest.fixture(scope="session")
def device():
    """One virtual device for the whole session (as a process would have)."""
    from aircc.executor.device.device import VirtualDevice

    dev = VirtualDevice(8 << 30)
    yield dev
    dev.close()


def random_feeds(inputs: list[dict], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i["name"]: rng.standard_normal(i["shape"]).astype(i["dtype"]) for i in inputs}


import sys  # noqa: E402

if SAMPLES not in sys.path:
    sys.path.insert(0, SAMPLES)   # the sample builders (bert_encoder, build_samples)


def pytest_terminal_summary(terminalreporter):
    """Print the ONNX conformance pass count (and every failure with its op and reason)."""
    try:
        from conformance import SUMMARY
    except ImportError:
        return
    if not SUMMARY:
        return
    tr = terminalreporter
    tr.section("ONNX backend conformance (plain-tensor node cases)")
    tr.write_line(f"passed {SUMMARY['passed']} of {SUMMARY['total']} "
                  f"({100 * SUMMARY['passed'] / SUMMARY['total']:.1f}%)")
    for name, ops, reason in SUMMARY["failures"]:
        tr.write_line(f"  FAIL {name} [{', '.join(ops)}]: {reason}")

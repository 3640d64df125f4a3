"""Shared fixtures (a session device) and the conformance summary; models: ``testdata``."""
from __future__ import annotations

import pytest

import testdata  # noqa: F401  (puts the sample builders on sys.path)


def pytest_addoption(parser):
    parser.addoption("--corpus", action="store_true",
                     help="run every model of the export corpus (tests/corpus, docs/corpus.md), "
                          "not only its fast subset")
    parser.addoption("--long", action="store_true",
                     help="also run the tests marked long: the slowest end-to-end checks "
                          "(a driver killed half way on Ray, then resumed; airrun on an "
                          "existing Ray cluster), left out of the default run for its time")


def pytest_collection_modifyitems(config, items):
    """Without ``--long``, the tests marked ``long`` are deselected (not run, not skipped)."""
    if config.getoption("long"):
        return
    kept = [i for i in items if i.get_closest_marker("long") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


@pytest.fixture
def aircc_env(monkeypatch):
    """``aircc_env(NAME, value)`` sets an environment variable aircc reads and makes aircc
    read its environment again (:func:`aircc.config.reload`); both are undone after the test."""
    from aircc import config

    def set_var(name: str, value: str) -> None:
        monkeypatch.setenv(name, value)
        config.reload()

    yield set_var
    monkeypatch.undo()
    config.reload()


@pytest.fixture
def no_faults_left():
    """No injected fault before the test or after it (hung kernels are let go)."""
    from aircc import faults

    faults.clear()
    yield
    faults.clear()


@pytest.fixture(scope="session")
def device():
    """One virtual device for the whole session (as a process would have)."""
    from aircc.executor.device.device import VirtualDevice

    dev = VirtualDevice(8 << 30)
    yield dev
    dev.close()


def pytest_terminal_summary(terminalreporter):
    """Print the .om fuzz run's counts, and the ONNX conformance pass count (and every
    failure with its op and reason)."""
    from fuzz_om import SUMMARY as FUZZ

    if FUZZ:
        terminalreporter.section("fuzzing the .om reader and loader")
        for line in FUZZ[0].splitlines():
            terminalreporter.write_line(line)
    from dtype_sweep import SUMMARY as DTYPES

    if DTYPES:
        terminalreporter.section("dtype sweep of the numpy backend's native kernels")
        for line in DTYPES[0].splitlines():
            terminalreporter.write_line(line)
    try:
        from conformance import SUMMARY
    except ImportError:
        return
    for target, summary in SUMMARY.items():
        tr = terminalreporter
        tr.section(f"ONNX backend conformance (plain-tensor node cases), target {target}")
        tr.write_line(f"passed {summary['passed']} of {summary['total']} "
                      f"({100 * summary['passed'] / summary['total']:.1f}%)")
        for name, ops, reason in summary["failures"]:
            tr.write_line(f"  FAIL {name} [{', '.join(ops)}]: {reason}")

"""The corpus's cases: its fast subset, or every model with ``--corpus``; each (model,
mode) marked ``corpus``, known failures marked strict xfail with their root cause; the
results table printed at the end of the run."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")   # nothing is downloaded: every model is built here

from corpus.harness import MODES, header  # noqa: E402
from corpus.known import KNOWN  # noqa: E402
from corpus.models import ENTRIES, FAST  # noqa: E402

RESULTS: list = []


def pytest_generate_tests(metafunc):
    if "corpus_case" not in metafunc.fixturenames:
        return
    names = list(ENTRIES) if metafunc.config.getoption("corpus") else list(FAST)
    params = []
    for name in names:
        for mode in MODES:
            marks = [pytest.mark.corpus]
            if (name, mode) in KNOWN:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[name, mode]))
            params.append(pytest.param((name, mode), id=f"{name}-{mode}", marks=marks))
    metafunc.parametrize("corpus_case", params)


@pytest.fixture
def corpus_results() -> list:
    """Where each case adds its outcome, for the table at the end of the run."""
    return RESULTS


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    terminalreporter.section("export corpus: one line per model and mode (tests/corpus/table.py)")
    terminalreporter.write_line(header())
    for outcome in RESULTS:
        terminalreporter.write_line(outcome.line())
    failed = sum(not o.passed for o in RESULTS)
    terminalreporter.write_line(f"{len(RESULTS) - failed} passed, {failed} failed "
                                f"({sum(o.seconds for o in RESULTS):.0f} s, exports included)")

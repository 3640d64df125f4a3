"""Kernel tests: ``@pytest.mark.last`` tests run after every other test of the session."""
from __future__ import annotations

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "last: run after every other collected test")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)

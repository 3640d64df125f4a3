"""aircc's log: the ``aircc`` logger and its children, one per stage.

Nothing is printed unless asked: ``aircc --log LEVEL`` / ``airrun --log LEVEL`` (also
spelt ATC's way, ``--log=info``) or ``$AIR_LOG`` set the level (``debug``, ``info``,
``warning``, ``error``) and send the messages to stderr as ``aircc LEVEL [stage]
message``.  A program using the API may attach its own handlers to the ``aircc``
logger instead.

- ``info``: what each stage did (compile stages and their times, a model loaded,
  devices found, a profile written);
- ``warning``: what went wrong and was handled (a device unavailable, a recovery);
- ``debug``: every run.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import sys

LEVELS = ("debug", "info", "warning", "error")
ROOT = "aircc"
_handler: logging.Handler | None = None


def get(stage: str) -> logging.Logger:
    """The logger of ``stage`` (``compile``, ``load``, ``devices``, ``run``, ...).  The
    first call applies ``$AIR_LOG`` when it is set."""
    if _handler is None:
        from aircc.config import settings

        if settings().log:
            configure(settings().log)
    return logging.getLogger(f"{ROOT}.{stage}")


def configure(level: str) -> None:
    """Print the ``aircc`` loggers' messages of ``level`` and above on stderr."""
    global _handler
    level = level.lower()
    if level not in LEVELS:
        from aircc.errors import ConfigError

        raise ConfigError(f"log level {level!r}: expected one of {', '.join(LEVELS)}")
    root = logging.getLogger(ROOT)
    if _handler is None:
        _handler = _Stderr()
        _handler.setFormatter(logging.Formatter("aircc %(levelname)s [%(name)s] %(message)s"))
        root.addHandler(_handler)
        root.propagate = False
    root.setLevel(getattr(logging, level.upper()))


@contextlib.contextmanager
def level(name: str | None):
    """Print the log at ``name`` inside the block (a command's ``--log``), then put back
    what was set before; None: leave it as it is."""
    if name is None:
        yield
        return
    root = logging.getLogger(ROOT)
    before = root.level
    configure(name)
    try:
        yield
    finally:
        root.setLevel(before)


def levelled(command):
    """A command whose ``log_level`` argument (``--log``) sets the log level while it runs."""
    @functools.wraps(command)
    def run(*args, log_level: str | None = None, **kwargs):
        with level(log_level):
            return command(*args, log_level=log_level, **kwargs)
    return run


class _Stderr(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is when a message comes (a command
    run inside a test runner, or any caller that swaps stderr, still gets its log)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass

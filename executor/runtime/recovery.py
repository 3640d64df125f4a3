"""Recovery policies: what a loaded model does when a run fails, after the runtime this
project models (retry; release cached memory and retry on out of memory; retry with a
longer timeout; reset the device or fail over to another one when it is lost).

A policy is given per model (``aircc.load(..., recovery=RecoveryPolicy(...))``) or for
the whole process (``$AIRCC_RECOVERY``, the same fields as ``key=value`` pairs)::

    AIRCC_RECOVERY="retries=1,out_of_memory=release_and_retry,timeout_retries=1,device_lost=reset"

Every action and retry comes out of the run's one deadline (:class:`RunDeadline`), which
only a retry after a timeout extends.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from aircc.config import settings
from aircc.errors import ConfigError, RunTimeoutError

ON_OUT_OF_MEMORY = ("fail", "release_and_retry")
ON_DEVICE_LOST = ("fail", "reset", "failover")


@dataclass(frozen=True)
class RecoveryPolicy:
    """What to do when a run fails (each failed attempt is logged in ``model.recoveries``)."""

    retries: int = 0
    """Runs again after a kernel error, at most this many times."""
    out_of_memory: str = "release_and_retry"
    """``release_and_retry``: give back every cached block of the device's pools and run
    once more; ``fail``: raise."""
    timeout_retries: int = 0
    """Runs again after a timeout, each time with the last deadline times ``timeout_factor``,
    counted from the retry's start (:class:`RunDeadline`)."""
    timeout_factor: float = 2.0
    device_lost: str = "reset"
    """``reset``: reset the device, write the model's weights again and run once more;
    ``failover``: load the model on the next device of ``failover_devices`` (reset when
    there is none) and run there; ``fail``: raise (the next run raises too, until the
    device is reset)."""
    failover_devices: tuple = ()
    """Devices to fail over to, in order (``VirtualDevice`` objects)."""

    def __post_init__(self):
        problems = []
        if not (isinstance(self.retries, int) and self.retries >= 0):
            problems.append(f"retries must be an int >= 0, got {self.retries!r}")
        if not (isinstance(self.timeout_retries, int) and self.timeout_retries >= 0):
            problems.append(f"timeout_retries must be an int >= 0, got {self.timeout_retries!r}")
        if not (isinstance(self.timeout_factor, (int, float)) and self.timeout_factor >= 1):
            problems.append(f"timeout_factor must be a number >= 1, got {self.timeout_factor!r}")
        if self.out_of_memory not in ON_OUT_OF_MEMORY:
            problems.append(f"out_of_memory must be one of {', '.join(ON_OUT_OF_MEMORY)}, "
                            f"got {self.out_of_memory!r}")
        if self.device_lost not in ON_DEVICE_LOST:
            problems.append(f"device_lost must be one of {', '.join(ON_DEVICE_LOST)}, "
                            f"got {self.device_lost!r}")
        if problems:
            raise ConfigError(f"recovery policy: {'; '.join(problems)}")

    @staticmethod
    def parse(text: str) -> "RecoveryPolicy":
        """``"retries=1,device_lost=reset"`` -> a policy (ConfigError naming what is wrong)."""
        fields = {f.name: f for f in dataclasses.fields(RecoveryPolicy) if f.name != "failover_devices"}
        values: dict = {}
        for item in filter(None, (x.strip() for x in text.split(","))):
            key, eq, value = item.partition("=")
            key = key.strip()
            if not eq or key not in fields:
                raise ConfigError(f"recovery policy: '{item}' is not one of "
                                  f"{', '.join(k + '=' for k in fields)}")
            kind = fields[key].type
            try:
                values[key] = (int(value) if kind == "int" else float(value) if kind == "float"
                               else value.strip())
            except ValueError:
                raise ConfigError(f"recovery policy: {key}={value!r} is not a{'n' if kind == 'int' else ''} "
                                  f"{kind}") from None
        return RecoveryPolicy(**values)


@dataclass
class RunDeadline:
    """The deadline of one ``run()`` call: ``budget`` seconds from its start.

    Everything the call does comes out of it: waiting for the model (runs take turns),
    every attempt, and every recovery action and retry between attempts (a reset, a
    failover load, a release of cached memory, a retry after a kernel error).  A retry
    after a timeout (``timeout_retries``) is the one extension: it gets the last budget
    times ``timeout_factor``, counted from when it starts, so that with ``timeout=T``,
    ``timeout_retries=n`` and ``timeout_factor=f`` a call ends within about
    ``T + T*f + ... + T*f**n`` seconds (plus a kernel's grace of 0.2 s to stop)."""

    budget: float
    end: float

    @staticmethod
    def starting_now(budget: float) -> "RunDeadline":
        return RunDeadline(budget, time.monotonic() + budget)

    @staticmethod
    def for_call(timeout, default: float) -> "RunDeadline":
        """The deadline of a call given ``timeout`` (None: ``default``), from now."""
        return RunDeadline.starting_now(default if timeout is None else seconds(timeout))

    def left(self) -> float:
        """Seconds left (<= 0: passed)."""
        return self.end - time.monotonic()

    def extend(self, factor: float) -> None:
        """A retry after a timeout: ``factor`` times the budget, from now."""
        self.budget *= factor
        self.end = time.monotonic() + self.budget

    def restate(self, error: RunTimeoutError, given: float) -> RunTimeoutError:
        """An attempt's timeout (it was ``given`` seconds, what was left) as this run's: the
        message names the run's deadline, the stream and the task."""
        if given >= self.budget:
            return error
        message = error.message.replace(f"deadline of {given:g} s",
                                        f"deadline of {self.budget:g} s", 1)
        out = RunTimeoutError(message, stream=error.stream, task=error.task)
        if hasattr(error, "stuck"):
            out.stuck = error.stuck
        return out


def default_policy() -> RecoveryPolicy:
    """The process's default: ``$AIRCC_RECOVERY``, else :class:`RecoveryPolicy`'s defaults."""
    text = settings().recovery
    return RecoveryPolicy.parse(text) if text else RecoveryPolicy()


def seconds(value) -> float:
    """A deadline in seconds (ConfigError unless it is a number > 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigError(f"timeout must be a number of seconds > 0, got {value!r}")
    return float(value)

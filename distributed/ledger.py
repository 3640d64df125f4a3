"""What a dataset run did: every batch's outcome, kept by one small Ray actor, and the
summary read from it at the end.

A model actor reports each batch it finishes or fails to the :class:`RunLedger` (one
call per batch, waited for, so nothing is in flight when the driver reads it).  Records
are keyed by the batch's first row: a batch retried after its actor died counts once.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

from aircc.errors import BatchFailedError


def batch_name(first_row: int, last_row: int) -> str:
    """A batch's id: the rows it holds, e.g. ``rows 96-127``."""
    return f"rows {first_row}-{last_row}"


@dataclass(frozen=True)
class BatchFailure:
    """One batch that failed with an aircc error (its rows have no outputs)."""

    batch: str
    """Its id: ``rows FIRST-LAST`` (row indices of the input, from 0)."""
    first_row: int
    last_row: int
    rows: int
    code: int
    """The aircc error's code (``aircc.errors``)."""
    error: str
    """The aircc error's class name."""
    message: str
    actor_pid: int

    def describe(self) -> str:
        return (f"batch {self.batch} ({self.rows} rows) failed: {self.error} [{self.code}] "
                f"{self.message}")

    def as_error(self) -> BatchFailedError:
        return BatchFailedError(self.describe(), self.batch, self.code)


@dataclass
class Summary:
    """The end of a dataset run: rows and batches done, time, throughput, failures."""

    rows: int
    """Rows with outputs (those resumed from a checkpoint included)."""
    batches: int
    """Batches that ran (each counted once, however often it was retried; not those
    resumed from a checkpoint)."""
    seconds: float
    """Wall time of the run, from the driver."""
    actors: int
    """The size of the actor pool."""
    actors_started: int
    """Model actors that loaded the model: ``actors`` plus any Ray started again."""
    actor_restarts: int
    """Of those, how many were an actor Ray restarted after it died."""
    actors_used: int = 0
    """Actor processes that ran at least one batch."""
    actor_threads: list[int] = field(default_factory=list)
    """The aircc threads of each actor started, sized to the CPUs Ray gave it."""
    window_seconds: float = 0.0
    """From the start of the first batch to the end of the last (the actors' clocks):
    the run without the actors' start-up and the model's load."""
    failures: list[BatchFailure] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """The files written (:meth:`InferenceJob.write`), in input order."""
    resumed_batches: int = 0
    """Batches found done in the job's checkpoint (not run again)."""
    resumed_rows: int = 0

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def rows_per_second_in_window(self) -> float:
        return self.rows / self.window_seconds if self.window_seconds > 0 else 0.0

    @property
    def failed_rows(self) -> int:
        return sum(f.rows for f in self.failures)

    def format(self) -> str:
        """A few lines for people: counts, throughput, then each failed batch."""
        head = (f"rows {self.rows}, batches {self.batches}, {self.seconds:.2f} s, "
                f"{self.rows_per_second:.1f} rows/s ({self.rows_per_second_in_window:.1f} "
                f"once the actors ran), actors {self.actors} "
                f"({self.actor_restarts} restarted), failed batches {len(self.failures)} "
                f"({self.failed_rows} rows)")
        if self.resumed_batches:
            head += (f", resumed {self.resumed_batches} batches ({self.resumed_rows} rows) "
                     f"from the checkpoint")
        lines = [head]
        lines += [f"  {f.describe()}" for f in self.failures]
        return "\n".join(lines)

    @classmethod
    def from_json(cls, text: str) -> Summary:
        """The summary :meth:`to_json` wrote."""
        d = json.loads(text)
        names = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in names}
        d["failures"] = [BatchFailure(**f) for f in d.get("failures", [])]
        return cls(**d)

    def to_json(self) -> str:
        d = asdict(self)
        d["rows_per_second"] = self.rows_per_second
        d["rows_per_second_in_window"] = self.rows_per_second_in_window
        d["failed_rows"] = self.failed_rows
        return json.dumps(d, indent=1)


class RunLedger:
    """The Ray actor that model actors report to (created with ``ray.remote`` by the job,
    with no CPU of its own)."""

    def __init__(self) -> None:
        self.done: dict[int, tuple[int, float, float, int]] = {}
        """First row -> (rows, start and end time of the batch, actor pid)."""
        self.failed: dict[int, BatchFailure] = {}
        self.starts: list[tuple[int, bool, int]] = []

    def actor_started(self, pid: int, restarted: bool, threads: int) -> None:
        self.starts.append((pid, restarted, threads))

    def batch_done(self, first_row: int, rows: int, start: float, end: float, pid: int) -> None:
        self.done[first_row] = (rows, start, end, pid)
        self.failed.pop(first_row, None)

    def batch_failed(self, failure: BatchFailure) -> None:
        if failure.first_row not in self.done:
            self.failed[failure.first_row] = failure

    def report(self) -> dict:
        done = self.done.values()
        window = max(e for _, _, e, _ in done) - min(s for _, s, _, _ in done) if done else 0.0
        return {"batches": len(self.done), "rows": sum(d[0] for d in done),
                "window_seconds": window, "actors_used": len({d[3] for d in done}),
                "failures": [self.failed[k] for k in sorted(self.failed)],
                "actors_started": len(self.starts),
                "actor_restarts": sum(1 for _, restarted, _ in self.starts if restarted),
                "actor_threads": [t for _, _, t in self.starts]}

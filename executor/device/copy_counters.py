"""What copies a device made: per direction and mode the calls and bytes (issued by
:mod:`.copies`), and the copies models' runs make of their inputs and outputs
(:class:`ModelCopies`).  :func:`copy_stats` reads them, :func:`reset_copy_stats` starts
them again."""
from __future__ import annotations

import threading
import weakref

from .pinned import pinned_pool

#: Directions counted by :func:`copy_stats` (a peer copy counts as ``peer_out`` on its
#: source device and ``peer_in`` on its destination).
DIRECTIONS = ("h2d", "d2h", "d2d", "peer_out", "peer_in")

#: Directions of the copies models' runs make (:class:`ModelCopies`): an input fed from
#: the host and an output returned to it; a device tensor fed or filled instead: d2d.
MODEL_DIRECTIONS = ("h2d", "d2h", "d2d")

_lock = threading.Lock()


def _counters(device) -> dict:
    c = device.__dict__.get("copy_counters")
    if c is None:
        with _lock:
            c = device.__dict__.setdefault("copy_counters", _new_counters())
    return c


def _new_counters() -> dict:
    c = {d: {m: {"calls": 0, "bytes": 0} for m in ("sync", "async")} for d in DIRECTIONS}
    c.update(failed=0, staged_bytes=0, model={d: [0, 0] for d in MODEL_DIRECTIONS})
    return c


class ModelCopies:
    """The copies one execution context's runs make: each input copied to the device
    (``h2d``), each output copied off it (``d2h``), and a device tensor fed or filled in
    their place (``d2d``).  Counted by the thread running the context (one at a time),
    without a lock; :func:`copy_stats` adds up every context's of a device.

    A run of the context's one fixed program counts only itself (``plain_runs``): the
    program's copies per run are :attr:`per_plain_run`."""

    __slots__ = ("device", "counts", "plain_runs", "per_plain_run", "__weakref__")

    def __init__(self, device):
        self.device = device
        self.counts = {d: [0, 0] for d in MODEL_DIRECTIONS}
        """Per direction: [calls, bytes]."""
        self.plain_runs = 0
        self.per_plain_run: dict[str, tuple[int, int]] = {}
        with _lock:
            device.__dict__.setdefault("model_copies", weakref.WeakSet()).add(self)

    def add(self, direction: str, nbytes: int) -> None:
        c = self.counts[direction]
        c[0] += 1
        c[1] += nbytes

    def totals(self) -> dict[str, list[int]]:
        """Per direction: [calls, bytes] so far."""
        out = {d: list(c) for d, c in self.counts.items()}
        for d, (calls, nbytes) in self.per_plain_run.items():
            out[d][0] += calls * self.plain_runs
            out[d][1] += nbytes * self.plain_runs
        return out

    def close(self) -> None:
        """The context is gone: its counts stay in the device's."""
        totals = self.totals()
        c = _counters(self.device)
        with _lock:
            self.device.__dict__.get("model_copies", set()).discard(self)
            for d, (calls, nbytes) in totals.items():
                c["model"][d][0] += calls
                c["model"][d][1] += nbytes
        self.counts = {d: [0, 0] for d in MODEL_DIRECTIONS}
        self.plain_runs = 0


def count(device, direction: str, mode: str, nbytes: int, staged: int = 0) -> None:
    """Count one copy issued to ``device``."""
    c = _counters(device)
    with _lock:
        c[direction][mode]["calls"] += 1
        c[direction][mode]["bytes"] += nbytes
        c["staged_bytes"] += staged


def count_failed(device) -> None:
    """Count a copy whose task raised."""
    c = _counters(device)
    with _lock:
        c["failed"] += 1


def copy_stats(device) -> dict:
    """Copies issued to ``device``: per direction (:data:`DIRECTIONS`) and mode (``sync``,
    ``async``) the calls and bytes; ``failed`` (copies whose task raised),
    ``staged_bytes`` (through pinned buffers), the pinned pool's statistics, and
    ``model``: per direction (:data:`MODEL_DIRECTIONS`) the calls and bytes of the copies
    models' runs made (:class:`ModelCopies`)."""
    c = _counters(device)
    with _lock:
        out = {d: {m: dict(v) for m, v in c[d].items()} for d in DIRECTIONS}
        out.update(failed=c["failed"], staged_bytes=c["staged_bytes"])
        model = {d: list(v) for d, v in c["model"].items()}
        live = list(device.__dict__.get("model_copies", ()))
    for part in live:
        for d, (calls, nbytes) in part.totals().items():
            model[d][0] += calls
            model[d][1] += nbytes
    out["model"] = {d: {"calls": calls, "bytes": nbytes} for d, (calls, nbytes) in model.items()}
    out["device"] = device.id
    out["pinned_pool"] = pinned_pool().stats()
    return out


def reset_copy_stats(device) -> None:
    """Start ``device``'s copy counters again from zero (its models' too)."""
    with _lock:
        device.__dict__["copy_counters"] = _new_counters()
        live = list(device.__dict__.get("model_copies", ()))
    for part in live:
        part.counts = {d: [0, 0] for d in MODEL_DIRECTIONS}
        part.plain_runs = 0

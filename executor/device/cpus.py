"""CPU lists: which host CPUs a device's stream workers may run on."""
from __future__ import annotations

import os

from aircc.errors import DeviceError


def parse_cpus(text: str) -> frozenset[int]:
    """``"0"``, ``"0,1"``, ``"0-3,6"`` -> a set of CPU numbers."""
    cpus: set[int] = set()
    text = text.replace(" ", "")
    if not text:
        raise DeviceError("empty CPU list: no CPU in it")
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise DeviceError(f"bad CPU list {text!r}: expected e.g. '0', '0,1' or '0-3'") from None
    if not cpus:
        raise DeviceError(f"bad CPU list {text!r}: no CPU in it")
    return frozenset(cpus)


def check_cpus(cpus) -> frozenset[int] | None:
    """``cpus`` (a CPU list string or numbers) checked against the CPUs this process may
    use; None stays None (no pinning)."""
    if cpus is None:
        return None
    cpus = parse_cpus(cpus) if isinstance(cpus, str) else frozenset(int(c) for c in cpus)
    if not hasattr(os, "sched_setaffinity"):
        raise DeviceError("pinning device workers to CPUs is not supported on this platform "
                          "(no sched_setaffinity)")
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed:
        raise DeviceError(f"device CPUs {sorted(cpus)} are not all available to this process "
                          f"(available: {sorted(allowed)})")
    return cpus

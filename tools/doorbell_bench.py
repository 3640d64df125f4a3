"""Measure a host-to-worker-to-host round trip of two threads, the device's handoff.

For each waiting mechanism and each pause between rounds (the host's own work between
two runs), the median round trip in microseconds and the part from the host's ring to
the worker's wake-up:

- ``queue+event``: a ``queue.SimpleQueue`` to the worker and a ``threading.Event`` back
  (what the streams used before the doorbells);
- ``doorbell, sleeping``: the C bell with no spinning (a futex each way);
- ``doorbell, spinning``: the C bell as the device uses it (the worker spins for the
  next ring, the host for the answer; rings made with the GIL released).

Usage: ``python tools/doorbell_bench.py [--rounds N]``.
"""
from __future__ import annotations

import argparse
import queue
import statistics
import threading
import time

from aircc.executor.device.doorbell import NativeBell


def _pause(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def queue_event(rounds: int, gap: float) -> tuple[float, float]:
    q: queue.SimpleQueue = queue.SimpleQueue()
    done = threading.Event()
    woke = [0.0]

    def worker():
        while True:
            task = q.get()
            if task is None:
                return
            woke[0] = time.perf_counter()
            task()

    th = threading.Thread(target=worker)
    th.start()
    trips, lags = [], []
    for _ in range(rounds):
        done.clear()
        t = time.perf_counter()
        q.put(done.set)
        done.wait()
        trips.append(time.perf_counter() - t)
        lags.append(woke[0] - t)
        _pause(gap)
    q.put(None)
    th.join()
    return statistics.median(trips), statistics.median(lags)


def doorbell(rounds: int, gap: float, spin_ns: int) -> tuple[float, float]:
    to_worker, to_host = NativeBell(), NativeBell()
    woke = [0.0]

    def worker():
        seen, answer = 0, None
        for _ in range(rounds):
            to_worker.ring_wait(answer, seen, spin_ns, -1)   # answer the last round, wait
            seen = to_worker.count
            woke[0] = time.perf_counter()
            answer = to_host
        to_host.ring()

    th = threading.Thread(target=worker)
    th.start()
    trips, lags = [], []
    for _ in range(rounds):
        seen = to_host.count
        t = time.perf_counter()
        to_host.ring_wait(to_worker, seen, spin_ns, -1)
        trips.append(time.perf_counter() - t)
        lags.append(woke[0] - t)
        _pause(gap)
    th.join()
    return statistics.median(trips), statistics.median(lags)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3000)
    args = ap.parse_args()
    if NativeBell is None:
        raise SystemExit("the doorbell C module is not built here")
    print(f"{'mechanism':<22} {'pause us':>8} {'round trip us':>14} {'ring to wake us':>16}")
    for gap in (0.0, 50e-6, 200e-6, 1e-3):
        for name, measure in (("queue+event", lambda: queue_event(args.rounds, gap)),
                              ("doorbell, sleeping", lambda: doorbell(args.rounds, gap, 0)),
                              ("doorbell, spinning", lambda: doorbell(args.rounds, gap, 2_000_000))):
            trip, lag = measure()
            print(f"{name:<22} {gap * 1e6:>8.0f} {trip * 1e6:>14.1f} {lag * 1e6:>16.1f}")


if __name__ == "__main__":
    main()

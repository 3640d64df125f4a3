"""Chaos under load: models served from several threads while faults fire at random.

    python tests/chaos.py --seeds 0-9 --requests 250 --seconds 6   # one JSON line per seed

Two virtual devices, each with a heartbeat; a static and a dynamic build of a
three-stream model, each loaded once on device 0 with a policy that fails over to the
other device, each served by ``--threads`` threads with short deadlines.  A monkey thread
arms a fault every few milliseconds: a kernel error, a hang past the deadline, an
out-of-memory, a device loss (injected in a kernel, or from outside, as a pulled card),
or a device that stops answering (its heartbeat puts it in FAULT); an operator thread
resets faulted devices, as a supervisor would.

Every request must return the output of a fault-free run, bit for bit, or raise a named
aircc error; none may hang.  Afterwards the faults are cleared and the same requests
must be right again; then device memory, live streams, compute units, threads and
file descriptors must be back where they were before the storm (measured in this
process, which runs nothing else).  A crash kills the process: the caller sees its exit
status.  ``tests/e2e/test_chaos.py`` runs it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
import traceback
from collections import Counter

import numpy as np

os.environ.setdefault("AIR_LOG", "error")       # each recovery logs a warning: thousands
import aircc  # noqa: E402
from aircc import faults  # noqa: E402
from aircc.errors import AirccError  # noqa: E402
from aircc.executor.device.device import VirtualDevice  # noqa: E402
from graphs import diamond  # noqa: E402

NODES = ("stem", "mul0", "mul1", "mul2", "tanh0", "tanh1", "sum")
#: The faults the monkey arms, and how often ("pulled": a device lost from outside).
KINDS = ["kernel_error", "hang", "oom", "device_lost", "pulled", "unresponsive"]
ODDS = [0.28, 0.2, 0.2, 0.14, 0.1, 0.08]
#: A request's deadline; injected hangs last up to three times as long.
DEADLINE = 0.25
#: A request still running after this many seconds is a hang.
HUNG = 15.0
HEARTBEAT = 0.05


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def process_threads() -> int:
    return threading.active_count()


def device_footprint(devices) -> dict:
    """What the storm must give back on each device."""
    out = {}
    for d in devices:
        streams = sum(1 for s in [*d.streams, d.control] if s.alive)
        out[str(d.id)] = {"allocated": d.memory.allocated, "units_free": d.units.free,
                     "units": d.units.count, "streams": streams}
    return out


def settle(devices, timeout: float = 20.0) -> bool:
    """Every stuck kernel returned, every device answering and reset to HEALTHY."""
    end = time.monotonic() + timeout
    ok = all(d.settle(max(0.0, end - time.monotonic())) for d in devices)
    for d in devices:
        if not d.usable:
            d.reset()
    while time.monotonic() < end and any(
            t.name.startswith(f"dev{d.id}") and not t.is_alive() for d in devices
            for t in threading.enumerate()):
        time.sleep(0.01)
    return ok


class Storm:
    """The monkey and the operator of one seed."""

    def __init__(self, rng: np.random.Generator, devices: list[VirtualDevice]):
        self.rng, self.devices = rng, devices
        self.armed: Counter = Counter()
        self.stop = threading.Event()

    def monkey(self) -> None:
        rng = self.rng
        first = list(rng.permutation(KINDS))        # every kind once, then at random
        while not self.stop.wait(float(rng.uniform(0.005, 0.05))):
            kind = str(first.pop() if first else rng.choice(KINDS, p=ODDS))
            node = str(rng.choice(NODES))
            self.armed[kind] += 1
            if kind == "hang":
                faults.inject("hang", node=node, seconds=float(rng.uniform(0.05, 3 * DEADLINE)))
            elif kind == "pulled":
                self.devices[int(rng.integers(2))].inject_fault("pulled out")
            elif kind == "unresponsive":
                faults.inject("unresponsive", device=int(rng.integers(2)),
                              seconds=float(rng.uniform(0.05, 0.3)))
            else:
                faults.inject(kind, node=node)

    def operator(self) -> None:
        """Resets a faulted device after a while, as a supervisor would."""
        while not self.stop.wait(0.05):
            for d in self.devices:
                if not d.usable and not d.closed and self.rng.random() < 0.5:
                    try:
                        d.reset()
                    except AirccError:
                        pass                      # unavailable: not in this storm


def storm(seed: int, requests: int, seconds: float, threads: int) -> dict:
    """One seed's storm: until ``requests`` requests have ended, at least 0.3 s has passed
    and every kind of fault was armed, or until ``seconds`` have passed."""
    rng = np.random.default_rng(seed)
    fds, nthreads = open_fds(), process_threads()
    devices = [VirtualDevice(64 << 20, device_id=i, name=f"chaos{i}") for i in range(2)]
    for d in devices:
        d.enable_fault_detection(interval=HEARTBEAT)
    idle = device_footprint(devices)
    policy = aircc.RecoveryPolicy(device_lost="failover", failover_devices=tuple(devices))
    builds = {mode: aircc.compile(diamond(), mode=mode, min_branch_bytes=0,
                                  split_matrix_branches=True).om for mode in ("static", "dynamic")}
    models = {mode: aircc.load(om, device=devices[0], recovery=policy)
              for mode, om in builds.items()}
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(16)]
    want = {mode: [m.run({"x": x})["y"] for x in xs] for mode, m in models.items()}
    for m in models.values():
        m.release_cached()
    loaded = sum(d.memory.allocated for d in devices)

    tally: Counter = Counter()
    errors: Counter = Counter()
    raw: list[str] = []
    wrong: list[str] = []
    in_flight: dict[int, float] = {}
    lock = threading.Lock()
    start = time.monotonic()
    end = start + seconds

    def storming() -> bool:
        now = time.monotonic()
        short = now < start + 0.3 or sum(tally.values()) < requests \
            or len(chaos.armed) < len(KINDS)          # every kind of fault armed once at least
        return now < end and short

    def serve(worker: int, mode: str) -> None:
        m, local = models[mode], np.random.default_rng([seed, worker])
        while storming():
            k = int(local.integers(len(xs)))
            with lock:
                in_flight[worker] = time.monotonic()
            try:
                got = m.run({"x": xs[k]}, timeout=DEADLINE)["y"]
            except AirccError as e:
                with lock:
                    tally["named"] += 1
                    errors[type(e).__name__] += 1
            except BaseException:                           # what the storm must never see
                with lock:
                    tally["raw"] += 1
                    raw.append(traceback.format_exc(limit=8))
            else:
                right = isinstance(got, np.ndarray) and np.array_equal(got, want[mode][k])
                with lock:
                    tally["right" if right else "wrong"] += 1
                    if not right:
                        wrong.append(f"{mode} input {k}: got {got!r:.200}, want "
                                     f"{want[mode][k].ravel()[:4]}; device {m.device.id}, "
                                     f"recoveries {m.recoveries[-3:]}")
            finally:
                with lock:
                    in_flight.pop(worker, None)

    chaos = Storm(rng, devices)
    helpers = [threading.Thread(target=chaos.monkey, name="monkey"),
               threading.Thread(target=chaos.operator, name="operator")]
    workers = [threading.Thread(target=serve, args=(w, ("static", "dynamic")[w % 2]),
                                name=f"serve{w}") for w in range(threads)]
    for t in (*helpers, *workers):
        t.start()
    hung = 0
    while any(t.is_alive() for t in workers):
        time.sleep(0.1)
        with lock:
            oldest = min(in_flight.values(), default=time.monotonic())
        if time.monotonic() - oldest > HUNG:
            hung += 1
            break
    for t in workers:
        t.join(HUNG)
    chaos.stop.set()
    for t in helpers:
        t.join(5)
    hung += sum(t.is_alive() for t in workers)
    faults.clear()
    settled = settle(devices)

    after_ok = 0                                # the same requests, no faults: all right again
    for mode, m in models.items():
        for k, x in enumerate(xs):
            after_ok += np.array_equal(m.run({"x": x}, timeout=30)["y"], want[mode][k])
    on = {mode: m.device.id for mode, m in models.items()}
    actions = Counter(re.sub(r" \d+.*", "", r["action"]) for m in models.values()
                      for r in m.recoveries)
    for m in models.values():
        m.release_cached()
    for d in devices:
        d.release_cached()
    still_loaded = sum(d.memory.allocated for d in devices)   # wherever the models are now
    for m in models.values():
        m.close()
    settle(devices)
    after = device_footprint(devices)
    for d in devices:
        d.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (process_threads() != nthreads or open_fds() != fds):
        time.sleep(0.02)
    stuck_threads = [t.name for t in threading.enumerate()
                     if re.match(r"dev\d+-|chaos|serve|monkey|operator", t.name)]
    return {"seed": seed, "requests": sum(tally.values()), **tally, "errors": dict(errors),
            "faults": dict(chaos.armed), "hung": hung, "raw_traces": raw[:3],
            "wrong_samples": wrong[:3], "after_ok": after_ok, "after_of": 2 * len(xs),
            "recoveries": dict(actions), "ended_on": on, "settled": settled,
            "loaded_bytes": [loaded, still_loaded], "idle": [idle, after],
            "threads": [nthreads, process_threads()], "stuck_threads": stuck_threads,
            "fds": [fds, open_fds()]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-9", help="a range a-b or a list a,b,c")
    ap.add_argument("--requests", type=int, default=250, help="requests per seed")
    ap.add_argument("--seconds", type=float, default=6.0, help="longest storm per seed")
    ap.add_argument("--threads", type=int, default=4, help="serving threads (half per model)")
    args = ap.parse_args()
    a, dash, b = args.seeds.partition("-")
    seeds = range(int(a), int(b) + 1) if dash else [int(s) for s in args.seeds.split(",")]
    for seed in seeds:
        print(json.dumps(storm(seed, args.requests, args.seconds, args.threads)), flush=True)


if __name__ == "__main__":
    main()

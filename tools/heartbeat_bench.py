"""Measure what fault detection (a heartbeat on the device's control processor) costs a
busy device's runs.

One process, one loaded model run in a loop on logical device 0; the loop is cut into
blocks of about ``--block-seconds`` each, and the blocks take turns: fault detection off,
then on at each interval given, in a rotating order (round ``r`` starts at setting ``r``).
For each setting: the median over its blocks of the block's median run time; the
overhead against ``off`` as the median of the paired ratios (each block against the
``off`` block of its round), its bootstrap 95% interval and the quartiles; and the CPU
time the heartbeat's two threads (the scheduler, the control processor's worker) took
per beat.

An interval below fault detection's shortest (50 ms) is set on the heartbeat directly, to
amplify its cost until a noisy machine shows it (the cost is per beat: a tenth of the
interval, ten times the cost); misses are set high so that no block faults the device.

``--latency N``: instead, while the model runs in a loop on another thread, time N
round trips of a tiny task through the control processor (10 ms apart): how late a beat
may be answered on a busy machine, which bounds how short an interval can be.

Usage: ``python tools/heartbeat_bench.py [--model resnet50|bert] [--intervals-ms 100,10,2]
[--rounds N] [--block-seconds S] [--latency N]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import numpy as np
import onnx

import aircc

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")


def load(model: str):
    """(loaded model, feeds): ResNet-50 light (static), or the BERT sample (static, 1 x 16)."""
    if model == "resnet50":
        m = aircc.load(aircc.compile(os.path.join(LIGHT, "light_resnet50.onnx")))
        x = np.random.default_rng(0).standard_normal(m.inputs[0].shape).astype(np.float32)
        return m, {m.inputs[0].name: x}
    shapes = {"input_ids": [1, 16], "attention_mask": [1, 16]}
    m = aircc.load(aircc.compile(os.path.join(SAMPLES, "bert_encoder.onnx"), input_shapes=shapes))
    ids = np.ones((1, 16), np.int64)
    return m, {"input_ids": ids, "attention_mask": ids}


def block(m, feeds: dict, seconds: float) -> float:
    """The median run time (ms) of runs for about ``seconds``."""
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t = time.perf_counter()
        m.run(feeds)
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def latency(m, feeds: dict, rounds: int) -> None:
    """Print the round trip of a tiny control-processor task while ``m`` runs in a loop."""
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            m.run(feeds)
    runner = threading.Thread(target=loop)
    runner.start()
    times = []
    for _ in range(rounds):
        done = threading.Event()
        t = time.perf_counter()
        m.device.run_on_control(done.set)
        done.wait()
        times.append(1e3 * (time.perf_counter() - t))
        time.sleep(0.01)
    stop.set()
    runner.join()
    q = statistics.quantiles(times, n=100)
    print(f"control processor round trip over {rounds}: median {statistics.median(times):.3f} ms, "
          f"p90 {q[89]:.3f}, p99 {q[98]:.3f}, max {max(times):.3f} ms; load average "
          f"{os.getloadavg()[0]:.1f}")


def cpu_seconds(thread) -> float:
    """CPU time ``thread`` (alive) has used."""
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["resnet50", "bert"], default="resnet50")
    ap.add_argument("--intervals-ms", default="100,10,2")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--block-seconds", type=float, default=0.5)
    ap.add_argument("--latency", type=int, default=0, metavar="N")
    args = ap.parse_args()
    settings = [None] + [float(x) for x in args.intervals_ms.split(",")]
    m, feeds = load(args.model)
    device = m.device
    for _ in range(20):
        m.run(feeds)                                   # warm up
    if args.latency:
        latency(m, feeds, args.latency)
        m.close()
        return
    load_before = os.getloadavg()[0]
    blocks: dict = {s: [] for s in settings}
    beats = {s: 0 for s in settings}
    cpu = {s: 0.0 for s in settings}
    for r in range(args.rounds):
        for k in range(len(settings)):
            s = settings[(r + k) % len(settings)]
            if s is None:
                device.disable_fault_detection()
                blocks[s].append(block(m, feeds, args.block_seconds))
                continue
            hb = device.enable_fault_detection(max(s, 50) / 1e3, misses=1000)
            hb.interval = s / 1e3                      # below 50 ms: amplified (module doc)
            while hb.answered < 1:                     # the control worker runs (a thread
                m.run(feeds)                           # start is not a beat's cost)
            threads = (hb._thread, device.control._worker)
            cpu0, beats0 = sum(map(cpu_seconds, threads)), hb.answered
            blocks[s].append(block(m, feeds, args.block_seconds))
            cpu[s] += sum(map(cpu_seconds, threads)) - cpu0
            beats[s] += hb.answered - beats0
            device.disable_fault_detection()           # the next block starts afresh
    m.close()
    name = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                 if line.startswith("model name")), "?")
    off = statistics.median(blocks[None])
    print(f"{args.model}: {args.rounds} rounds of {args.block_seconds:g} s blocks, "
          f"{os.cpu_count()} CPUs ({name}), load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print(f"  off: {off:.3f} ms a run (median of block medians)")
    for s in settings[1:]:
        ratios = np.array([on / base for on, base in zip(blocks[s], blocks[None])])
        q = statistics.quantiles(ratios, n=4)
        boot = np.median(np.random.default_rng(0).choice(ratios, (2000, len(ratios))), axis=1)
        lo, hi = np.percentile(boot, [2.5, 97.5])
        per_beat = cpu[s] / max(1, beats[s])
        print(f"  every {s:g} ms: {statistics.median(blocks[s]):.3f} ms, paired overhead "
              f"median {100 * (q[1] - 1):+.2f}% (95% CI {100 * (lo - 1):+.2f}% .. "
              f"{100 * (hi - 1):+.2f}%, quartiles {100 * (q[0] - 1):+.2f}% .. "
              f"{100 * (q[2] - 1):+.2f}%); {beats[s]} beats, {1e6 * per_beat:.0f} us of CPU "
              f"a beat = {100 * per_beat / (s / 1e3) / (os.cpu_count() or 1):.3f}% of the "
              f"machine")


if __name__ == "__main__":
    main()

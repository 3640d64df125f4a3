"""What airrun prints: benchmark timings, run and memory statistics, the device list."""
from __future__ import annotations

import contextlib
import math
import sys
import time
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from aircc.executor.runtime.engine import RunStats

#: Latency percentiles a benchmark reports (nearest rank).
PERCENTILES = (50, 90, 95, 99)


def format_devices(infos: list) -> str:
    """The ``--list-devices`` table."""
    lines = [f"{'logical':>7}  {'physical':>8}  {'name':<10} {'state':<12} {'memory':>10}  "
             f"{'units':>5}  {'cpus':<8} {'probe ms':>8}  note"]
    for i in infos:
        lines.append(f"{'-' if i.logical_id is None else i.logical_id:>7}  {i.physical_id:>8}  "
                     f"{i.name:<10} {i.state:<12} {_size(i.memory_bytes):>10}  "
                     f"{i.compute_units:>5}  {i.cpus:<8} "
                     f"{'-' if i.probe_ms is None else f'{i.probe_ms:.1f}':>8}  {i.reason}")
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def time_runs(model, feeds: dict, n: int, warmup: int = 3, progress: bool = False,
              in_flight: int = 1) -> dict:
    """Latencies of ``n`` runs after ``warmup`` runs (like trtexec or iree-benchmark-module):
    median, mean, nearest-rank percentiles, min, max, throughput, host time per run.
    ``in_flight``: requests kept in flight through ``run_async`` (like benchmark_app's
    ``-nireq``), each one's latency from its submission; the throughput is then ``n`` over
    the wall time.  ``progress``: a progress bar on stderr."""
    for _ in range(warmup):
        model.run(feeds)
    lat, host = [], []
    bar = click.progressbar(range(n), label="benchmark", file=sys.stderr) if progress \
        else contextlib.nullcontext(range(n))
    start = time.perf_counter()
    with bar as runs:
        if in_flight == 1:
            for _ in runs:
                t = time.perf_counter()
                model.run(feeds)
                lat.append(time.perf_counter() - t)
                host.append(model.last_host_seconds)
        else:
            lat = _in_flight(model, feeds, runs, in_flight)
            host = [model.last_host_seconds]
    wall = time.perf_counter() - start
    lat.sort()
    out = {"runs": n, "warmup": warmup, "requests_in_flight": in_flight,
           "median_ms": 1e3 * lat[n // 2], "mean_ms": 1e3 * sum(lat) / n}
    for q in PERCENTILES:
        out[f"p{q}_ms"] = 1e3 * lat[max(0, math.ceil(q / 100 * n) - 1)]
    out.update(min_ms=1e3 * lat[0], max_ms=1e3 * lat[-1],
               throughput_per_s=n / (sum(lat) if in_flight == 1 else wall),
               host_us_median=1e6 * sorted(host)[len(host) // 2])
    return out


def _in_flight(model, feeds: dict, runs, width: int) -> list[float]:
    """Each request's latency, ``width`` of them kept in flight until ``runs`` are done."""
    import concurrent.futures as cf

    lat, pending = [], {}
    for _ in runs:
        if len(pending) == width:
            done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for f in done:
                f.result()                     # a failed request fails the benchmark
                lat.append(time.perf_counter() - pending.pop(f))
        pending[model.run_async(feeds)] = time.perf_counter()
    for f in cf.as_completed(list(pending)):
        f.result()
        lat.append(time.perf_counter() - pending[f])
    return lat


def format_benchmark(b: dict) -> str:
    pct = "  ".join(f"p{q} {b[f'p{q}_ms']:.3f} ms" for q in PERCENTILES)
    flight = f" ({b['requests_in_flight']} requests in flight)" if b.get("requests_in_flight", 1) > 1 else ""
    return (f"benchmark: {b['runs']} runs after {b['warmup']} warm-up{flight}  median {b['median_ms']:.3f} ms  "
            f"mean {b['mean_ms']:.3f} ms  {pct}  min {b['min_ms']:.3f} ms  max {b['max_ms']:.3f} ms  "
            f"{b['throughput_per_s']:.1f} inferences/s  host {b['host_us_median']:.0f} us/inference")


def format_memory(s: dict) -> str:
    """The device memory pool's statistics (``--stats``)."""
    return "\n".join([
        f"device memory        {s['reserved_bytes']} bytes reserved of {s['capacity_bytes']}, "
        f"{s['allocated_bytes']} allocated, {s['cached_bytes']} cached "
        f"({s['cached_blocks']} blocks)",
        f"memory peaks         {s['peak_allocated_bytes']} bytes allocated, "
        f"{s['peak_reserved_bytes']} bytes reserved",
        f"fragmentation        {100 * s['fragmentation']:.1f}% of free device memory, "
        f"{100 * s['cached_fragmentation']:.1f}% of cached blocks"])


def format_stats(s: RunStats) -> str:
    lines = [f"mode                 {s.mode}", f"runs                 {s.runs}"]
    if s.mode == "dynamic":
        lines += [
            f"runtime cores        {s.runtime_core_number}",
            f"runs through the host kernels  {s.host_kernel_runs}: {s.launches} launches "
            f"(host submissions), {1e3 * s.host_seconds_per_host_kernel_run:.3f} ms host time each",
            f"replayed runs        {s.replays}: one submission each, "
            f"{1e6 * s.host_seconds_per_replay:.0f} us host time each, no InferShape or "
            f"Tiling ({s.replay_shapes} input shapes recorded)",
            f"tiling cache         over the host-kernel runs: {s.tiling_cache_hits} hits, "
            f"{s.tiling_cache_misses} misses ({100 * s.tiling_cache_hit_rate:.1f}% hit rate; "
            f"the first run of a shape misses)",
            f"host-placed ops      {s.host_ops}",
            f"d2h syncs            {s.d2h_syncs}",
            f"allocator peaks      {s.peak_allocated_bytes} bytes allocated, "
            f"{s.peak_reserved_bytes} bytes reserved",
            f"prepared weights     {s.prepared_bytes} bytes",
            "host time per op (us, InferShape + Tiling + Alloc + Launch):",
        ]
        lines += [f"  {op:<24} {us:>10.1f}" for op, us in s.host_us_per_op.items()]
    else:
        lines += [f"host submissions     {s.host_submissions} ({s.submissions_per_run:.2f} per run)",
                  f"streams              {s.streams}, events {s.events}",
                  f"arena                {s.arena_bytes} bytes, weights {s.weights_bytes} bytes, "
                  f"prepared weights {s.prepared_bytes} bytes"]
        if s.gears:
            lines.append(f"gears                {s.gears}")
    return "\n".join(lines)

"""``airrun``: run an .om model on the virtual device."""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click
import numpy as np

from aircc import log
from aircc.errors import CommandLineError, DeviceError

from . import value_files
from .errors import EXIT_CODES_HELP, OneLineErrorCommand
from .feeds import narrow_type_bits, random_inputs, read_inputs
from .dataset_cmd import dataset_options
from .paths import check_output_path, write_atomically
from .shapes import parse_device_memory, parse_input_shapes
from .reports import format_benchmark, format_devices, format_memory, format_stats, time_runs

if TYPE_CHECKING:
    from aircc.executor.device.device import VirtualDevice


@dataclass(frozen=True)
class Benchmark:
    """``--benchmark N`` (None: no benchmark), ``--warmup``, ``--benchmark-json``."""

    runs: int | None
    warmup: int = 3
    json_path: str | None = None
    requests: int = 1
    """Requests kept in flight (``--requests``)."""


def make_device(device_memory: str | None, device_cpus: str | None) -> VirtualDevice | None:
    """A device of the capacity and CPUs given on the command line (None: none given)."""
    if not (device_memory or device_cpus):
        return None
    from aircc.executor.device.device import VirtualDevice, check_cpus

    memory = parse_device_memory(device_memory)
    if device_cpus is not None:
        try:
            check_cpus(device_cpus)
        except DeviceError as e:
            raise CommandLineError(f"--device-cpus: {e.message}") from None
    return VirtualDevice(memory, cpus=device_cpus)


def parse_device_list(text: str | None) -> list[int] | str | None:
    """``--devices``: ``"0,1"`` -> [0, 1]; ``"all"`` as is."""
    if text is None:
        return None
    if text.strip().lower() == "all":
        return "all"
    try:
        ids = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise CommandLineError(f"--devices {text!r}: expected logical device ids like 0,1 "
                               f"or all") from None
    if not ids:
        raise CommandLineError("--devices: no device given")
    return ids


def parse_priority(text: str | None) -> int | str:
    """``--priority``: an int in -7..7, or low / normal / high."""
    if text is None:
        return 0
    from aircc.executor.device.compute_units import check_priority

    try:
        return check_priority(int(text) if text.lstrip("-").isdigit() else text)
    except ValueError as e:
        raise CommandLineError(f"--priority: {e}") from None


def parse_fault_detection(text: str | None) -> float | None:
    """``--fault-detection MS`` -> seconds between heartbeats (0 or off: 0.0; not given:
    None)."""
    if text is None:
        return None
    from aircc.executor.device.heartbeat import interval_from_ms

    try:
        return interval_from_ms(text, "--fault-detection") or 0.0
    except ValueError as e:
        raise CommandLineError(str(e)) from None


def start_fault_detection(interval: float | None, device: VirtualDevice | None) -> None:
    """A heartbeat every ``interval`` seconds (0.0: none) on ``device``, or on every
    discovered device; not given: ``$AIR_FAULT_DETECTION_MS`` (discovery applies it to
    its own devices)."""
    from aircc.config import settings
    from aircc.executor.device.discovery import registry

    if interval is None:
        interval = settings().fault_detection
        if interval is None or device is None:
            return
    for d in [device] if device is not None else registry().devices:
        if interval:
            d.enable_fault_detection(interval)
        else:
            d.disable_fault_detection()


def npz_path(output: str) -> str:
    """Where ``np.savez`` puts ``output``: ``.npz`` is added when the name lacks it."""
    return output if output.endswith(".npz") else output + ".npz"


@click.command(cls=OneLineErrorCommand, epilog=EXIT_CODES_HELP)
@click.version_option(package_name="aircc")
@click.argument("model", type=click.Path(exists=True, dir_okay=False), required=False)
@click.option("--list-devices", is_flag=True,
              help="List the devices discovery found ($AIR_DEVICE_CONFIG, $AIR_VISIBLE_DEVICES) "
                   "and exit.")
@click.option("--device", "device_id", type=click.IntRange(min=0), default=None, metavar="N",
              help="Run on logical device N (default 0).")
@click.option("--devices", "device_list", default=None, metavar="LIST",
              help="Split the batch across these logical devices, e.g. 0,1 or all; the "
                   "outputs are gathered in order.")
@click.option("--priority", default=None, metavar="P",
              help="The model's stream priority on the device: -7..7 or low, normal, high "
                   "(higher is served first).")
@click.option("-i", "--input", "input_specs", multiple=True, metavar="[NAME=]FILE.npy|FILE.npz",
              help="Input data (repeatable): .npy files in input order, NAME=FILE.npy, or an .npz by name.")
@click.option("--random", "random_seed", type=int, default=None, metavar="SEED",
              help="Feed random inputs drawn with this seed instead of files.")
@click.option("--input-shape", "--input_shape", "input_shapes", multiple=True,
              metavar="NAME:D1,D2,...",
              help="Shape of a random input whose dims are symbolic (dynamic and gear models; "
                   "repeatable, or ';'-separated).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write outputs to this .npz.")
@click.option("--device-memory", default=None, metavar="BYTES",
              help="Device memory capacity, e.g. 2G or 512M (default 8G or $AIR_DEVICE_MEMORY).")
@click.option("--device-cpus", default=None, metavar="LIST",
              help="Run the device's stream workers, and airrun's host thread while it runs the "
                   "model, on these CPUs, e.g. 0 or 0-1 (default $AIR_DEVICE_CPUS, else not pinned).")
@click.option("--quiet", is_flag=True, help="Do not print output values.")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False), default=None,
              metavar="TRACE.json",
              help="Write a Chrome trace of the runs (Perfetto opens it): host threads, device "
                   "streams, copies, events as arrows, and whether the run was Host or Device Bound.")
@click.option("--profile-summary", is_flag=True,
              help="Print the profile's verdict and a per-op table (count, total, mean, share).")
@click.option("--stats", "show_stats", is_flag=True,
              help="Print run statistics: host time per op, tiling cache, host ops, allocator peaks.")
@click.option("--runtime-cores", type=click.Choice(["1", "3"]), default=None,
              help="Dynamic models: 1 = sequential host, 3 = pipelined host "
                   "(default $AIR_RUNTIME_CORE_NUMBER or 3).")
@click.option("--pad-to-gear", is_flag=True, help="Gear models: pad a batch up to the next gear.")
@click.option("--no-replay", is_flag=True,
              help="Dynamic models: run every inference through the host kernels (no replay of "
                   "recorded launches for known input shapes).")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run this many times (statistics cover every run).")
@click.option("--benchmark", "--iterations", "benchmark", type=click.IntRange(min=1),
              default=None, metavar="N",
              help="Time N runs after the warm-up: latency median, mean, p50/p90/p95/p99, min, "
                   "max, throughput, host time per inference.")
@click.option("--hint", type=click.Choice(["latency", "throughput"]), default="latency",
              show_default=True,
              help="latency: one execution context on every CPU; throughput: a context per "
                   "group of CPUs, each on its own group.")
@click.option("--contexts", type=click.IntRange(min=1), default=None, metavar="N",
              help="Execution contexts: runs the model takes at once (default: 1, or with "
                   "--hint throughput one per CPU, up to 4).")
@click.option("--requests", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="With --benchmark: keep N requests in flight (run_async), and report "
                   "throughput and the latency of each request.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, metavar="N",
              help="Untimed runs before a benchmark.")
@click.option("--benchmark-json", "benchmark_json", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="Also write the benchmark's figures to FILE as JSON.")
@click.option("--log", "log_level", type=click.Choice(["debug", "info", "warning", "error"]),
              default=None, help="Print aircc's log at this level on stderr (default $AIR_LOG, "
                                 "else none).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS",
              help="Deadline of each run: past it the run is cancelled and fails naming the "
                   "stream and the task it is stuck in (default $AIRCC_RUN_TIMEOUT or 600).")
@click.option("--recovery", default=None, metavar="POLICY",
              help="What to do when a run fails, e.g. retries=1,device_lost=reset "
                   "(default $AIRCC_RECOVERY; docs/errors.md).")
@click.option("--threads", type=click.IntRange(min=1), default=None, metavar="N",
              help="Threads every pool aircc drives may use: numpy's BLAS, oneDNN's OpenMP, "
                   "the device's stream workers (default $AIRCC_THREADS, else the CPUs "
                   "this process may use).")
@click.option("--fault-detection", "fault_detection", default=None, metavar="MS",
              help="Check each device with a heartbeat every MS milliseconds: a device that "
                   "misses 3 in a row goes to FAULT and its run recovers as --recovery says "
                   "(default $AIR_FAULT_DETECTION_MS, else off; 0: off).")
@dataset_options
@log.levelled
def main(model, list_devices, device_id, device_list, priority, input_specs, random_seed,
         input_shapes, output, device_memory, device_cpus, quiet, profile_path, profile_summary,
         show_stats, runtime_cores, pad_to_gear, no_replay, repeat, benchmark, hint, contexts,
         requests, warmup, benchmark_json, log_level, timeout, recovery, threads,
         fault_detection, **dataset):
    """Run the .om MODEL once on the virtual device and print its outputs."""
    import aircc

    if list_devices:
        click.echo(format_devices(aircc.devices()))
        return
    if model is None:
        raise CommandLineError("give the .om MODEL to run (or --list-devices)")
    if dataset["dataset"] is not None or dataset["ray_address"] is not None:   # on Ray
        if fault_detection is not None:
            raise CommandLineError("--fault-detection checks this process's devices; a dataset "
                                   "job's actors read $AIR_FAULT_DETECTION_MS where they run")
        from .dataset_cmd import run_dataset_command
        return run_dataset_command(model, device_memory=device_memory, single_run=bool(
            input_specs or random_seed is not None or output), **dataset)
    if (device_memory or device_cpus) and (device_id is not None or device_list):
        raise CommandLineError("--device-memory/--device-cpus make a device of their own; "
                               "they cannot go with --device or --devices")
    if device_id is not None and device_list:
        raise CommandLineError("give --device N or --devices LIST, not both")
    if random_seed is None and not input_specs:
        raise CommandLineError("give --input FILE.npy (or --random SEED)")
    if output:
        check_output_path(npz_path(output))
    if profile_path:
        check_output_path(profile_path)
    if benchmark_json:
        if not benchmark:
            raise CommandLineError("--benchmark-json needs --benchmark N (or --iterations N)")
        check_output_path(benchmark_json)
    if requests > 1 and not benchmark:
        raise CommandLineError("--requests keeps requests in flight for --benchmark N: give it too")
    if (hint != "latency" or contexts) and device_list:
        raise CommandLineError("--hint and --contexts shape one device's contexts; they cannot "
                               "go with --devices")
    if input_shapes and random_seed is None:
        raise CommandLineError("--input-shape shapes random inputs: give it with --random SEED")
    if (profile_path or profile_summary) and device_list:
        raise CommandLineError("--profile and --profile-summary profile one device; they cannot "
                               "go with --devices")
    policy = None
    if recovery is not None:
        from aircc.executor.runtime.recovery import RecoveryPolicy
        policy = RecoveryPolicy.parse(recovery)
    heartbeat = parse_fault_detection(fault_detection)
    if threads is not None:
        aircc.set_threads(threads)
    device = make_device(device_memory, device_cpus)
    try:
        start_fault_detection(heartbeat, device)
        t0 = time.perf_counter()
        m = aircc.load(model, device=device if device is not None else device_id,
                       devices=parse_device_list(device_list), pad_to_gear=pad_to_gear,
                       replay=not no_replay, timeout=timeout, recovery=policy,
                       priority=parse_priority(priority), hint=hint, contexts=contexts,
                       runtime_core_number=int(runtime_cores) if runtime_cores else None)
        load_s = time.perf_counter() - t0
        try:
            run_and_report(m, input_specs, random_seed, output, quiet, show_stats, repeat,
                           Benchmark(benchmark, warmup, benchmark_json, requests), load_s, profile_path,
                           profile_summary, parse_input_shapes(input_shapes))
        finally:
            m.close()
    finally:
        if device is not None:
            device.close()


def run_and_report(m, input_specs: tuple[str, ...], random_seed: int | None, output: str | None,
                   quiet: bool, show_stats: bool, repeat: int, bench: Benchmark,
                   load_s: float, profile_path: str | None = None,
                   profile_summary: bool = False, shapes: dict | None = None) -> None:
    """Feed the loaded model ``m``, run it, save and print its outputs and timings."""
    if random_seed is not None:
        feeds = random_inputs(m.inputs, random_seed, shapes or {})
    else:
        feeds = narrow_type_bits(read_inputs(input_specs, m.inputs), m.inputs)
    devices = getattr(m, "devices", None) or [m.device]
    with devices[0].host_thread_on_device_cpus():
        if bench.runs:
            figures = time_runs(m, feeds, bench.runs, bench.warmup,
                                progress=not quiet and sys.stdout.isatty(), in_flight=bench.requests)
            click.echo(format_benchmark(figures))
            if bench.json_path:
                write_atomically(bench.json_path, lambda f: f.write(
                    json.dumps({"model": m.name, **figures}, indent=2).encode()))
        profiler = m.start_profiling() if profile_path or profile_summary else None
        t0 = time.perf_counter()
        for _ in range(repeat):
            outputs = m.run(feeds)
        run_s = (time.perf_counter() - t0) / repeat
        if profiler is not None:
            m.end_profiling(profile_path) if profile_path else m.end_profiling(os.devnull)
    if output:
        packed = value_files.pack(outputs, m.outputs)
        write_atomically(npz_path(output), lambda f: np.savez(f, **packed))
    for name, value in outputs.items():
        click.echo(f"{name}: {value_files.describe(value)}")
        if not quiet and value is not None:
            with np.printoptions(precision=5, threshold=20, edgeitems=4, suppress=True):
                click.echo(f"  {value}")
    models = getattr(m, "models", None) or [m]
    submissions = sum(model.run_stats().host_submissions for model in models)
    on = f" on devices {','.join(str(d.id) for d in devices)}" if len(devices) > 1 else ""
    click.echo(f"load {load_s * 1e3:.1f} ms, run {run_s * 1e3:.1f} ms{on}, "
               f"host submissions {submissions}", err=True)
    if profile_summary:
        from aircc.executor.runtime.profiling import format_summary
        click.echo(format_summary(profiler.summary()))
    if show_stats:
        for d, model in zip(devices, models):
            if len(devices) > 1:
                click.echo(f"device {d.id}:")
            click.echo(format_stats(model.run_stats()))
            click.echo(format_memory(d.memory_stats()))



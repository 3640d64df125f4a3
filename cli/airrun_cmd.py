"""``airrun``: run an .om model on the virtual device."""
from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import click
import numpy as np

from aircc.errors import CommandLineError, DeviceError, InputError

from . import value_files
from .errors import EXIT_CODES_HELP, OneLineErrorCommand
from .paths import check_output_path, write_atomically

if TYPE_CHECKING:
    from aircc.executor.device.device import VirtualDevice

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def load_array_file(path: str) -> np.ndarray | np.lib.npyio.NpzFile:
    """The array of an .npy file or the NpzFile of an .npz (without pickle); InputError
    naming the file when it is missing, unreadable or not one of those."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except FileNotFoundError:
        raise InputError(f"input file {path!r} does not exist") from None
    except OSError as e:
        raise InputError(f"cannot read input file {path!r}: {e.strerror or e}") from None
    if head != NPY_MAGIC and not head.startswith(ZIP_MAGICS):
        raise InputError(f"input file {path!r} is not a .npy or .npz file")
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:  # numpy's errors for a damaged file have no common base
        raise InputError(f"input file {path!r} cannot be loaded: {type(e).__name__}: {e}") from None


def read_npz(path: str, known: list[str], specs: list[dict] | None = None) -> dict:
    """Every array of the .npz at ``path``, by name; each must be an input of the model
    (with ``specs``: sequences and optionals as :mod:`.value_files` says)."""
    feeds = {}
    with load_array_file(path) as z:
        unknown = [] if specs else sorted(set(z.files) - set(known))
        if unknown:
            raise InputError(f"input file {path!r} holds {unknown}, which the model does not "
                             f"have; its inputs are {known}")
        for k in z.files:
            try:
                feeds[k] = z[k]
            except Exception as e:
                raise InputError(f"input file {path!r}: array {k!r} cannot be loaded: "
                                 f"{type(e).__name__}: {e}") from None
    return feeds if specs is None else value_files.unpack(feeds, specs, path)


def read_inputs(specs: tuple[str, ...], inputs: list[dict]) -> dict[str, np.ndarray]:
    """``x.npy`` (inputs in order), ``name=x.npy``, or ``feeds.npz`` (by name)."""
    feeds: dict[str, np.ndarray] = {}
    positional = [i["name"] for i in inputs]
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        elif name not in positional:
            raise InputError(f"--input {spec}: the model has no input {name!r}; "
                             f"its inputs are {positional}")
        loaded = load_array_file(path)
        if not isinstance(loaded, np.ndarray):
            loaded.close()
            if name:
                raise InputError(f"--input {spec}: an .npz holds inputs by name; give it "
                                 f"without NAME=")
            feeds.update(read_npz(path, positional, inputs))
            continue
        if not name:
            free = [n for n in positional if n not in feeds]
            if not free:
                raise InputError(f"--input {path}: more input files than the model has "
                                 f"inputs ({positional})")
            name = free[0]
        dtype = next(i["dtype"] for i in inputs if i["name"] == name)
        if value_files.kind(dtype) == "sequence" or dtype.startswith("optional:sequence:"):
            raise InputError(f"--input {spec}: input '{name}' is a {dtype}; give it in an .npz "
                             f"as {name}/0, {name}/1, ... ({name}/ alone when empty)")
        feeds[name] = loaded
    return value_files.empty_optionals(feeds, inputs)


def narrow_type_bits(feeds: dict[str, np.ndarray], inputs: list[dict]) -> dict[str, np.ndarray]:
    """Feeds of the inputs typed bfloat16, float8, float4, int4 or int2 (ml_dtypes' dtypes)
    as ``np.save`` writes such arrays: raw bytes (``|V2`` for bfloat16, ``|V1`` for the
    others), read back as the input's dtype (the same bits)."""
    from aircc.formats.checks import ML_DTYPES

    for i in inputs:
        a, dt = feeds.get(i["name"]), ML_DTYPES.get(i["dtype"])
        if (dt is not None and isinstance(a, np.ndarray) and a.dtype.kind == "V"
                and a.dtype.names is None and a.dtype.itemsize == dt.itemsize):
            feeds[i["name"]] = a.view(dt)
    return feeds


def random_inputs(inputs: list[dict], seed: int) -> dict[str, np.ndarray]:
    """Inputs drawn from a generator seeded with ``seed`` (every shape must be static)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in inputs:
        if value_files.kind(i["dtype"]) != "tensor":
            raise CommandLineError(f"--random: input '{i['name']}' is a {i['dtype']}; give "
                                   f"--input")
        if not all(isinstance(d, int) for d in i["shape"]):
            raise CommandLineError(f"--random: input '{i['name']}' has a symbolic shape "
                                   f"{i['shape']}; give --input")
        dt = np.dtype(i["dtype"])
        if dt.kind == "f":
            feeds[i["name"]] = rng.standard_normal(i["shape"]).astype(dt)
        elif dt.kind == "b":
            feeds[i["name"]] = rng.random(i["shape"]) < 0.5
        else:
            feeds[i["name"]] = rng.integers(0, 10, i["shape"]).astype(dt)
    return feeds


def make_device(device_memory: str | None, device_cpus: str | None) -> VirtualDevice | None:
    """A device of the capacity and CPUs given on the command line (None: none given)."""
    if not (device_memory or device_cpus):
        return None
    from aircc.config import parse_bytes
    from aircc.executor.device.device import VirtualDevice, check_cpus

    memory = None
    if device_memory:
        try:
            memory = parse_bytes(device_memory)
        except ValueError as e:
            raise CommandLineError(f"--device-memory: {e}") from None
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


def npz_path(output: str) -> str:
    """Where ``np.savez`` puts ``output``: ``.npz`` is added when the name lacks it."""
    return output if output.endswith(".npz") else output + ".npz"


@click.command(cls=OneLineErrorCommand, epilog=EXIT_CODES_HELP)
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
@click.option("--benchmark", type=click.IntRange(min=1), default=None, metavar="N",
              help="Time N runs after 3 warm-up runs: latency median/mean/p90/min, throughput, "
                   "host time per inference.")
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
def main(model, list_devices, device_id, device_list, priority, input_specs, random_seed, output,
         device_memory, device_cpus, quiet, profile_path, profile_summary, show_stats,
         runtime_cores, pad_to_gear, no_replay, repeat, benchmark, timeout, recovery, threads):
    """Run the .om MODEL once on the virtual device and print its outputs."""
    import aircc

    if list_devices:
        click.echo(format_devices(aircc.devices()))
        return
    if model is None:
        raise CommandLineError("give the .om MODEL to run (or --list-devices)")
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
    if (profile_path or profile_summary) and device_list:
        raise CommandLineError("--profile and --profile-summary profile one device; they cannot "
                               "go with --devices")
    policy = None
    if recovery is not None:
        from aircc.executor.runtime.recovery import RecoveryPolicy
        policy = RecoveryPolicy.parse(recovery)
    if threads is not None:
        aircc.set_threads(threads)
    device = make_device(device_memory, device_cpus)
    try:
        t0 = time.perf_counter()
        m = aircc.load(model, device=device if device is not None else device_id,
                       devices=parse_device_list(device_list), pad_to_gear=pad_to_gear,
                       replay=not no_replay, timeout=timeout, recovery=policy,
                       priority=parse_priority(priority),
                       runtime_core_number=int(runtime_cores) if runtime_cores else None)
        load_s = time.perf_counter() - t0
        try:
            run_and_report(m, input_specs, random_seed, output, quiet, show_stats, repeat,
                           benchmark, load_s, profile_path, profile_summary)
        finally:
            m.close()
    finally:
        if device is not None:
            device.close()


def run_and_report(m, input_specs: tuple[str, ...], random_seed: int | None, output: str | None,
                   quiet: bool, show_stats: bool, repeat: int, benchmark: int | None,
                   load_s: float, profile_path: str | None = None,
                   profile_summary: bool = False) -> None:
    """Feed the loaded model ``m``, run it, save and print its outputs and timings."""
    if random_seed is not None:
        feeds = random_inputs(m.inputs, random_seed)
    else:
        feeds = narrow_type_bits(read_inputs(input_specs, m.inputs), m.inputs)
    devices = getattr(m, "devices", None) or [m.device]
    with devices[0].host_thread_on_device_cpus():
        if benchmark:
            click.echo(format_benchmark(time_runs(m, feeds, benchmark)))
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
    submissions = sum(d.stats["host_submissions"] for d in devices)
    on = f" on devices {','.join(str(d.id) for d in devices)}" if len(devices) > 1 else ""
    click.echo(f"load {load_s * 1e3:.1f} ms, run {run_s * 1e3:.1f} ms{on}, "
               f"host submissions {submissions}", err=True)
    if profile_summary:
        from aircc.executor.runtime.profiling import format_summary
        click.echo(format_summary(profiler.summary()))
    if show_stats:
        models = getattr(m, "models", None) or [m]
        for d, model in zip(devices, models):
            if len(devices) > 1:
                click.echo(f"device {d.id}:")
            click.echo(format_stats(model.run_stats()))
            click.echo(format_memory(d.memory_stats()))


def time_runs(model, feeds: dict, n: int, warmup: int = 3) -> dict:
    """Latencies of ``n`` runs after ``warmup`` runs (like trtexec or iree-benchmark-module)."""
    for _ in range(warmup):
        model.run(feeds)
    lat, host = [], []
    for _ in range(n):
        t = time.perf_counter()
        model.run(feeds)
        lat.append(time.perf_counter() - t)
        host.append(model.last_host_seconds)
    lat.sort()
    return {"runs": n, "median_ms": 1e3 * lat[n // 2], "mean_ms": 1e3 * sum(lat) / n,
            "p90_ms": 1e3 * lat[min(n - 1, int(0.9 * n))], "min_ms": 1e3 * lat[0],
            "throughput_per_s": n / sum(lat), "host_us_median": 1e6 * sorted(host)[n // 2]}


def format_benchmark(b: dict) -> str:
    return (f"benchmark: {b['runs']} runs  median {b['median_ms']:.3f} ms  mean {b['mean_ms']:.3f} ms  "
            f"p90 {b['p90_ms']:.3f} ms  min {b['min_ms']:.3f} ms  "
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


def format_stats(s: dict) -> str:
    lines = [f"mode                 {s['mode']}", f"runs                 {s['runs']}"]
    if s["mode"] == "dynamic":
        lines += [
            f"runtime cores        {s['runtime_core_number']}",
            f"tiling cache         {s['tiling_cache_hits']} hits, {s['tiling_cache_misses']} misses "
            f"({100 * s['tiling_cache_hit_rate']:.1f}% hit rate)",
            f"host-placed ops      {s['host_ops']}",
            f"replays              {s['replays']} ({s['replay_shapes']} input shapes recorded)",
            f"host time per run    {1e3 * s['host_seconds_per_run']:.3f} ms",
            f"d2h syncs            {s['d2h_syncs']}",
            f"allocator peaks      {s['peak_allocated_bytes']} bytes allocated, "
            f"{s['peak_reserved_bytes']} bytes reserved",
            f"prepared weights     {s['prepared_bytes']} bytes",
            "host time per op (us, InferShape + Tiling + Alloc + Launch):",
        ]
        lines += [f"  {op:<24} {us:>10.1f}" for op, us in s["host_us_per_op"].items()]
    else:
        lines += [f"host submissions     {s['host_submissions']} ({s['submissions_per_run']:.2f} per run)",
                  f"streams              {s['streams']}, events {s['events']}",
                  f"arena                {s['arena_bytes']} bytes, weights {s['weights_bytes']} bytes, "
                  f"prepared weights {s['prepared_bytes']} bytes"]
        if s.get("gears"):
            lines.append(f"gears                {s['gears']}")
    return "\n".join(lines)

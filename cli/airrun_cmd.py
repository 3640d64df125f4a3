"""``airrun``: run an .om model on the virtual device."""
from __future__ import annotations

import sys
import time

import click
import numpy as np

from aircc.errors import AirccError


def read_inputs(specs: tuple[str, ...], inputs: list[dict]) -> dict[str, np.ndarray]:
    """``x.npy`` (inputs in order), ``name=x.npy``, or ``feeds.npz`` (by name)."""
    feeds: dict[str, np.ndarray] = {}
    positional = [i["name"] for i in inputs]
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        if path.endswith(".npz"):
            with np.load(path) as z:
                feeds.update({k: z[k] for k in z.files})
            continue
        arr = np.load(path)
        if not name:
            taken = [n for n in positional if n not in feeds]
            if not taken:
                raise click.BadParameter(f"more inputs given than the model has ({positional})")
            name = taken[0]
        feeds[name] = arr
    return feeds


def random_inputs(inputs: list[dict], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in inputs:
        if not all(isinstance(d, int) for d in i["shape"]):
            raise click.UsageError(f"input '{i['name']}' has a symbolic shape {i['shape']}; give --input")
        dt = np.dtype(i["dtype"])
        if dt.kind == "f":
            feeds[i["name"]] = rng.standard_normal(i["shape"]).astype(dt)
        elif dt.kind == "b":
            feeds[i["name"]] = rng.random(i["shape"]) < 0.5
        else:
            feeds[i["name"]] = rng.integers(0, 10, i["shape"]).astype(dt)
    return feeds


@click.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("-i", "--input", "input_specs", multiple=True, metavar="[NAME=]FILE.npy|FILE.npz",
              help="Input data (repeatable): .npy files in input order, NAME=FILE.npy, or an .npz by name.")
@click.option("--random", "random_seed", type=int, default=None, metavar="SEED",
              help="Feed random inputs drawn with this seed instead of files.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write outputs to this .npz.")
@click.option("--device-memory", default=None, metavar="BYTES",
              help="Device memory capacity, e.g. 2G or 512M (default 8G or $AIR_DEVICE_MEMORY).")
@click.option("--quiet", is_flag=True, help="Do not print output values.")
def main(model, input_specs, random_seed, output, device_memory, quiet):
    """Run the .om MODEL once on the virtual device and print its outputs."""
    try:
        import aircc
        from aircc.executor.device.device import VirtualDevice, parse_bytes

        device = VirtualDevice(parse_bytes(device_memory)) if device_memory else None
        t0 = time.perf_counter()
        m = aircc.load(model, device=device)
        load_s = time.perf_counter() - t0
        if random_seed is not None:
            feeds = random_inputs(m.inputs, random_seed)
        elif input_specs:
            feeds = read_inputs(input_specs, m.inputs)
        else:
            raise click.UsageError("give --input FILE.npy (or --random SEED)")
        t0 = time.perf_counter()
        outputs = m.run(feeds)
        run_s = time.perf_counter() - t0
    except AirccError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    if output:
        np.savez(output, **outputs)
    for name, value in outputs.items():
        click.echo(f"{name}: {value.dtype}{list(value.shape)}")
        if not quiet:
            with np.printoptions(precision=5, threshold=20, edgeitems=4, suppress=True):
                click.echo(f"  {value}")
    stats = m.device.stats
    click.echo(f"load {load_s * 1e3:.1f} ms, run {run_s * 1e3:.1f} ms, "
               f"host submissions {stats['host_submissions']}", err=True)

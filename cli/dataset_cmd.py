"""``airrun MODEL --dataset DIR --output-dir OUT [--ray [ADDRESS]] [--resume]``: run an .om
over a directory of .npy/.npz or Parquet shards with a pool of Ray actors
(:mod:`aircc.distributed`) and write the outputs as shards in input order.

The job records each finished batch in ``OUT/.checkpoint`` as it is done; ``--resume``
after its driver was killed runs only the batches missing there.  Once the outputs are
written the batch files are let go and the checkpoint says the job is complete."""
from __future__ import annotations

import os

import click

from aircc.errors import BatchFailedError, CommandLineError

from .shapes import parse_device_memory

#: ``--ray`` given without an address: Ray's own choice (``$RAY_ADDRESS``, a cluster
#: started on this machine with ``ray start``, else a new local instance).
LOCAL = "local"


def dataset_options(f):
    """The options of a dataset run, for ``airrun``."""
    options = [
        click.option("--dataset", default=None, metavar="DIR",
                     help="Run over every row of the .npy/.npz or .parquet shards in DIR on "
                          "Ray (docs/distributed.md)."),
        click.option("--output-dir", default=None, metavar="OUT",
                     help="With --dataset: write the outputs here, as .npy shards or Parquet."),
        click.option("--ray", "ray_address", is_flag=False, flag_value=LOCAL, default=None,
                     metavar="[ADDRESS]",
                     help="With --dataset: the Ray cluster to run on, e.g. ray://head:10001 "
                          "or auto (default: $RAY_ADDRESS, else a local Ray instance)."),
        click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True,
                     help="With --dataset: rows per batch handed to an actor."),
        click.option("--actors", type=click.IntRange(min=1), default=2, show_default=True,
                     help="With --dataset: Ray actors, one loaded model each."),
        click.option("--actor-cpus", type=click.FloatRange(min=0, min_open=True), default=1,
                     show_default=True, help="With --dataset: CPUs Ray gives each actor (its "
                                             "threads and device are sized to them)."),
        click.option("--output-format", type=click.Choice(["npy", "parquet"]), default="npy",
                     show_default=True, help="With --dataset: how the outputs are written."),
        click.option("--fail-fast", is_flag=True,
                     help="With --dataset: stop at the first batch that fails (default: "
                          "report it and run the others)."),
        click.option("--resume", is_flag=True,
                     help="With --dataset: go on with the job recorded in OUT (its driver "
                          "was killed, or batches failed): run only the batches missing "
                          "there; the same model and dataset are required."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def check_output_dir(path: str | None, resume: bool = False) -> str:
    """``--output-dir``: a new or empty folder whose parent exists, or with ``resume`` one
    holding a job's checkpoint; CommandLineError naming it."""
    from aircc.distributed.io import OUTPUT_CHECKPOINT

    if not path:
        raise CommandLineError("--dataset writes its outputs to --output-dir OUT; give it")
    full = os.path.abspath(path)
    if os.path.exists(full) and not os.path.isdir(full):
        raise CommandLineError(f"--output-dir {path!r} is a file; give a folder")
    files = os.listdir(full) if os.path.isdir(full) else []
    if files and not resume:
        hint = ", or --resume to go on with the job recorded there" \
            if OUTPUT_CHECKPOINT in files else ""
        raise CommandLineError(f"--output-dir {path!r} is not empty; give a new or empty "
                               f"folder{hint}")
    if files and OUTPUT_CHECKPOINT not in files:
        raise CommandLineError(f"--output-dir {path!r} holds files but no job to resume "
                               f"(no {OUTPUT_CHECKPOINT} folder); give a new or empty folder")
    if not os.path.isdir(os.path.dirname(full)):
        raise CommandLineError(f"--output-dir {path!r}: folder {os.path.dirname(full)!r} "
                               f"does not exist")
    return full


def run_dataset_command(model: str, *, dataset: str | None, output_dir: str | None,
                        ray_address: str | None, batch_size: int, actors: int,
                        actor_cpus: float, output_format: str, fail_fast: bool,
                        resume: bool = False, device_memory: str | None = None,
                        single_run: bool = False) -> None:
    """Run ``model`` over the shards in ``dataset`` on Ray (with ``resume``: the batches
    missing from the job recorded in ``output_dir``), write the outputs and the summary
    under ``output_dir``, print the summary; BatchFailedError (exit 5) when a batch
    failed, after the others were written."""
    if dataset is None:
        raise CommandLineError("--ray runs a --dataset; give --dataset DIR (or drop --ray)")
    if single_run:
        raise CommandLineError("--dataset runs every row of DIR; it cannot go with --input, "
                               "--random or --output")
    out = check_output_dir(output_dir, resume)
    memory = parse_device_memory(device_memory)
    from aircc.distributed import require_ray, run_dataset
    from aircc.distributed.io import (OUTPUT_CHECKPOINT, list_shards, output_folders,
                                      remove_shards)
    from aircc.distributed.ledger import Summary
    from aircc.distributed.job import om_bytes

    list_shards(dataset)       # the dataset and the model are checked before Ray starts
    om = om_bytes(model)[0]
    try:
        ray = require_ray()
    except ImportError as e:
        raise CommandLineError(f"--dataset: {e}") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=None if ray_address == LOCAL else ray_address)
    try:
        job = run_dataset(om, dataset, batch_size=batch_size, actors=actors,
                          cpus_per_actor=actor_cpus, fail_fast=fail_fast, memory_bytes=memory,
                          checkpoint_dir=os.path.join(out, OUTPUT_CHECKPOINT))
        try:
            if job.checkpoint.completed is not None:
                click.echo(f"the job in {out} is complete; nothing to run")
                click.echo(Summary.from_json(job.checkpoint.completed).format())
                return
            folders = output_folders([job.spec.index_column, *job.spec.keep_columns,
                                      *(o.name for o in job.spec.outputs)])
            remove_shards(out, folders)       # a killed run's, which the new ones replace
            summary = job.write(out, fmt=output_format)
            if not summary.failures:
                job.checkpoint.complete(summary.to_json())
        finally:
            job.close()
    finally:
        if started:
            ray.shutdown()
    click.echo(summary.format())
    click.echo(f"outputs: {len(summary.files)} files under {out}")
    if len(summary.failures) == 1:
        raise summary.failures[0].as_error()
    if summary.failures:
        first = summary.failures[0]
        raise BatchFailedError(f"{len(summary.failures)} batches failed ({summary.failed_rows} "
                               f"rows); the first: {first.describe()}", first.batch, first.code)

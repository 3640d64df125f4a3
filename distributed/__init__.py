"""Batch inference over datasets on Ray: a compiled model run by a pool of Ray Data
actors, one loaded model each, from a laptop to a cluster (``pip install "aircc[ray]"``).

    import ray, aircc.distributed as dist
    ray.init()                                   # or ray.init(address="ray://head:10001")
    job = dist.run_dataset("model.om", "images/", batch_size=64, actors=4)
    outputs = job.to_numpy()                     # {"row": ..., "<output>": ...}, input order
    print(job.summary.format())                  # rows, batches, rows/s, failed batches

or ``job.write("out/", fmt="parquet")``, or ``job.dataset`` (a lazy Ray Dataset) to chain.
``airrun model.om --dataset DIR --output-dir OUT --ray [ADDRESS]`` is the same from the
command line.  Importing :mod:`aircc` does not import Ray; this package imports it when a
job is made.  See docs/distributed.md.
"""
from __future__ import annotations

from .actor import ActorSpec, ModelActor
from .io import from_arrays, read_dir, with_row_index
from .job import InferenceJob, require_ray, run_dataset
from .ledger import BatchFailure, Summary

__all__ = ["run_dataset", "InferenceJob", "Summary", "BatchFailure", "ModelActor",
           "ActorSpec", "read_dir", "from_arrays", "with_row_index", "require_ray"]

"""The callable class Ray Data's ``map_batches`` runs: one loaded model per actor.

Each actor fetches the .om bytes from Ray's object store once (``ray.get``), makes a
virtual device sized to the CPUs Ray gave it (``aircc.set_threads`` and the device's
compute units), loads the model and then runs every batch it is handed.  A batch of an
aircc error yields no rows and is reported to the run's ledger with its id (its first
and last row); with ``fail_fast`` it raises :class:`~aircc.errors.BatchFailedError`
instead, which stops the run.  Subclass :class:`ModelActor` to change how a batch
becomes the model's feeds (:meth:`ModelActor.feeds`).  With a checkpoint, each finished
batch is written to its folder (outputs and record in one file, atomically) before it
counts as done, and a batch found there already is not run again.
"""
from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import aircc
from aircc.errors import AirccError, InputError
from aircc.formats.model_section import IOSpec

from .checkpoint import read_record, record_path, write_record
from .ledger import BatchFailure, batch_name


@dataclass(frozen=True)
class ActorSpec:
    """What every model actor of one run is given (built by the job on the driver)."""

    om: Any
    """An ``ObjectRef`` to the .om bytes (put in the object store once)."""
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    input_columns: dict[str, str]
    """Model input name -> the dataset column that feeds it."""
    index_column: str = "row"
    keep_columns: tuple[str, ...] = ()
    """Dataset columns passed through to the results next to the outputs."""
    fail_fast: bool = False
    ledger: Any = None
    """The run's :class:`~aircc.distributed.ledger.RunLedger` actor handle."""
    memory_bytes: int | None = None
    load_options: dict = field(default_factory=dict)
    """Passed to :func:`aircc.load` (``runtime_core_number``, ``timeout``, ``recovery``)."""
    checkpoint: str | None = None
    """The folder each finished batch is written to, with its record (the ``batches``
    folder of a :class:`~aircc.distributed.checkpoint.DatasetCheckpoint`), or None."""
    run_id: str = ""
    """This run's id, kept in each batch record it writes."""


def assigned_cpus() -> int:
    """The CPUs Ray gave this actor (at least 1, at most those the process may use)."""
    import ray

    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(math.floor(cpus + 1e-9), usable or 1))


def rows_per_run(model) -> int | None:
    """How many rows one run of ``model`` takes: the first dimension when it is fixed, the
    largest gear of a gear model, None when any batch fits (a dynamic batch)."""
    firsts = {i.shape[0] for i in model.inputs if i.shape}
    fixed = [d for d in firsts if isinstance(d, int)]
    if fixed:
        return max(fixed)
    gears = getattr(model, "gears", None) or []
    return max(gears) if gears else None


class ModelActor:
    """Runs batches of a Ray Dataset through one loaded aircc model.  The model and its
    device live as long as the actor's process: Ray ends it, and with it them (closing
    them from a finalizer while the interpreter shuts down would start stream workers
    that never run, and keep the process alive)."""

    def __init__(self, spec: ActorSpec):
        import ray

        self.spec = spec
        self.threads = aircc.set_threads(assigned_cpus())
        # every CPU of the process, not the first few that a thread count alone would pin
        # the device's workers to: the actors of a node would all share CPU 0
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        self.device = aircc.VirtualDevice(spec.memory_bytes, cpus=cpus,
                                          compute_units=self.threads)
        try:
            self.model = aircc.load(ray.get(spec.om), device=self.device, pad_to_gear=True,
                                    **spec.load_options)
        except BaseException:
            self.device.close()
            raise
        self.chunk = rows_per_run(self.model)
        self.pid = os.getpid()
        if spec.ledger is not None:
            with warnings.catch_warnings():   # Ray's property calls its own deprecated actor_id
                warnings.simplefilter("ignore", DeprecationWarning)
                restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
            ray.get(spec.ledger.actor_started.remote(self.pid, restarted, self.threads))

    def __call__(self, batch: dict[str, np.ndarray]) -> Iterator[dict[str, np.ndarray]]:
        """The batch's outputs (with its index and kept columns); nothing for a batch
        whose run raised an aircc error (reported, or raised with ``fail_fast``).  With a
        checkpoint, the results go to the batch's file and this yields only the batch's
        ``first_row`` and ``rows``."""
        import ray

        index = np.asarray(batch[self.spec.index_column])
        if len(index) == 0:
            return
        first, last = int(index[0]), int(index[-1])
        record = None if self.spec.checkpoint is None else \
            record_path(self.spec.checkpoint, first, last)
        done = {"first_row": np.array([first]), "rows": np.array([len(index)])}
        if record is not None and recorded(record, len(index)):
            yield done
            return                   # written before this actor was restarted
        start = time.time()
        try:
            outputs = self.run(self.feeds(batch), len(index))
        except AirccError as e:
            failure = BatchFailure(batch_name(first, last), first, last, len(index), e.code,
                                   type(e).__name__, e.message, self.pid)
            if self.spec.ledger is not None:
                ray.get(self.spec.ledger.batch_failed.remote(failure))
            if self.spec.fail_fast:
                raise failure.as_error() from None
            return
        result = {self.spec.index_column: index}
        result.update({c: batch[c] for c in self.spec.keep_columns})
        result.update(outputs)
        if record is not None:        # durable before the batch counts as done
            write_record(record, result, self.spec.index_column,
                         {"run": self.spec.run_id, "pid": self.pid})
        if self.spec.ledger is not None:
            ray.get(self.spec.ledger.batch_done.remote(first, len(index), start, time.time(),
                                                       self.pid))
        yield result if record is None else done

    def feeds(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's feeds for ``batch``: each input from its column, stacked, cast to the
        input's dtype when that loses no kind (int32 -> int64, float64 -> float32) and
        reshaped to the input's row shape when only the shape differs (flat lists)."""
        return {spec.name: column_as_input(batch[self.spec.input_columns[spec.name]],
                                              spec, self.spec.input_columns[spec.name])
                for spec in self.spec.inputs}

    def run(self, feeds: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
        """Run the model over ``rows`` rows of ``feeds``, in runs of :attr:`chunk` rows (the
        last padded by repeating its last row when the model's batch is fixed)."""
        step = self.chunk or rows
        gears = bool(getattr(self.model, "gears", None))     # they pad up themselves
        parts: dict[str, list[np.ndarray]] = {o.name: [] for o in self.spec.outputs}
        for start in range(0, rows, step):
            n = min(step, rows - start)
            part = {k: v[start:start + n] for k, v in feeds.items()}
            if self.chunk is not None and n < self.chunk and not gears:
                part = {k: np.concatenate([v, np.repeat(v[-1:], self.chunk - n, axis=0)])
                        for k, v in part.items()}
            out = self.model.run(part)
            for name, value in out.items():
                if not isinstance(value, np.ndarray) or value.ndim == 0 or len(value) < n:
                    raise InputError(f"output '{name}' has no batch dimension of {n} rows "
                                     f"(shape {getattr(value, 'shape', None)}); aircc.distributed "
                                     f"runs models whose outputs have the batch first")
                parts[name].append(value[:n])
        return {k: (v[0] if len(v) == 1 else np.concatenate(v)) for k, v in parts.items()}


def recorded(path: str, rows: int) -> bool:
    """Whether the batch file ``path`` is there, sound, and holds ``rows`` rows."""
    if not os.path.exists(path):
        return False
    try:
        return read_record(path).rows == rows
    except AirccError:
        return False


def column_as_input(column: np.ndarray, spec: dict, name: str) -> np.ndarray:
    """A dataset column as a feed of the input ``spec``; InputError naming the column when
    its rows cannot be stacked."""
    array = column
    if array.dtype == object:
        try:
            array = np.stack([np.asarray(v) for v in array])
        except ValueError as e:
            shapes = sorted({np.shape(v) for v in column}, key=str)[:4]
            raise InputError(f"column '{name}' (input '{spec.name}'): its rows cannot be "
                             f"stacked, shapes {shapes}: {e}") from None
    dtype = np.dtype(spec.dtype)
    if array.dtype != dtype and np.can_cast(array.dtype, dtype, "same_kind"):
        array = array.astype(dtype)
    row_shape = spec.shape[1:]
    if (array.shape[1:] != tuple(row_shape) and all(isinstance(d, int) for d in row_shape)
            and array.ndim >= 1 and math.prod(array.shape[1:]) == math.prod(row_shape)):
        array = array.reshape(len(array), *row_shape)
    return array

"""A compiled model over a dataset on Ray: :func:`run_dataset` builds the lazy job,
:class:`InferenceJob` runs it (``to_numpy``, ``write``, or the Ray Dataset itself) and
keeps its :class:`~aircc.distributed.ledger.Summary`."""
from __future__ import annotations

import gc
import json
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from aircc.errors import AirccError, InputError
from aircc.formats.model_section import IOSpec

from . import checkpoint as ckpt
from . import io
from .actor import ActorSpec, ModelActor
from .ledger import RunLedger, Summary

if TYPE_CHECKING:
    import ray.data

    from aircc.compiler.driver import CompiledModel
    from aircc.formats.om import OmFile

#: What :func:`run_dataset` takes as the model, and as the dataset.
ModelSource = Union[str, "os.PathLike[str]", bytes, "OmFile", "CompiledModel"]
DatasetSource = Union["ray.data.Dataset", str, "os.PathLike[str]", np.ndarray,
                      dict[str, np.ndarray]]


def require_ray() -> Any:
    """The ``ray`` module; ImportError saying how to install it when it is missing."""
    try:
        import ray
        import ray.data
    except ImportError as e:
        raise ImportError(f"aircc.distributed needs Ray Data: pip install 'aircc[ray]' "
                          f"({e})") from None
    return ray


def om_bytes(om: ModelSource) -> tuple[bytes, list[IOSpec], list[IOSpec]]:
    """The bytes, inputs and outputs of an .om (path, bytes, OmFile or compiled model),
    checked by aircc's reader (ModelFormatError for a damaged file)."""
    from aircc.compiler.driver import CompiledModel
    from aircc.formats.om import OmFile, dump_om, load_om

    if isinstance(om, CompiledModel):
        om = om.om
    if isinstance(om, OmFile):
        data = dump_om(om)
    elif isinstance(om, (bytes, bytearray, memoryview)):
        data = bytes(om)
    else:
        try:
            with open(os.fspath(om), "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(f"model {os.fspath(om)!r} cannot be read: {e.strerror or e}") from None
    contract = load_om(data).parsed()
    inputs, outputs = list(contract.model.inputs), list(contract.model.outputs)
    for spec in inputs + outputs:
        if spec.dtype.startswith(("sequence:", "optional:")) or not spec.shape:
            raise InputError(f"'{spec.name}' is a {spec.dtype} of shape {None if spec.shape is None else list(spec.shape)}; "
                             f"aircc.distributed runs models whose inputs and outputs are "
                             f"tensors with the batch first")
    return data, inputs, outputs


def prepare_dataset(dataset: DatasetSource, inputs: list[IOSpec], index_column: str, batch_size: int,
                    actors: int) -> tuple[Any, list[str]]:
    """``dataset`` (a Ray Dataset, a directory of shards, an array or a dict of arrays) as
    a Ray Dataset with ``index_column``, and its columns."""
    import ray

    names = [i.name for i in inputs]
    if isinstance(dataset, (str, os.PathLike)):
        shards = [io.shard_rows(f, names) for f in io.list_shards(dataset)]
        columns = sorted({c for _, cols in shards for c in cols})
        chunk = io.block_rows(sum(n for n, _ in shards), batch_size, actors)
        return io.read_dir(dataset, names, index_column, chunk), columns + [index_column]
    if isinstance(dataset, np.ndarray):
        if len(names) != 1:
            raise InputError(f"one array feeds one input, but the model has {names}; give a "
                             f"dict of arrays by input name")
        dataset = {names[0]: dataset}
    if isinstance(dataset, dict):
        rows = len(next(iter(dataset.values()))) if dataset else 0
        return (io.from_arrays(dataset, index_column, io.block_rows(rows, batch_size, actors)),
                list(dataset) + [index_column])
    if not isinstance(dataset, ray.data.Dataset):
        raise InputError(f"dataset: expected a ray.data.Dataset, a directory, an array or a "
                         f"dict of arrays, got {type(dataset).__name__}")
    columns = list(dataset.columns())
    if index_column not in columns:
        dataset, columns = io.with_row_index(dataset, index_column), columns + [index_column]
    return dataset, columns


def match_columns(inputs: list[IOSpec], columns: list[str], given: dict[str, str] | None,
                  index_column: str, keep: tuple[str, ...]) -> dict[str, str]:
    """Model input -> dataset column: as ``given``, else by name; a single input takes the
    single data column whatever its name (``data`` from ``ray.data.from_numpy``)."""
    given = dict(given or {})
    data = [c for c in columns if c != index_column and c not in keep]
    mapping = {}
    for spec in inputs:
        name = spec.name
        column = given.get(name, name)
        if column not in columns and name not in given and len(inputs) == 1 and len(data) == 1:
            column = data[0]
        if column not in columns:
            raise InputError(f"input '{name}': the dataset has no column {column!r}; its "
                             f"columns are {data} (map them with input_columns=)")
        mapping[name] = column
    missing = [c for c in keep if c not in columns]
    if missing:
        raise InputError(f"keep_columns {missing}: the dataset has no such column; its "
                         f"columns are {data}")
    return mapping


def run_dataset(om: ModelSource, dataset: DatasetSource, *, batch_size: int = 64, actors: int = 2,
                cpus_per_actor: float = 1, input_columns: dict[str, str] | None = None,
                keep_columns: tuple[str, ...] | list[str] = (), index_column: str = "row",
                fail_fast: bool = False, memory_bytes: int | None = None,
                max_restarts: int | None = None, max_task_retries: int | None = None,
                progress: bool = True,
                actor_class: type = ModelActor, load_options: dict | None = None,
                checkpoint_dir: str | os.PathLike | None = None,
                dataset_fingerprint: str | None = None) -> InferenceJob:
    """Run the compiled model ``om`` over ``dataset`` with a pool of ``actors`` Ray actors,
    each loading the model once and given ``cpus_per_actor`` CPUs; lazy until the job's
    results are asked for.

    ``dataset``: a Ray Dataset, a directory of .npy/.npz or Parquet shards, an array (a
    single-input model) or a dict of arrays.  Rows keep their input order; each has its
    input row number in ``index_column``.  An actor that dies is restarted by Ray and its
    batch retried on it: always, as Ray Data does, or up to ``max_restarts`` restarts per
    actor and ``max_task_retries`` retries per batch when they are given.  A batch
    that raises an aircc error yields no rows and is listed in the summary's failures;
    ``fail_fast`` stops the run with :class:`~aircc.errors.BatchFailedError` instead.

    ``checkpoint_dir``: a folder each finished batch is written to as it is done (its
    outputs and its record in one file, atomically); a job run again with the same folder,
    model and data (after its driver died) computes only the batches missing there, and
    its results are read back from it.  The dataset's fingerprint is the sha256 of its
    files or arrays; a Ray Dataset needs ``dataset_fingerprint`` (any string that changes
    when the data does), which also replaces the computed one.  A folder made by another
    model or dataset is refused (:class:`~aircc.errors.CheckpointError`).
    """
    ray = require_ray()
    # an earlier job's failed execution may still sit in reference cycles with its
    # actors (a traceback kept its frames), which hold their CPUs until a collection
    gc.collect()
    if batch_size < 1 or actors < 1 or cpus_per_actor <= 0:
        raise InputError(f"batch_size ({batch_size}) and actors ({actors}) must be at least 1 "
                         f"and cpus_per_actor ({cpus_per_actor}) positive")
    data, inputs, outputs = om_bytes(om)
    source = (dataset_fingerprint, -1)
    if checkpoint_dir is not None and dataset_fingerprint is None:
        source = ckpt.data_fingerprint(dataset, [i.name for i in inputs])
    clash = [o.name for o in outputs if o.name == index_column or o.name in keep_columns]
    if clash:
        raise InputError(f"the model's output {clash[0]!r} has the name of a dataset column "
                         f"kept in the results; give another index_column or keep_columns")
    if not ray.is_initialized():
        ray.init()
    dataset, columns = prepare_dataset(dataset, inputs, index_column, batch_size, actors)
    keep = tuple(keep_columns)
    mapping = match_columns(inputs, columns, input_columns, index_column, keep)
    checkpoint = None
    if checkpoint_dir is not None:
        checkpoint = ckpt.DatasetCheckpoint.open(checkpoint_dir, {
            "model": ckpt.model_fingerprint(data), "data": source[0], "rows": source[1],
            "index_column": index_column, "input_columns": json.dumps(mapping, sort_keys=True),
            "keep_columns": json.dumps(keep), "outputs": json.dumps([o.name for o in outputs]),
            "batch_code": ckpt.batch_code(actor_class)})
        starts, ends = checkpoint.done_ranges()
        if len(starts):
            dataset = dataset.map_batches(ckpt.drop_done_rows, batch_size=None,
                                          batch_format="numpy",
                                          fn_kwargs={"index_column": index_column,
                                                     "starts": starts, "ends": ends})
    ledger = ray.remote(num_cpus=0, max_restarts=0)(RunLedger).remote()
    spec = ActorSpec(ray.put(data), inputs, outputs, mapping, index_column, keep, fail_fast,
                     ledger, memory_bytes, dict(load_options or {}),
                     checkpoint.batches if checkpoint else None, uuid.uuid4().hex)
    retries = {k: v for k, v in (("max_restarts", max_restarts),
                                 ("max_task_retries", max_task_retries)) if v is not None}
    results = dataset.map_batches(
        actor_class, fn_constructor_kwargs={"spec": spec}, batch_size=batch_size,
        batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=cpus_per_actor, **retries)
    return InferenceJob(results, spec, actors, progress, checkpoint)


class InferenceJob:
    """A lazy run of a model over a dataset: consume it once with :meth:`to_numpy`,
    :meth:`write` or :meth:`run`; then :attr:`summary` says what happened."""

    def __init__(self, dataset: ray.data.Dataset, spec: ActorSpec, actors: int,
                 progress: bool = True, checkpoint: ckpt.DatasetCheckpoint | None = None):
        self.spec, self.actors, self.progress = spec, actors, progress
        self.checkpoint = checkpoint
        self.summary: Summary | None = None
        self._pipeline = ordered(dataset, progress)
        self._computed = checkpoint is not None and checkpoint.all_done()

    @property
    def dataset(self) -> ray.data.Dataset:
        """The results as a lazy Ray Dataset (index, kept columns, outputs), in input order.
        With a checkpoint, the batches missing from it are run first (once), and the
        results are read back from it."""
        if self.checkpoint is None:
            return self._pipeline
        if not self._computed:
            self.run(lambda ds: None)
        return self._results()

    def run(self, consume: Callable[[Any], Any]) -> Any:
        """``consume(self.dataset)`` (anything that executes it), timed; sets
        :attr:`summary` and returns what ``consume`` returned."""
        import ray

        t0 = time.perf_counter()
        if self.checkpoint is None:
            result = self._execute(lambda: consume(self._pipeline))
        else:
            if not self._computed:
                self._execute(lambda: self._pipeline.take_all())   # the batches' records
                self._computed = True
            result = self._execute(lambda: consume(self._results()))
        seconds = time.perf_counter() - t0
        report = ray.get(self.spec.ledger.report.remote())
        resumed = self.checkpoint.records if self.checkpoint is not None else []
        self.summary = Summary(rows=report["rows"] + sum(r.rows for r in resumed),
                               batches=report["batches"], seconds=seconds,
                               actors=self.actors, actors_started=report["actors_started"],
                               actor_restarts=report["actor_restarts"],
                               actors_used=report["actors_used"],
                               actor_threads=report["actor_threads"],
                               window_seconds=report["window_seconds"],
                               failures=report["failures"], resumed_batches=len(resumed),
                               resumed_rows=sum(r.rows for r in resumed))
        return result

    def _execute(self, work: Callable[[], Any]) -> Any:
        """``work()``; the aircc error inside what Ray raised, if any, raised as itself."""
        import ray

        try:
            return work()
        except Exception as e:
            report = ray.get(self.spec.ledger.report.remote())
            if self.spec.fail_fast and report["failures"]:
                error = report["failures"][0].as_error()
            elif (error := find_aircc_error(e)) is None:
                gc.collect()
                raise
            error.__traceback__ = None
        # Ray's failed execution sits in reference cycles with its actors, which hold
        # their CPUs until a collection: the next run would wait for them
        gc.collect()
        raise error

    def _results(self) -> ray.data.Dataset:
        """The results read back from the checkpoint's batch files, in row order."""
        import ray

        cover = ckpt.cover(self.checkpoint.files())
        items = [{"path": p, "from_row": r} for p, r in cover] or [{"path": "", "from_row": 0}]
        columns = [self.spec.index_column, *self.spec.keep_columns,
                   *(o.name for o in self.spec.outputs)]
        blocks = min(len(items), 1024)            # a read task per file, up to a point
        return ordered(ray.data.from_items(items, override_num_blocks=blocks).map_batches(
            ckpt.read_batches, batch_size=1, batch_format="numpy",
            fn_kwargs={"columns": columns, "index_column": self.spec.index_column}),
            self.progress)

    def to_numpy(self) -> dict[str, np.ndarray]:
        """Every result column as one array, rows in input order (runs the job)."""
        names = [self.spec.index_column, *self.spec.keep_columns,
                 *(o.name for o in self.spec.outputs)]
        if self.checkpoint is None:
            batches = self.run(lambda ds: list(ds.iter_batches(batch_size=None,
                                                               batch_format="numpy")))
        else:                         # read here: the driver has read them once already
            batches = self.run(lambda _: [b for path, first in ckpt.cover(self.checkpoint.files())
                                          for b in ckpt.read_batches(
                                              {"path": [path], "from_row": [first]}, names,
                                              self.spec.index_column)])
        batches = [b for b in batches if len(b[self.spec.index_column])]
        if not batches:
            return {n: np.zeros((0,)) for n in names}
        return {n: np.concatenate([b[n] for b in batches]) for n in names}

    def write(self, out_dir: str | os.PathLike, fmt: str = "npy",
              shard_rows: int = 4096) -> Summary:
        """Write the results under ``out_dir`` as ``.npy`` shards (``OUT/<column>/part-N.npy``
        per column) or Parquet (``OUT/part-N.parquet``), N the shard's first row, and the
        summary as ``OUT/summary.json``; returns the summary."""
        if fmt not in ("npy", "parquet"):
            raise InputError(f"output format {fmt!r}: expected npy or parquet")
        out_dir = os.fspath(out_dir)
        os.makedirs(out_dir, exist_ok=True)
        names = [self.spec.index_column, *self.spec.keep_columns,
                 *(o.name for o in self.spec.outputs)]
        folders = io.output_folders(names)
        kwargs = {"out_dir": out_dir, "fmt": fmt, "folders": folders,
                  "index_column": self.spec.index_column}
        written = self.run(lambda ds: ordered(ds.map_batches(
            io.write_shard, batch_size=shard_rows, batch_format="numpy", fn_kwargs=kwargs),
            self.progress).take_all())
        self.summary.files = sorted(f for w in written for f in json.loads(w["files"]))
        self.summary.rows = int(sum(w["rows"] for w in written))
        io.write_atomic(os.path.join(out_dir, "summary.json"), (
            self.summary.to_json() if fmt == "parquet" else
            json.dumps({**json.loads(self.summary.to_json()), "folders": folders}, indent=1)
        ).encode())
        return self.summary

    def close(self) -> None:
        """Let the run's ledger actor go."""
        import ray

        if self.spec.ledger is not None:
            ray.kill(self.spec.ledger)

    def __enter__(self) -> InferenceJob:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def ordered(dataset: ray.data.Dataset, progress: bool) -> ray.data.Dataset:
    """``dataset`` set to keep its blocks in input order (and to show Ray's progress)."""
    dataset.context.execution_options.preserve_order = True
    dataset.context.enable_progress_bars = progress
    return dataset


def find_aircc_error(error: BaseException) -> AirccError | None:
    """The aircc error inside what Ray raised (its cause chain, ``RayTaskError.cause``)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, AirccError):
            return error
        seen.add(id(error))
        error = getattr(error, "cause", None) or error.__cause__
    return None

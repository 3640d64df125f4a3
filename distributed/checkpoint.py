"""A dataset job's checkpoint: the batches it finished, each in one file written
atomically with its record, so that a job started again after its driver died computes
only what is missing.

Layout of ``checkpoint_dir``:

* ``job.ckpt``: the job's fingerprint (the model's and the dataset's sha256, the index,
  input and kept columns, the outputs, the code that makes a batch's outputs), an
  :class:`aircc.Checkpoint` with no tensor; a job whose fingerprint differs is refused;
* ``batches/rows-<first>-<last>.ckpt``: one finished batch, an :class:`aircc.Checkpoint`
  of its result columns (the index, kept columns, outputs) and its record in the meta
  (rows, the run that computed it).  It is written under a temporary name, fsynced and
  renamed: a batch is done exactly when its file is there and passes every check.  A
  file that fails one (cut off by a crash, damaged) is removed and the batch computed
  again; a temporary file left by a killed writer is removed.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from aircc import log
from aircc.errors import CheckpointError, InputError
from aircc.executor.runtime.checkpoint import Checkpoint

from . import io

MANIFEST, BATCHES = "job.ckpt", "batches"
KIND = "aircc.distributed job"
_RECORD = re.compile(r"rows-(\d{12,})-(\d{12,})\.ckpt")
#: Fields of a fingerprint, and how an error names each.
FIELDS = {"model": "the model (sha256)", "data": "the dataset", "rows": "the dataset's rows",
          "index_column": "index_column", "input_columns": "the input columns",
          "keep_columns": "keep_columns", "outputs": "the model's outputs",
          "batch_code": "the actor code that makes a batch's outputs"}


def model_fingerprint(om: bytes) -> str:
    """The sha256 of a model's .om bytes."""
    return hashlib.sha256(om).hexdigest()


def data_fingerprint(dataset: Any, input_names: list[str]) -> tuple[str, int]:
    """(sha256, rows) of a dataset given as a directory of shards (every file's name and
    bytes), an array or a dict of arrays (names, dtypes, shapes, bytes).  A Ray Dataset
    cannot be fingerprinted without reading it all: InputError asking for one."""
    h = hashlib.sha256()
    if isinstance(dataset, (str, os.PathLike)):
        files = io.list_shards(dataset)
        rows = sum(io.shard_rows(f, input_names)[0] for f in files)
        for path in files:
            h.update(f"{os.path.basename(path)}\0{os.path.getsize(path)}\0".encode())
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
        return "files:" + h.hexdigest(), rows
    arrays = {"": dataset} if isinstance(dataset, np.ndarray) else dataset
    if not isinstance(arrays, dict):
        raise InputError("checkpoint_dir: a Ray Dataset has no fingerprint aircc can take "
                         "without reading it all; pass dataset_fingerprint= (a string that "
                         "changes when the data does, e.g. its source and version)")
    rows = -1
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        if a.dtype.hasobject:
            raise InputError(f"checkpoint_dir: column {name!r} holds Python objects, which "
                             f"have no bytes to fingerprint; pass dataset_fingerprint=")
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        flat = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        for start in range(0, flat.size, 1 << 24):
            h.update(memoryview(flat[start:start + (1 << 24)]))
        rows = len(a) if a.ndim else rows
    return "arrays:" + h.hexdigest(), rows


def batch_code(actor_class: type) -> str:
    """The methods that make a batch's outputs (``feeds`` and ``run``), by module and
    qualified name: a subclass that only wraps ``__call__`` resumes its parent's jobs."""
    return ",".join(f"{getattr(actor_class, m).__module__}.{getattr(actor_class, m).__qualname__}"
                    for m in ("feeds", "run"))


@dataclass(frozen=True)
class Record:
    """A finished batch in the checkpoint: its file and the rows it holds."""

    path: str
    first_row: int
    last_row: int
    rows: int
    run: str
    index: np.ndarray


class DatasetCheckpoint:
    """The checkpoint folder of one dataset job (see the module's doc)."""

    def __init__(self, folder: str, fingerprint: dict):
        self.folder = os.path.abspath(folder)
        self.fingerprint = fingerprint
        self.batches = os.path.join(self.folder, BATCHES)
        self.records: list[Record] = []
        """The batches finished before this run (checked when the folder was opened)."""
        self.discarded: list[str] = []
        """Files that failed a check when the folder was opened, and why (removed)."""
        self.completed: str | None = None
        """The summary (JSON) of the job, once :meth:`complete` marked it done."""

    @classmethod
    def open(cls, folder: str | os.PathLike, fingerprint: dict) -> DatasetCheckpoint:
        """The checkpoint in ``folder`` (made when there is none) of the job of
        ``fingerprint``; CheckpointError when it was made by another job."""
        folder = os.fspath(folder)
        stored, batches = read_manifest(folder), os.path.join(folder, BATCHES)
        if stored is not None:
            check_fingerprint(folder, stored, fingerprint)
        elif os.path.isdir(batches) and os.listdir(batches):
            raise CheckpointError(f"checkpoint {folder!r} holds batches but no {MANIFEST} "
                                  f"saying which job made them; give a new checkpoint folder")
        checkpoint = cls(folder, fingerprint)
        if stored is not None and stored.get("complete"):
            checkpoint.completed = str(stored.get("summary", "{}"))
        try:
            os.makedirs(checkpoint.batches, exist_ok=True)
        except OSError as e:
            raise CheckpointError(f"checkpoint folder {folder!r} cannot be made: "
                                  f"{e.strerror or e}") from None
        if stored is None:
            Checkpoint({**fingerprint, "kind": KIND}).save(os.path.join(folder, MANIFEST))
        checkpoint.records = checkpoint.scan()
        return checkpoint

    def scan(self) -> list[Record]:
        """Every finished batch, in row order, each file read and checked whole; a file
        that fails is removed (its batch is missing again), as is every temporary file."""
        records = []
        for name in sorted(os.listdir(self.batches)):
            path = os.path.join(self.batches, name)
            if name.endswith(".tmp"):
                _remove(path)
                continue
            try:
                records.append(read_record(path))
            except CheckpointError as e:
                self.discarded.append(f"{name}: {e.message}")
                log.get("distributed").warning("checkpoint: %s is damaged and will be "
                                               "computed again: %s", name, e.message)
                _remove(path)
        return sorted(records, key=lambda r: (r.first_row, -r.last_row))

    def done_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows already done, as sorted half-open ranges (starts, ends)."""
        if not self.records:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows = np.unique(np.concatenate([r.index.astype(np.int64) for r in self.records]))
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        starts = rows[np.r_[0, breaks]]
        ends = rows[np.r_[breaks - 1, len(rows) - 1]] + 1
        return starts, ends

    def done_rows(self) -> int:
        starts, ends = self.done_ranges()
        return int((ends - starts).sum())

    def all_done(self) -> bool:
        """Whether every row of the dataset (when its count is known) is done."""
        rows = self.fingerprint.get("rows", -1)
        return rows >= 0 and self.done_rows() >= rows

    def files(self) -> list[tuple[str, int, int]]:
        """(path, first row, last row) of every batch file now, by name alone."""
        out = []
        for name in os.listdir(self.batches):
            if (m := _RECORD.fullmatch(name)) is not None:
                out.append((os.path.join(self.batches, name), int(m.group(1)), int(m.group(2))))
        return out

    def complete(self, summary: str) -> None:
        """Mark the job done (``summary``: its summary as JSON) and let its batch files go
        (their rows were written to the job's outputs)."""
        Checkpoint({**self.fingerprint, "kind": KIND, "complete": True, "summary": summary}) \
            .save(os.path.join(self.folder, MANIFEST))
        for name in os.listdir(self.batches):
            _remove(os.path.join(self.batches, name))


def read_manifest(folder: str | os.PathLike) -> dict | None:
    """The fingerprint stored in ``folder`` (with ``complete`` and ``summary`` once the
    job was finished), or None when it holds none."""
    path = os.path.join(os.fspath(folder), MANIFEST)
    if not os.path.exists(path):
        return None
    meta = Checkpoint.load(path).meta
    if meta.get("kind") != KIND:
        raise CheckpointError(f"{path!r} is an aircc checkpoint but not a dataset job's")
    return meta


def check_fingerprint(folder: str, stored: dict, fingerprint: dict) -> None:
    """CheckpointError naming what differs when ``stored`` is another job's."""
    diffs = [f"{FIELDS[k]}: {_short(stored.get(k))} in the checkpoint, {_short(v)} now"
             for k, v in fingerprint.items() if k in FIELDS and stored.get(k) != v]
    if diffs:
        raise CheckpointError(f"checkpoint {folder!r} was made by another job ("
                              f"{'; '.join(diffs)}); resume with the model and data it was "
                              f"made with, or give a new checkpoint folder")


def _short(value: Any) -> str:
    text = str(value)
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------- batch files
def record_path(batches: str, first_row: int, last_row: int) -> str:
    """The file of the batch of rows ``first_row`` to ``last_row`` in folder ``batches``."""
    return os.path.join(batches, f"rows-{first_row:012d}-{last_row:012d}.ckpt")


def write_record(path: str, result: dict[str, np.ndarray], index_column: str,
                 meta: dict) -> None:
    """Write one finished batch (its result columns) and its record ``meta`` atomically."""
    checkpoint = Checkpoint(dict(meta, rows=len(result[index_column])))
    for name, column in result.items():
        column = np.asarray(column)
        if column.dtype.kind in "OUS":                  # kept columns of strings
            try:
                text = json.dumps([str(v) if column.dtype.kind != "S" else v.decode()
                                   for v in column.tolist()])
            except (TypeError, UnicodeDecodeError, AttributeError) as e:
                raise CheckpointError(f"column {name!r} ({column.dtype}) cannot be recorded "
                                      f"in a checkpoint: {e}") from None
            checkpoint.meta[f"json:{name}"] = True
            column = np.frombuffer(text.encode(), np.uint8)
        checkpoint.add(name, column)
    checkpoint.meta["index_column"] = index_column
    checkpoint.save(path)


def read_record(path: str) -> Record:
    """The record of one batch file, read and checked whole; CheckpointError when the
    file or its record is not sound."""
    match = _RECORD.fullmatch(os.path.basename(path))
    checkpoint = Checkpoint.load(path)
    meta = checkpoint.meta
    index_column = meta.get("index_column")
    if match is None or index_column not in checkpoint:
        raise CheckpointError(f"{path!r} is not a batch of a dataset job")
    first, last = int(match.group(1)), int(match.group(2))
    index = checkpoint[index_column]
    if (index.ndim != 1 or len(index) != meta.get("rows") or not len(index)
            or int(index[0]) != first or int(index[-1]) != last or np.any(np.diff(index) <= 0)):
        raise CheckpointError(f"{path!r}: its rows do not match its name and record")
    return Record(path, first, last, len(index), str(meta.get("run", "")), index)


def read_columns(path: str, columns: list[str]) -> dict[str, np.ndarray]:
    """The result columns of one batch file (kept string columns decoded)."""
    checkpoint = Checkpoint.load(path)
    out = {}
    for name in columns:
        value = checkpoint[name]
        if checkpoint.meta.get(f"json:{name}"):
            value = np.array(json.loads(value.tobytes().decode()))
        out[name] = value
    return out


def cover(files: list[tuple[str, int, int]]) -> list[tuple[str, int]]:
    """(file, first row to take) of the batch files (path, first row, last row) that give
    each row once, in row order (a batch a killed run finished late may overlap one of
    the run after it)."""
    out, covered = [], -1
    for path, first, last in sorted(files, key=lambda f: (f[1], -f[2])):
        if last > covered:
            out.append((path, covered + 1))
            covered = last
    return out


def read_batches(batch: dict, columns: list[str], index_column: str) -> Iterator[dict]:
    """The results held by the batch files named in ``batch`` (``path``, ``from_row``), the
    rows before ``from_row`` left out (a Ray Data map function)."""
    for path, from_row in zip(batch["path"], batch["from_row"]):
        if not str(path):
            continue                              # the placeholder of an empty job
        out = read_columns(str(path), columns)
        keep = out[index_column] >= int(from_row)
        yield {k: v[keep] for k, v in out.items()}


def drop_done_rows(batch: dict, index_column: str, starts: np.ndarray,
                   ends: np.ndarray) -> dict:
    """``batch`` without the rows in the half-open ranges (``starts``, ``ends``) (a Ray
    Data map function run before the model's actors)."""
    index = np.asarray(batch[index_column])
    if not len(starts):
        return batch
    k = np.searchsorted(starts, index, side="right") - 1
    done = (k >= 0) & (index < ends[np.maximum(k, 0)])
    return {c: np.asarray(v)[~done] for c, v in batch.items()}

"""Datasets in and out of a run: a directory of .npy/.npz or Parquet shards, numpy arrays
or any Ray Dataset in, each given an index column of input row numbers; .npy shards or
Parquet out, named by their first row so that file order is input order.

Reading happens in Ray tasks, on the nodes (the paths must be readable there, as for
Ray's own readers); the driver only reads the files' headers to number the rows.
"""
from __future__ import annotations

import json
import os
import re
import uuid
import zipfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from aircc.errors import InputError
from aircc.executor.runtime.checkpoint_format import sync_folder

if TYPE_CHECKING:
    import ray.data

#: The most batches one block holds (:func:`block_rows`).
MAX_BLOCK_BATCHES = 64
SHARD_SUFFIXES = (".npy", ".npz", ".parquet")


def list_shards(path: str | os.PathLike) -> list[str]:
    """The shard files of a dataset directory, sorted by name (all .npy/.npz, or all
    .parquet); InputError naming the directory when it has none, or both kinds."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise InputError(f"dataset {path!r} is not a directory of .npy, .npz or .parquet files")
    files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(SHARD_SUFFIXES))
    if not files:
        raise InputError(f"dataset directory {path!r} holds no .npy, .npz or .parquet file")
    kinds = {f.endswith(".parquet") for f in files}
    if len(kinds) > 1:
        raise InputError(f"dataset directory {path!r} mixes Parquet and .npy/.npz files; "
                         f"keep one kind per directory")
    return files


def shard_rows(path: str, input_names: list[str]) -> tuple[int, list[str]]:
    """(rows, columns) of one shard, from its header: a .npy holds the model's single
    input, an .npz its inputs by name, a Parquet file its columns."""
    try:
        if path.endswith(".parquet"):
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(path).metadata
            return meta.num_rows, list(meta.schema.to_arrow_schema().names)
        if path.endswith(".npy"):
            if len(input_names) != 1:
                raise InputError(f"shard {path!r}: a .npy holds one input, but the model has "
                                 f"{input_names}; give .npz shards holding them by name")
            shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
            if not shape:
                raise InputError(f"shard {path!r}: a 0-d array has no rows")
            return int(shape[0]), [input_names[0]]
        with zipfile.ZipFile(path) as z:
            names = [n[:-4] for n in z.namelist() if n.endswith(".npy")]
            counts = set()
            for n in names:
                with z.open(n + ".npy") as f:
                    counts.add(_npy_rows(f, f"{path}:{n}"))
            if len(counts) != 1:
                raise InputError(f"shard {path!r}: its arrays have different row counts "
                                 f"{sorted(counts)}")
            return counts.pop(), names
    except InputError:
        raise
    except Exception as e:   # a damaged file: numpy's, zipfile's and pyarrow's errors differ
        raise InputError(f"shard {path!r} cannot be read: {type(e).__name__}: {e}") from None


def _npy_rows(f, where: str) -> int:
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
        np.lib.format.read_array_header_2_0
    shape, _, _ = read_header(f)
    if not shape:
        raise InputError(f"{where}: a 0-d array has no rows")
    return int(shape[0])


def block_rows(rows: int, batch_size: int, actors: int) -> int:
    """Rows per block for ``rows`` rows: whole batches, about four blocks per actor so that
    every actor has work, at most :data:`MAX_BLOCK_BATCHES` batches."""
    batches = -(-rows // (batch_size * actors * 4)) if rows else 1
    return batch_size * max(1, min(MAX_BLOCK_BATCHES, batches))


def read_dir(path: str | os.PathLike, input_names: list[str], index_column: str = "row",
             chunk_rows: int = 1024) -> ray.data.Dataset:
    """A Ray Dataset of every row of the shards in ``path`` (:func:`list_shards`), in
    order, with ``index_column`` numbering the rows from 0; the reading tasks hand on
    ``chunk_rows`` rows at a time."""
    import ray

    items, first = [], 0
    for f in list_shards(path):
        rows, _ = shard_rows(f, input_names)
        items.append({"path": f, "first_row": first})
        first += rows
    return ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        read_shards, batch_size=1, batch_format="numpy",
        fn_kwargs={"index_column": index_column, "input_names": input_names,
                   "chunk_rows": chunk_rows})


def read_shards(batch: dict, index_column: str, input_names: list[str],
                chunk_rows: int) -> Iterator[dict]:
    """The rows of the shard files named in ``batch``, ``chunk_rows`` at a time."""
    for path, first in zip(batch["path"], batch["first_row"]):
        path, first = str(path), int(first)
        for offset, columns in _chunks(path, input_names, chunk_rows):
            n = len(next(iter(columns.values())))
            columns[index_column] = np.arange(first + offset, first + offset + n)
            yield columns


def _chunks(path: str, input_names: list[str], chunk_rows: int) -> Iterator[tuple[int, dict]]:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        offset = 0
        for rb in pq.ParquetFile(path).iter_batches(batch_size=chunk_rows):
            yield offset, {n: arrow_to_numpy(rb.column(i)) for i, n in enumerate(rb.schema.names)}
            offset += rb.num_rows
        return
    if path.endswith(".npy"):
        arrays = {input_names[0]: np.load(path, mmap_mode="r", allow_pickle=False)}
    else:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    rows = len(next(iter(arrays.values())))
    for start in range(0, rows, chunk_rows):
        yield start, {k: np.ascontiguousarray(v[start:start + chunk_rows])
                      for k, v in arrays.items()}


def arrow_to_numpy(column: Any) -> np.ndarray:
    """An Arrow column as numpy: tensor extension types (Arrow's canonical
    ``fixed_shape_tensor``, Ray's) as n-d arrays, nested lists of equal lengths stacked."""
    import pyarrow as pa

    if hasattr(column, "to_numpy_ndarray"):            # pa.FixedShapeTensorArray
        return column.to_numpy_ndarray()
    if isinstance(column.type, pa.ExtensionType):      # Ray's tensor arrays
        return column.to_numpy()
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type) \
            or pa.types.is_fixed_size_list(column.type):
        return np.stack([np.asarray(v) for v in column.to_pylist()]) if len(column) else \
            np.zeros((0,))
    return column.to_numpy(zero_copy_only=False)


def from_arrays(arrays: dict[str, np.ndarray], index_column: str = "row",
                block_rows: int = 4096) -> ray.data.Dataset:
    """A Ray Dataset of the rows of ``arrays`` (columns by name, rows along the first
    axis), with ``index_column`` numbering them."""
    import pyarrow as pa
    import ray
    from ray.data.extensions import ArrowTensorArray

    counts = {k: len(v) for k, v in arrays.items()}
    if len(set(counts.values())) != 1:
        raise InputError(f"the arrays have different row counts: {counts}")
    rows = next(iter(counts.values()))
    tables = []
    for start in range(0, max(rows, 1), block_rows):
        cols = {k: _arrow_column(np.ascontiguousarray(v[start:start + block_rows]),
                                 ArrowTensorArray) for k, v in arrays.items()}
        cols[index_column] = pa.array(np.arange(start, min(rows, start + block_rows)))
        tables.append(pa.table(cols))
    return ray.data.from_arrow(tables)


def _arrow_column(a: np.ndarray, tensor_array) -> Any:
    import pyarrow as pa

    return tensor_array.from_numpy(a) if a.ndim > 1 else pa.array(a)


def with_row_index(dataset: ray.data.Dataset, index_column: str = "row") -> ray.data.Dataset:
    """``dataset`` with ``index_column`` numbering its rows in order.  It is materialized
    once to count each block's rows (give the column yourself to avoid that)."""
    import ray

    count, index = ray.remote(num_cpus=0)(_count), ray.remote(num_cpus=0)(_index)
    refs = dataset.materialize().to_arrow_refs()
    counts = ray.get([count.remote(r) for r in refs])
    starts = np.cumsum([0] + counts[:-1]) if counts else []
    return ray.data.from_arrow_refs([index.remote(r, int(s), index_column)
                                     for r, s in zip(refs, starts)])


def _count(table) -> int:
    return table.num_rows


def _index(table, start: int, index_column: str):
    import pyarrow as pa

    return table.append_column(index_column, pa.array(np.arange(start, start + table.num_rows)))


def safe_name(name: str) -> str:
    """An output name as a folder name (characters other than letters, digits, ``._-``
    become ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"


#: The folder of an ``airrun --dataset`` output folder that holds the job's checkpoint;
#: no column's folder takes its name.
OUTPUT_CHECKPOINT = ".checkpoint"
_SHARD = re.compile(r"part-\d{12,}\.(npy|parquet)")


def output_folders(names: list[str]) -> dict[str, str]:
    """Each column's folder of .npy shards: its :func:`safe_name`, numbered when two meet."""
    out: dict[str, str] = {}
    for n in names:
        base, k = safe_name(n), 1
        folder = base
        while folder in out.values() or folder == OUTPUT_CHECKPOINT:
            k += 1
            folder = f"{base}.{k}"
        out[n] = folder
    return out


def remove_shards(out_dir: str, folders: dict[str, str]) -> None:
    """Remove the shards (``part-N``) and the summary an earlier :func:`write_shard` of
    these column ``folders`` left under ``out_dir``."""
    for folder in ["", *folders.values()]:
        path = os.path.join(out_dir, folder)
        names = os.listdir(path) if os.path.isdir(path) else []
        for name in names:
            if _SHARD.fullmatch(name) or (not folder and name == "summary.json"):
                os.unlink(os.path.join(path, name))


def write_shard(batch: dict, out_dir: str, fmt: str, folders: dict[str, str],
                index_column: str) -> dict:
    """Write one shard of results, named by its first row (``part-000000000096``):
    ``OUT/<column>/part-N.npy`` per column (the index column too), or
    ``OUT/part-N.parquet``; each file is written whole under a temporary name, then
    renamed.  Returns the files written."""
    first = int(batch[index_column][0])
    stem = f"part-{first:012d}"
    written = []
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({k: (pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(v))
                              if v.ndim > 1 else pa.array(v)) for k, v in batch.items()})
        written.append(_atomic(os.path.join(out_dir, stem + ".parquet"),
                               lambda p: pq.write_table(table, p)))
    else:
        for column, value in batch.items():
            folder = os.path.join(out_dir, folders[column])
            os.makedirs(folder, exist_ok=True)
            written.append(_atomic(os.path.join(folder, stem + ".npy"),
                                   lambda p, v=value: np.save(p, np.ascontiguousarray(v))))
    return {"first_row": np.array([first]), "rows": np.array([len(batch[index_column])]),
            "files": np.array([json.dumps(written)])}


def _atomic(path: str, write) -> str:
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())          # on disk before a checkpoint lets its batches go
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    sync_folder(os.path.dirname(path))
    return path


def write_atomic(path: str, data: bytes) -> str:
    """Write ``data`` to ``path`` whole (temporary file, fsync, rename)."""
    return _atomic(path, lambda f: f.write(data))

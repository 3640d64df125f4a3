"""A dataset job's checkpoint without Ray: the fingerprints of the model and the data, a
resume of another job refused naming what differs, each batch written atomically with
its record, torn or damaged records found and computed again, the rows done taken out
of the next run, and the results read back each row once, in order."""
from __future__ import annotations

import os

import numpy as np
import pytest

from aircc.distributed import checkpoint as ck
from aircc.distributed.actor import ModelActor
from aircc.errors import CheckpointError, InputError

ROWS, BATCH = 100, 16


def fingerprint(data: str = "arrays:0", model: str = "m0", rows: int = ROWS) -> dict:
    return {"model": model, "data": data, "rows": rows, "index_column": "row",
            "input_columns": '{"x": "x"}', "keep_columns": '["path"]', "outputs": '["y"]',
            "batch_code": ck.batch_code(ModelActor)}


def batch(first: int, n: int) -> dict[str, np.ndarray]:
    """A batch's results: the index, a kept column of strings and an output."""
    rows = np.arange(first, first + n)
    return {"row": rows, "path": np.array([f"img{r}.png" for r in rows], object),
            "y": np.sin(rows)[:, None] * np.arange(3, dtype=np.float32)}


def write_batches(checkpoint: ck.DatasetCheckpoint, firsts: list[int], run: str) -> list[str]:
    paths = []
    for first in firsts:
        n = min(BATCH, ROWS - first)
        path = ck.record_path(checkpoint.batches, first, first + n - 1)
        ck.write_record(path, batch(first, n), "row", {"run": run, "pid": 1})
        paths.append(path)
    return paths


def test_fingerprints_change_with_any_byte_of_the_data_or_the_model(tmp_path):
    x = np.random.default_rng(0).standard_normal([ROWS, 4]).astype(np.float32)
    a, rows = ck.data_fingerprint({"x": x}, ["x"])
    assert rows == ROWS and ck.data_fingerprint({"x": x.copy()}, ["x"])[0] == a
    y = x.copy()
    y[77, 2] = np.nextafter(y[77, 2], np.inf)
    assert ck.data_fingerprint({"x": y}, ["x"])[0] != a
    assert ck.data_fingerprint(x, ["x"])[0] != a                  # named otherwise
    assert ck.data_fingerprint({"x": x.astype(np.float64)}, ["x"])[0] != a
    folder = tmp_path / "data"
    folder.mkdir()
    np.save(folder / "a.npy", x[:60])
    np.save(folder / "b.npy", x[60:])
    d, rows = ck.data_fingerprint(str(folder), ["x"])
    assert rows == ROWS
    np.save(folder / "b.npy", y[60:])
    changed = ck.data_fingerprint(str(folder), ["x"])[0]
    assert changed != d
    os.rename(folder / "b.npy", folder / "c.npy")                  # same bytes, renamed
    assert ck.data_fingerprint(str(folder), ["x"])[0] not in (d, changed)
    assert ck.model_fingerprint(b"om bytes") != ck.model_fingerprint(b"om bytez")
    with pytest.raises(InputError, match="pass dataset_fingerprint="):
        ck.data_fingerprint(object(), ["x"])


def test_a_resume_by_another_model_or_dataset_is_refused_naming_them(tmp_path):
    ck.DatasetCheckpoint.open(tmp_path, fingerprint())
    assert ck.DatasetCheckpoint.open(tmp_path, fingerprint()).records == []
    with pytest.raises(CheckpointError, match=r"was made by another job \(the model \(sha256\): "
                                              r"'m0' in the checkpoint, 'm1' now\)"):
        ck.DatasetCheckpoint.open(tmp_path, fingerprint(model="m1"))
    with pytest.raises(CheckpointError, match=r"the dataset: 'arrays:0' in the checkpoint, "
                                              r"'arrays:1' now"):
        ck.DatasetCheckpoint.open(tmp_path, fingerprint(data="arrays:1"))

    class OtherFeeds(ModelActor):
        def feeds(self, batch):
            return super().feeds(batch)

    class OnlyWrapsCall(ModelActor):
        def __call__(self, batch):
            yield from super().__call__(batch)

    assert ck.batch_code(OnlyWrapsCall) == ck.batch_code(ModelActor)
    changed = dict(fingerprint(), batch_code=ck.batch_code(OtherFeeds))
    with pytest.raises(CheckpointError, match="the actor code that makes a batch's outputs"):
        ck.DatasetCheckpoint.open(tmp_path, changed)
    os.unlink(tmp_path / ck.MANIFEST)
    assert ck.DatasetCheckpoint.open(tmp_path, changed).records == []    # nothing to trust
    write_batches(ck.DatasetCheckpoint.open(tmp_path, changed), [0], "run1")
    os.unlink(tmp_path / ck.MANIFEST)                # batches of an unknown job: refused
    with pytest.raises(CheckpointError, match="holds batches but no job.ckpt"):
        ck.DatasetCheckpoint.open(tmp_path, fingerprint())


def test_finished_batches_are_taken_out_of_the_next_run(tmp_path):
    checkpoint = ck.DatasetCheckpoint.open(tmp_path, fingerprint())
    write_batches(checkpoint, [0, 16, 48, 96], "run1")
    again = ck.DatasetCheckpoint.open(tmp_path, fingerprint())
    assert [(r.first_row, r.last_row, r.rows, r.run) for r in again.records] == \
        [(0, 15, 16, 'run1'), (16, 31, 16, 'run1'), (48, 63, 16, 'run1'), (96, 99, 4, 'run1')]
    starts, ends = again.done_ranges()
    assert starts.tolist() == [0, 48, 96] and ends.tolist() == [32, 64, 100]
    assert again.done_rows() == 52 and not again.all_done()
    left = ck.drop_done_rows({"row": np.arange(ROWS), "x": np.arange(ROWS) * 10}, "row",
                             starts, ends)
    expect = [r for r in range(ROWS) if not (r < 32 or 48 <= r < 64 or r >= 96)]
    assert left["row"].tolist() == expect and left["x"].tolist() == [r * 10 for r in expect]
    none = ck.drop_done_rows({"row": np.arange(5)}, "row", *ck.DatasetCheckpoint(
        str(tmp_path), fingerprint()).done_ranges())
    assert none["row"].tolist() == list(range(5))
    write_batches(again, [32, 64, 80], "run2")
    assert ck.DatasetCheckpoint.open(tmp_path, fingerprint()).all_done()


def test_torn_damaged_and_misnamed_records_are_computed_again_never_trusted(tmp_path):
    checkpoint = ck.DatasetCheckpoint.open(tmp_path, fingerprint())
    paths = write_batches(checkpoint, [0, 16, 32, 48, 64], "run1")
    with open(paths[1], "r+b") as f:                 # torn: cut off mid-write
        f.truncate(os.path.getsize(paths[1]) // 2)
    with open(paths[2], "r+b") as f:                 # a flipped bit in the outputs
        f.seek(os.path.getsize(paths[2]) - 5)
        byte = f.read(1)[0]
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte ^ 0x10]))
    os.rename(paths[3], ck.record_path(checkpoint.batches, 40, 55))   # rows not its own
    tmp = os.path.join(checkpoint.batches, ".rows-000000000064.ckpt.abc.tmp")
    with open(tmp, "wb") as f:                       # a writer killed before its rename
        f.write(b"\0" * 100)
    again = ck.DatasetCheckpoint.open(tmp_path, fingerprint())
    assert [r.first_row for r in again.records] == [0, 64]
    assert [d.split(":")[0] for d in again.discarded] == [
        "rows-000000000016-000000000031.ckpt", "rows-000000000032-000000000047.ckpt",
        "rows-000000000040-000000000055.ckpt"]
    assert "truncated" in again.discarded[0] and "fails its checksum" in again.discarded[1]
    assert sorted(os.listdir(again.batches)) == [os.path.basename(paths[0]),
                                                 os.path.basename(paths[4])]


def test_results_give_each_row_once_in_order_with_kept_strings(tmp_path):
    """A batch a killed run wrote late may overlap the next run's batches."""
    checkpoint = ck.DatasetCheckpoint.open(tmp_path, fingerprint())
    write_batches(checkpoint, [0, 32, 64, 80, 96], "run2")
    late = ck.record_path(checkpoint.batches, 16, 47)             # the killed run's
    ck.write_record(late, {k: v[16:48] for k, v in batch(0, 48).items()}, "row", {"run": "run1"})
    write_batches(checkpoint, [48], "run2")
    cover = ck.cover(checkpoint.files())
    parts = [b for path, first in cover
             for b in ck.read_batches({"path": [path], "from_row": [first]},
                                      ["row", "path", "y"], "row")]
    assert [(os.path.basename(p)[5:17], f) for p, f in cover] == [
        ("000000000000", 0), ("000000000016", 16), ("000000000048", 48),
        ("000000000064", 64), ("000000000080", 80), ("000000000096", 96)]
    got = {k: np.concatenate([p[k] for p in parts]) for k in ("row", "path", "y")}
    want = batch(0, ROWS)
    assert got["row"].tolist() == list(range(ROWS))
    assert got["path"].tolist() == want["path"].tolist()
    assert np.array_equal(got["y"], want["y"]) and got["y"].dtype == want["y"].dtype


def test_a_completed_job_keeps_its_summary_and_lets_its_batch_files_go(tmp_path):
    checkpoint = ck.DatasetCheckpoint.open(tmp_path, fingerprint())
    write_batches(checkpoint, list(range(0, ROWS, BATCH)), "run1")
    checkpoint.complete('{"rows": 100}')
    again = ck.DatasetCheckpoint.open(tmp_path, fingerprint())
    assert again.completed == '{"rows": 100}' and os.listdir(again.batches) == []
    with pytest.raises(CheckpointError, match="was made by another job"):
        ck.DatasetCheckpoint.open(tmp_path, fingerprint(model="m1"))

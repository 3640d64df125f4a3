"""Batch inference over datasets on Ray (aircc.distributed): a compiled model run by a pool
of Ray Data actors gives the outputs of running it row by row in one process, in input
order, through a dead actor and past a failing batch.

One local Ray instance (2 CPUs, no dashboard) serves the whole module; it is shut down at
the end and none of its processes may be left then.  Each test has a deadline.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from onnx import TensorProto, helper

import aircc
from aircc.distributed import ModelActor, run_dataset    # imports Ray only when it runs
from aircc.errors import BatchFailedError, CheckpointError, InputError
from aircc.formats.om import dump_om
from graphs import const, model, tensor

ray = pytest.importorskip("ray", reason="Ray is not installed here (pip install 'aircc[ray]'; "
                                        "it has no wheel for this platform or Python)")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'ray[data]')")

ROWS = 256
BATCH = 32
#: Seconds any one test may take (Ray's start-up is counted in the first): a guard against a
#: hang, not a timing; the killed-actor test once took over 60 s on a machine kept busy by
#: another job (Ray's restart of the actor and its model's load share the two cores).
DEADLINE = 150
AIRRUN = [sys.executable, "-c", "from aircc.cli.airrun_cmd import main; main()"]


def processes_using(folder: str) -> list[int]:
    """Processes other than this one with a file open under ``folder`` (Linux's /proc)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue                            # gone, or not ours to read
        if any(link.startswith(folder) for link in links):
            found.append(int(pid))
    return found


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """A local Ray instance of 2 CPUs for the module, its session files under pytest's
    temporary folder; after it, no process of it is left (each holds its log files
    there)."""
    saved = {k: os.environ.get(k) for k in ("RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE")}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"
    folder = str(tmp_path_factory.mktemp("ray"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             _temp_dir=folder)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if not os.path.isdir("/proc"):
        return
    left = processes_using(folder)
    for _ in range(50):
        if not left:
            return
        time.sleep(0.2)
        left = processes_using(folder)
    names = {}
    for pid in left:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            names[pid] = f.read().replace(b"\0", b" ").decode()
            os.kill(pid, signal.SIGKILL)        # started by this module's Ray: end them
    pytest.fail(f"Ray processes outlived the module's Ray instance: {names}")


@pytest.fixture(autouse=True)
def deadline():
    """Fail a test that runs past :data:`DEADLINE` instead of hanging the suite."""
    def expired(*_):
        raise TimeoutError(f"test passed its deadline of {DEADLINE} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(DEADLINE)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def conv_model() -> bytes:
    """A small image classifier (two convolutions, pooling, a dense layer, softmax) whose
    batch is dynamic, compiled to .om bytes."""
    rng = np.random.default_rng(0)
    inits = [const("w1", (rng.standard_normal([8, 3, 3, 3]) * 0.3).astype(np.float32)),
             const("b1", (rng.standard_normal([8]) * 0.1).astype(np.float32)),
             const("w2", (rng.standard_normal([16, 8, 3, 3]) * 0.2).astype(np.float32)),
             const("w3", (rng.standard_normal([16, 10]) * 0.3).astype(np.float32))]
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             node("Relu", ["c1"], ["r1"], name="relu1"),
             node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
             node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             node("Relu", ["c2"], ["r2"], name="relu2"),
             node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             node("Flatten", ["g"], ["f"], name="flatten"),
             node("MatMul", ["f", "w3"], ["m"], name="fc"),
             node("Softmax", ["m"], ["y"], axis=1, name="softmax")]
    proto = model(nodes, [tensor("x", ["N", 3, 16, 16])], [tensor("y", ["N", 10])], inits)
    return dump_om(aircc.compile(proto).om)


def embedding_model() -> bytes:
    """Token ids -> the mean of their embeddings: an id outside the vocabulary of 100 makes
    the Gather kernel fail (a KernelError naming node 'lookup')."""
    emb = np.random.default_rng(2).standard_normal([100, 8]).astype(np.float32)
    proto = model([helper.make_node("Gather", ["emb", "ids"], ["e"], axis=0, name="lookup"),
                   helper.make_node("ReduceMean", ["e"], ["y"], axes=[1], keepdims=0,
                                    name="pool")],
                  [tensor("ids", ["N", 4], TensorProto.INT64)], [tensor("y", ["N", 8])],
                  [const("emb", emb)])
    return dump_om(aircc.compile(proto).om)


def row_by_row(om: bytes, name: str, rows: np.ndarray) -> np.ndarray:
    """The reference: the model run on one row at a time, in this process."""
    with aircc.load(om) as m:
        out = m.outputs[0].name
        return np.concatenate([m.run({name: rows[i:i + 1]})[out] for i in range(len(rows))])


@pytest.fixture(scope="module")
def images():
    """(.om bytes, ROWS images, their outputs row by row)."""
    om = conv_model()
    x = np.random.default_rng(1).standard_normal([ROWS, 3, 16, 16]).astype(np.float32)
    return om, x, row_by_row(om, "x", x)


def test_two_actors_give_the_row_by_row_outputs_in_input_order(local_ray, images):
    om, x, reference = images
    job = run_dataset(om, {"x": x}, batch_size=BATCH, actors=2, progress=False)
    with job:
        out = job.to_numpy()
    assert np.array_equal(out["row"], np.arange(ROWS))
    assert out["y"].shape == (ROWS, 10) and out["y"].dtype == np.float32
    assert np.array_equal(out["y"], reference)
    s = job.summary
    assert (s.rows, s.batches, s.failures, s.actors_started) == (ROWS, ROWS // BATCH, [], 2)
    assert s.actors_used == 2, "one actor ran every batch"
    assert s.actor_threads == [1, 1], "each actor's threads are the 1 CPU Ray gave it"
    assert s.rows_per_second > 0 and f"rows {ROWS}, batches {ROWS // BATCH}" in s.format()


def test_a_directory_of_npy_and_npz_shards_is_written_as_npy_shards_in_order(local_ray, images,
                                                                              tmp_path):
    om, x, reference = images
    data = tmp_path / "images"
    data.mkdir()
    np.save(data / "shard-0.npy", x[:100])                  # uneven shards, read in name order
    np.save(data / "shard-1.npy", x[100:160])
    np.savez_compressed(data / "shard-2.npz", x=x[160:])    # an .npz holds inputs by name
    out = tmp_path / "out"
    job = run_dataset(om, str(data), batch_size=BATCH, actors=1, progress=False)
    with job:
        summary = job.write(out, fmt="npy", shard_rows=64)
    ys = sorted(os.listdir(out / "y"))
    assert ys == sorted(os.listdir(out / "row")) and len(ys) == ROWS // 64
    assert np.array_equal(np.concatenate([np.load(out / "row" / f) for f in ys]),
                          np.arange(ROWS))
    assert np.array_equal(np.concatenate([np.load(out / "y" / f) for f in ys]), reference)
    assert summary.rows == ROWS and len(summary.files) == 2 * len(ys)
    assert '"rows": 256' in (out / "summary.json").read_text()


def test_an_actor_killed_mid_run_is_replaced_and_every_row_comes_back(local_ray, images,
                                                                      tmp_path):
    om, x, reference = images
    marker = str(tmp_path / "killed")

    class DiesOnce(ModelActor):
        """Exits its process (as a crash would) on the batch holding row 100, once."""

        def __call__(self, batch):
            if 100 in batch["row"] and not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)
            yield from super().__call__(batch)

    job = run_dataset(om, {"x": x}, batch_size=BATCH, actors=2, progress=False,
                      actor_class=DiesOnce)
    with job:
        out = job.to_numpy()
    assert os.path.exists(marker), "the actor never reached the batch it was to die on"
    assert np.array_equal(out["row"], np.arange(ROWS))
    assert np.array_equal(out["y"], reference)
    assert job.summary.actor_restarts >= 1 and job.summary.actors_started >= 3
    assert job.summary.failures == []
    assert job.summary.batches == ROWS // BATCH


@pytest.fixture(scope="module")
def tokens():
    """(.om bytes, ROWS rows of 4 token ids with an id out of the vocabulary in row 77)."""
    ids = np.random.default_rng(3).integers(0, 100, [ROWS, 4]).astype(np.int64)
    ids[77, 2] = 100
    return embedding_model(), ids


def test_a_failing_batch_is_reported_with_its_id_and_the_others_run(local_ray, tokens):
    om, ids = tokens
    good = np.ones(ROWS, bool)
    good[64:96] = False                        # the batch holding row 77
    reference = row_by_row(om, "ids", ids[good])
    job = run_dataset(om, {"ids": ids}, batch_size=BATCH, actors=1, progress=False)
    with job:
        out = job.to_numpy()
    assert np.array_equal(out["row"], np.arange(ROWS)[good])
    assert np.array_equal(out["y"], reference)
    [failure] = job.summary.failures
    assert (failure.batch, failure.rows, failure.code, failure.error) == \
        ("rows 64-95", BATCH, 507015, "KernelError")
    assert "'lookup'" in failure.message and "index 100 is out of bounds" in failure.message
    assert job.summary.batches == ROWS // BATCH - 1
    assert "batch rows 64-95 (32 rows) failed: KernelError" in job.summary.format()


def test_fail_fast_stops_the_run_naming_the_batch(local_ray, tokens):
    om, ids = tokens
    job = run_dataset(om, {"ids": ids}, batch_size=BATCH, actors=1, progress=False,
                      fail_fast=True)
    with job, pytest.raises(BatchFailedError, match=r"batch rows 64-95 \(32 rows\) failed: "
                                                    r"KernelError \[507015\]") as e:
        job.to_numpy()
    assert e.value.batch == "rows 64-95" and e.value.cause_code == 507015


def test_a_ray_dataset_without_an_index_is_numbered_and_fed_by_its_column(local_ray, images):
    """... by one actor given both CPUs, whose aircc threads are sized to them."""
    om, x, reference = images
    ds = ray.data.from_numpy(x[:96]).repartition(3)         # one column, named "data"
    job = run_dataset(om, ds, batch_size=BATCH, actors=1, cpus_per_actor=2, progress=False)
    with job:
        out = job.to_numpy()
    assert np.array_equal(out["row"], np.arange(96))
    assert np.array_equal(out["y"], reference[:96])
    assert job.summary.actor_threads == [2]


def test_a_dataset_that_cannot_feed_the_model_is_refused_naming_the_columns(local_ray, images,
                                                                           tmp_path):
    om, x, _ = images
    with pytest.raises(InputError, match=r"input 'x': the dataset has no column 'pixels'; "
                                         r"its columns are \['a', 'b'\]"):
        run_dataset(om, {"a": x, "b": x}, input_columns={"x": "pixels"})
    with pytest.raises(InputError, match="input 'x': the dataset has no column 'x'"):
        run_dataset(om, {"a": x, "b": x})
    with pytest.raises(InputError, match="is not a directory of .npy, .npz or .parquet files"):
        run_dataset(om, str(tmp_path / "missing"))
    with pytest.raises(InputError, match="holds no .npy, .npz or .parquet file"):
        run_dataset(om, str(tmp_path))


@pytest.mark.long
def test_airrun_runs_a_parquet_dataset_on_an_existing_cluster(local_ray, images, tmp_path):
    """``airrun --dataset --ray ADDRESS`` joins the module's Ray instance by its address."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    om, x, reference = images
    (tmp_path / "model.om").write_bytes(om)
    data = tmp_path / "data"
    data.mkdir()
    for i, (a, b) in enumerate([(0, 128), (128, ROWS)]):
        pq.write_table(pa.table({"x": pa.FixedShapeTensorArray.from_numpy_ndarray(x[a:b])}),
                       data / f"part-{i}.parquet")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    r = subprocess.run(AIRRUN + [str(tmp_path / "model.om"),
                        "--dataset", str(data), "--output-dir", str(tmp_path / "out"),
                        "--output-format", "parquet", "--batch-size", str(BATCH),
                        "--ray", local_ray], check=False, capture_output=True, text=True, env=env,
                       timeout=DEADLINE - 5)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"rows {ROWS}, batches {ROWS // BATCH}" in r.stdout
    parts = sorted(p for p in os.listdir(tmp_path / "out") if p.endswith(".parquet"))
    table = pa.concat_tables([pq.read_table(tmp_path / "out" / p) for p in parts])
    assert np.array_equal(table.column("row").to_numpy(), np.arange(ROWS))
    assert np.array_equal(table.column("y").combine_chunks().to_numpy_ndarray(), reference)


def test_airrun_dataset_options_are_checked_before_any_work(tmp_path, images):
    from aircc.cli.airrun_cmd import main as airrun
    from click.testing import CliRunner

    (tmp_path / "model.om").write_bytes(images[0])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.npy").write_bytes(b"")
    model_om = str(tmp_path / "model.om")
    for args, message in [
            (["--ray"], "--ray runs a --dataset; give --dataset DIR"),
            (["--dataset", str(tmp_path)], "--dataset writes its outputs to --output-dir OUT"),
            (["--dataset", str(tmp_path), "--output-dir", str(tmp_path / "out")],
             "is not empty; give a new or empty folder"),
            (["--dataset", str(tmp_path), "--output-dir", str(tmp_path / "out"), "--resume"],
             "holds files but no job to resume (no .checkpoint folder)"),
            (["--dataset", str(tmp_path), "--output-dir", str(tmp_path / "new"), "--random", "1"],
             "it cannot go with --input, --random or --output")]:
        r = CliRunner().invoke(airrun, [model_om, *args])
        assert r.exit_code == 2 and message in r.output, (args, r.output)
    r = CliRunner().invoke(airrun, [model_om, "--dataset", str(tmp_path / "missing"),
                                    "--output-dir", str(tmp_path / "new")])
    assert r.exit_code == 4 and "is not a directory of .npy, .npz or .parquet" in r.output


def test_importing_aircc_does_not_import_ray():
    code = ("import sys, aircc, aircc.distributed, aircc.cli.airrun_cmd; "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


# ---------------------------------------------------------------- checkpoints and resume
#: A driver that runs ``airrun`` with actors waiting PAUSE s before each batch (the same
#: code makes each batch's outputs: the job's fingerprint is plain airrun's), so that the
#: test can kill it half way.
SLOW_AIRRUN = """
import sys, time
import aircc.distributed
from aircc.distributed import ModelActor

class SlowActor(ModelActor):
    def __call__(self, batch):
        time.sleep({pause})
        yield from super().__call__(batch)

run_dataset = aircc.distributed.run_dataset
aircc.distributed.run_dataset = lambda *a, **k: run_dataset(*a, actor_class=SlowActor, **k)
from aircc.cli.airrun_cmd import main
main()
"""


def batch_files(folder) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_job_resumes_from_its_checkpoint_running_only_missing_and_damaged_batches(
        local_ray, images, tmp_path):
    from aircc.distributed.checkpoint import read_record

    om, x, reference = images
    ck = tmp_path / "ck"
    with run_dataset(om, {"x": x}, batch_size=BATCH, actors=1, progress=False,
                     checkpoint_dir=ck) as job:
        out = job.to_numpy()
    assert np.array_equal(out["row"], np.arange(ROWS)) and np.array_equal(out["y"], reference)
    assert (job.summary.batches, job.summary.resumed_batches) == (ROWS // BATCH, 0)
    batches = ck / "batches"
    files = batch_files(batches)
    assert len(files) == ROWS // BATCH
    [first_run] = {read_record(str(batches / f)).run for f in files}
    os.unlink(batches / files[1])                          # never written
    os.unlink(batches / files[4])
    data = (batches / files[2]).read_bytes()
    (batches / files[2]).write_bytes(data[:-10])            # torn
    data = bytearray((batches / files[6]).read_bytes())
    data[len(data) // 2] ^= 1                               # a flipped byte
    (batches / files[6]).write_bytes(bytes(data))
    (batches / f".{files[3]}.0123.tmp").write_bytes(b"half a file")   # a killed writer's
    with run_dataset(om, {"x": x}, batch_size=BATCH, actors=1, progress=False,
                     checkpoint_dir=ck) as job:
        out = job.to_numpy()
    assert np.array_equal(out["row"], np.arange(ROWS)) and np.array_equal(out["y"], reference)
    s = job.summary
    assert (s.batches, s.resumed_batches, s.resumed_rows, s.rows) == (4, 4, 4 * BATCH, ROWS)
    assert "resumed 4 batches (128 rows) from the checkpoint" in s.format()
    assert sorted(d.split(":")[0] for d in job.checkpoint.discarded) == [files[2], files[6]]
    assert batch_files(batches) == files, "a temporary file was left, or a batch is missing"
    runs = {f: read_record(str(batches / f)).run for f in files}
    assert [f for f in files if runs[f] == first_run] == [files[i] for i in (0, 3, 5, 7)], \
        "a batch the checkpoint held was run again"
    with pytest.raises(CheckpointError, match=r"was made by another job \(the dataset: "):
        run_dataset(om, {"x": x[::-1].copy()}, batch_size=BATCH, checkpoint_dir=ck)


@pytest.mark.long
def test_airrun_killed_half_way_resumes_and_gives_an_uninterrupted_runs_outputs(
        local_ray, images, tmp_path):
    """The driver is killed (SIGKILL) once about half the batches are recorded; ``airrun
    --resume`` runs only the others, and no batch is run twice."""
    from aircc.distributed.checkpoint import read_record

    om, x, reference = images
    (tmp_path / "model.om").write_bytes(om)
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    np.save(data / "shard-0.npy", x[:100])
    np.save(data / "shard-1.npy", x[100:])
    batches, total = out / ".checkpoint" / "batches", ROWS // BATCH
    args = [str(tmp_path / "model.om"), "--dataset", str(data), "--output-dir", str(out),
            "--batch-size", str(BATCH), "--ray", local_ray]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    with open(tmp_path / "driver.log", "wb") as log:
        driver = subprocess.Popen([sys.executable, "-c", SLOW_AIRRUN.format(pause=0.5), *args],
                                  stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            while sum(f.endswith(".ckpt") for f in batch_files(batches)) < total // 2:
                assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
                time.sleep(0.05)
        finally:
            driver.send_signal(signal.SIGKILL)
            driver.wait()
    seen, still = None, 0            # the killed job's actors end: nothing more is written
    for _ in range(600):
        now = batch_files(batches)
        still, seen = (still + 1 if now == seen else 0), now
        writers = {aircc.Checkpoint.load(batches / f).meta["pid"] for f in now
                   if f.endswith(".ckpt")}
        if still >= 10 and not any(map(alive, writers)):
            break
        time.sleep(0.1)
    killed = [f for f in seen if f.endswith(".ckpt")]      # (and maybe a killed writer's .tmp)
    assert total // 2 <= len(killed) < total, killed
    assert len({read_record(str(batches / f)).run for f in killed}) == 1

    r = subprocess.run(AIRRUN + [*args, "--resume"], check=False, capture_output=True,
                       text=True, env=env, timeout=DEADLINE - 60)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_batches"] == len(killed) and summary["rows"] == ROWS
    assert summary["batches"] + len(killed) == total, "a batch was run twice, or not at all"
    assert f"resumed {len(killed)} batches" in r.stdout
    ys = sorted(os.listdir(out / "y"))
    assert ys == sorted(os.listdir(out / "row"))
    with run_dataset(om, str(data), batch_size=BATCH, actors=1, progress=False) as job:
        uninterrupted = job.to_numpy()
    assert np.array_equal(np.concatenate([np.load(out / "row" / f) for f in ys]),
                          uninterrupted["row"])
    assert np.array_equal(np.concatenate([np.load(out / "y" / f) for f in ys]),
                          uninterrupted["y"])
    assert np.array_equal(uninterrupted["y"], reference)
    assert batch_files(batches) == [], "the finished job's batch files were kept"

    from aircc.cli.airrun_cmd import main as airrun
    from click.testing import CliRunner
    again = CliRunner().invoke(airrun, [*args, "--resume"])
    assert again.exit_code == 0 and "is complete; nothing to run" in again.output, again.output
    assert f"resumed {len(killed)} batches" in again.output
    refused = CliRunner().invoke(airrun, args)
    assert refused.exit_code == 2 and "--resume to go on with the job" in refused.output

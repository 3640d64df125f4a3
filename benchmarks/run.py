"""aircc against onnxruntime on the same CPU, same process, interleaved.

    python benchmarks/run.py                 # every suite -> benchmarks/results.json, .md, .svg
    python benchmarks/run.py --quick         # fewer rounds
    python benchmarks/run.py --only resnet50 --rounds 20
    python benchmarks/run.py --suite broader --targets native,cpu-dnnl
    python benchmarks/run.py --suite light --targets native,native@allow_mix_precision_bf16
    python benchmarks/run.py --only resnet50 --contended resnet50
    python benchmarks/run.py --serving-only --serving squeezenet,resnet50

Suites (``--suite``): ``light`` (the onnx package's light models), ``samples`` (aircc's
samples and the dynamic BERT-style encoder) and ``broader`` (torch-exported models of
the kinds users bring: ``broader.py``).  Each model is compiled for every target of
``--targets`` (a target that cannot be compiled for or loaded here is skipped, with one
line saying why) and loaded; a model or target that fails is reported with its error.
Then ``rounds`` rounds, each timing a block of runs of every engine (each target's
aircc and onnxruntime) on the same inputs, in an order that rotates from round to
round.  A block waits until the other engines' threads are idle, runs once untimed,
then times its runs back to back, so that each engine runs in its own default
configuration as it would alone (``quiet.py``); a fast model's blocks grow until its
timed runs take ``--min-seconds``.  Reported: median latency of each, each target's
ratio aircc / onnxruntime (the median over rounds of each round's ratio of block
medians) and its geometric mean per suite, peak device memory, host time per
inference, compile time, the nodes that run on the fallback kernel (onnx's reference
op), and the model's multiply-adds with each engine's effective GFLOP/s beside numpy's
own float32 GEMM rate (``work.py``).  The contended run (``--contended``, and ResNet-50
in a full run) times models again with a busy neighbour process spinning on a core
(``neighbour.py``), beside a quiet run of the same models just before.  The serving
table (``--serving [MODELS]``, and a full run for SqueezeNet, ResNet-50, the BERT-style
encoder at (1, 32) and MobileNet; ``--serving-only`` runs nothing else) gives
inferences/s and p50/p90/p99 latency with 1, 2 and 4 requests in flight for aircc,
onnxruntime and OpenVINO (``pip install openvino``; skipped with one line where it is
missing): ``serving.py``.  Also: compile
time against graph size and the load time of a .om with 90 MB of weights
(``scaling.py``); ``results.svg`` plots the ratios and the compile scaling (``plot.py``).
Host time per inference is the host thread's CPU time in the run call (not the wait
for the device).  Nothing is pinned by default; with ``--device-cpus 0`` the device's
stream workers run on CPU 0, and so does the host thread while it times runs (both
engines are called from it), and a oneDNN target then runs one OpenMP thread.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import re
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

import aircc
from aircc.compiler.driver import CompileOptions, compile_model
from neighbour import busy_neighbour, others_load
from plot import svg
from quiet import wait_until_quiet
from report import markdown, row_line
from scaling import SCALING_SIZES, SCALING_WIDTHS, compile_scaling, growth_exponents, load_time  # noqa: F401
from serving import SERVING, isa_flags, random_feeds, serve
from targets import expand, fallback_ops, options_of, usable_targets
from work import gemm_gflops, multiply_adds

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
sys.path.insert(0, os.path.join(ROOT, "samples"))

SUITES = ("light", "samples", "broader")
#: What a full run times again beside a busy neighbour.
CONTENDED = "resnet50"
#: The BERT-style encoder's (batch, sequence) rows; ``--only bert_dynamic_BxS`` adds others.
BERT_SHAPES = ((1, 16), (4, 64), (8, 128))


def machine() -> dict:
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "onnxruntime": ort.__version__, "cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        info["cpu"] = platform.processor()
    info["isa"] = isa_flags()
    info["blas_kernels"] = blas_kernels()
    info["gemm_gflops"] = round(gemm_gflops(), 1)
    return info


def blas_kernels() -> str:
    """The kernel set numpy's OpenBLAS runs, and OPENBLAS_CORETYPE when it forces one."""
    from aircc.executor.kernels.blas import core_name

    forced = os.environ.get("OPENBLAS_CORETYPE")
    return core_name() + (f" (OPENBLAS_CORETYPE={forced})" if forced else "")


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    # its pool spins between runs by default, as ours does: each block starts after
    # both have gone idle (quiet.py)
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def entries(suites: list[str], wanted: set | None = None, broader_size: str = "full") -> list[dict]:
    """The rows of ``suites`` (all of them, or those named in ``wanted``), each with its
    ``suite``, ``name``, ``model``, compile ``options`` and ``feeds`` (None: random)."""
    rows: list[dict] = []
    if "light" in suites:
        for f in sorted(os.listdir(LIGHT)):
            if f.endswith(".onnx"):
                rows.append({"suite": "light", "name": f[len("light_"):-len(".onnx")],
                             "path": os.path.join(LIGHT, f), "options": CompileOptions(), "feeds": None})
    if "samples" in suites:
        from bert_encoder import build_bert_encoder, make_inputs

        rows.append({"suite": "samples", "name": "sample_mlp",
                     "path": os.path.join(ROOT, "samples", "mlp.onnx"),
                     "options": CompileOptions(input_shapes={"input": [4, 784]}), "feeds": None})
        rows.append({"suite": "samples", "name": "sample_branches",
                     "path": os.path.join(ROOT, "samples", "branches.onnx"),
                     "options": CompileOptions(), "feeds": None})
        if wanted is None or any(w.startswith("bert_") for w in wanted):
            bert = build_bert_encoder()
            shapes = list(BERT_SHAPES)
            shapes += [s for s in map(bert_shape, wanted or ()) if s and s not in shapes]
            for b, s in shapes:
                rows.append({"suite": "samples", "name": f"bert_dynamic_{b}x{s}", "model": bert,
                             "options": CompileOptions(), "feeds": make_inputs(b, s), "shared": "bert"})
    if "broader" in suites:
        import broader

        if broader.torch is None:
            print("suite broader skipped: it needs torch, which is not installed", flush=True)
        else:
            rows += [{"suite": "broader", **r} for r in broader.entries(broader_size, wanted)]
    rows = [r for r in rows if wanted is None or r["name"] in wanted]
    for r in rows:
        if "model" not in r:
            r["model"] = onnx.load(r.pop("path"))
    return rows


def bert_shape(name: str) -> tuple[int, int] | None:
    """(batch, sequence) of a row name ``bert_dynamic_<batch>x<sequence>``, else None."""
    m = re.fullmatch(r"bert_dynamic_(\d+)x(\d+)", name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".splitlines()[0][:500]


def _prepare(entry: dict, target: str, feeds, cache: dict, device) -> dict:
    """Compile and load ``entry`` for ``target`` (once for a ``shared`` entry) and run it
    once: {compiled, model, compile_s, fallback}."""
    key = (entry.get("shared"), target)
    if key[0] and key in cache:
        return cache[key]
    t = time.perf_counter()
    compiled = compile_model(entry["model"], dataclasses.replace(entry["options"],
                                                                  **options_of(target)))
    compile_s = time.perf_counter() - t
    model = aircc.load(compiled.om, device=device)
    try:
        model.run(feeds or random_feeds(model.inputs))
    except Exception:
        model.close()
        raise
    prepared = {"compiled": compiled, "model": model, "compile_s": compile_s,
                "fallback": fallback_ops(compiled)}
    if key[0]:
        cache[key] = prepared
    return prepared


def bench_model(entry: dict, targets: list[str], rounds: int, warmup: int, cache: dict, device=None,
                min_seconds: float = 0.0) -> dict:
    """One row: ``entry`` timed against onnxruntime for each of ``targets``; a target that
    fails to compile, load or run is in the row's ``errors``."""
    prepared, errors = {}, {}
    for target in targets:
        try:
            prepared[target] = _prepare(entry, target, entry["feeds"], cache, device)
        except Exception as e:           # reported in the results, the other targets go on
            errors[target] = _error(e)
            print(f"{entry['name']:<24} {target}: FAILED {errors[target]}", flush=True)
    row = {"model": entry["name"], "suite": entry.get("suite"), "errors": errors}
    if not prepared:
        return row
    shared = entry.get("shared")
    sess = cache.get(("ort", shared)) if shared else None
    if sess is None:
        sess = _session(entry["model"])
        if shared:
            cache[("ort", shared)] = sess
    feeds = entry["feeds"] or random_feeds(next(iter(prepared.values()))["model"].inputs)
    with device.host_thread_on_device_cpus() if device else contextlib.nullcontext(), \
            others_load() as others:
        row.update(_timed(prepared, sess, feeds, rounds, warmup, min_seconds))
    row["others_cpu_cores"] = others["cores"]
    try:
        macs = multiply_adds(entry["model"], {k: np.shape(v) for k, v in feeds.items()})
    except (ValueError, onnx.shape_inference.InferenceError):     # no rate rather than a wrong one
        macs = None
    if macs:
        row["gmacs"] = macs / 1e9
        row["onnxruntime_gflops"] = 2 * macs / 1e9 / (row["onnxruntime_ms"] / 1e3)
        for t in row["targets"].values():
            t["aircc_gflops"] = 2 * macs / 1e9 / (t["aircc_ms"] / 1e3)
    _agreement(row, prepared, feeds)
    primary = next(iter(row["targets"]))
    row.update({"target": primary, **row["targets"][primary]})
    if not shared:
        for p in prepared.values():
            p["model"].close()
    return row


def _agreement(row: dict, prepared: dict, feeds: dict) -> None:
    """For each target with a precision mode, the cosine of its outputs (all of them, as
    one vector) to the first target's without one, on the row's inputs."""
    plain = next((t for t in prepared if "precision_mode" not in options_of(t)), None)
    if plain is None:
        return
    want = prepared[plain]["model"].run(feeds)
    for target, p in prepared.items():
        if "precision_mode" in options_of(target) and target in row["targets"]:
            got = p["model"].run(feeds)
            a = np.concatenate([np.ravel(want[k]).astype(np.float64) for k in want])
            b = np.concatenate([np.ravel(got[k]).astype(np.float64) for k in want])
            row["targets"][target]["cosine_to_float32"] = float(
                a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))


#: Each round runs a block of each engine's runs back to back; a fast model's blocks
#: grow (up to this many timed runs) until the rounds' timed runs take ``--min-seconds``.
MAX_BLOCK = 400
MIN_BLOCK = 2


def block_size(pair_seconds: float, rounds: int, min_seconds: float) -> int:
    """Timed runs per engine per round: enough that ``rounds`` rounds of one run of each
    engine (``pair_seconds``) add up to ``min_seconds``, from ``MIN_BLOCK`` to ``MAX_BLOCK``."""
    if min_seconds <= 0 or pair_seconds <= 0:
        return MIN_BLOCK
    return max(MIN_BLOCK, min(MAX_BLOCK, math.ceil(min_seconds / (rounds * pair_seconds))))


def _block(run, n: int, after=None) -> tuple[list[float], float, bool]:
    """Wait until the process's other threads are idle, run once untimed, then time ``n``
    runs back to back (calling ``after`` after each, untimed): (times, the wait, whether
    it got quiet)."""
    waited, quiet = wait_until_quiet()
    run()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
        if after is not None:
            after()
    return times, waited, quiet


def _timed(prepared: dict, sess, feeds, rounds, warmup, min_seconds: float = 0.0) -> dict:
    names = list(prepared)
    models = [prepared[t]["model"] for t in names]
    runs = [lambda m=m: m.run(feeds) for m in models] + [lambda: sess.run(None, feeds)]
    n = len(runs)
    pair = 0.0                  # the fastest warm-up round: the first ones may record a
    for k in range(warmup):     # dynamic model's replay and would shrink the blocks
        t = time.perf_counter()
        for run in runs:
            run()
        pair = time.perf_counter() - t if k == 0 else min(pair, time.perf_counter() - t)
    block = block_size(pair, rounds, min_seconds)
    times: list[list[float]] = [[] for _ in runs]
    host: list[list[float]] = [[] for _ in models]
    ratios: list[list[float]] = [[] for _ in models]
    waits, noisy = [], 0
    for r in range(rounds):
        medians = [0.0] * n
        for who in ((r + i) % n for i in range(n)):      # each engine leads in turn
            after = (lambda m=models[who], h=host[who]: h.append(m.last_host_seconds)) \
                if who < len(models) else None
            ts, waited, quiet = _block(runs[who], block, after)
            times[who].extend(ts)
            medians[who] = statistics.median(ts)
            waits.append(waited)
            noisy += not quiet
        # the median of the rounds' ratios is the paired comparison, robust to the
        # machine slowing down for a while
        for i in range(len(models)):
            ratios[i].append(medians[i] / medians[-1])
    out = {"onnxruntime_ms": 1e3 * statistics.median(times[-1]), "rounds": rounds, "block": block,
           "quiet_wait_ms": 1e3 * statistics.median(waits), "blocks_not_quiet": noisy, "targets": {}}
    for i, name in enumerate(names):
        p = prepared[name]
        compiled, stats = p["compiled"], p["model"].run_stats()
        if stats.mode == "static":
            peak = stats.arena_bytes + stats.weights_bytes + stats.prepared_bytes
        else:
            peak = (stats.peak_allocated_bytes + stats.prepared_bytes
                    + sum(w.nbytes for w in compiled.om.weights.values()))
        out["targets"][name] = {
            "compiled_for": compiled.report.target, "mode": compiled.report.mode,
            "kernels": compiled.report.kernels, "streams": compiled.report.streams,
            "aircc_ms": 1e3 * statistics.median(times[i]), "ratio": statistics.median(ratios[i]),
            "host_us_per_inference": 1e6 * statistics.median(host[i]),
            "peak_device_bytes": int(peak), "compile_s": p["compile_s"],
            "fallback_nodes": sum(p["fallback"].values()), "fallback_ops": p["fallback"]}
    return out


def geomeans(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Suite -> target -> geometric mean of the ratios of the suite's rows."""
    logs: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        for target, t in r.get("targets", {}).items():
            logs.setdefault(r.get("suite") or "", {}).setdefault(target, []).append(math.log(t["ratio"]))
    return {s: {t: math.exp(sum(v) / len(v)) for t, v in by.items()} for s, by in logs.items()}


def contended(rows: list[dict], targets: list[str], rounds: int, warmup: int, device,
              min_seconds: float) -> list[dict]:
    """Each of ``rows`` timed quiet, then again with a busy neighbour process spinning
    (``neighbour.py``): {model, quiet, contended, neighbour}."""
    out, cache = [], {}
    for entry in rows:
        entry = {**entry, "shared": f"contended:{entry['name']}"}     # compiled once for both
        quiet = bench_model(entry, targets, rounds, warmup, cache, device, min_seconds)
        if "ratio" not in quiet:
            out.append({"model": entry["name"], "quiet": quiet})
            continue
        with busy_neighbour() as busy:
            loaded = bench_model(entry, targets, rounds, warmup, cache, device, min_seconds)
        out.append({"model": entry["name"], "quiet": quiet, "contended": loaded, "neighbour": busy})
        print(f"{entry['name']:<24} contended: aircc {quiet['aircc_ms']:.2f} -> {loaded['aircc_ms']:.2f} ms, "
              f"ort {quiet['onnxruntime_ms']:.2f} -> {loaded['onnxruntime_ms']:.2f} ms, ratio "
              f"{quiet['ratio']:.2f} -> {loaded['ratio']:.2f} (neighbour took "
              f"{busy['core_share']:.2f} of a core)", flush=True)
    for p in cache.values():
        if isinstance(p, dict):
            p["model"].close()
    return out


def kept_with_serving(old: dict, serving: dict) -> dict:
    """The results ``old`` with this run's serving table: its rows in place of the same
    models' rows, the other models' rows kept (a run of some models updates those)."""
    rows = {r["model"]: r for r in (old.get("serving") or {}).get("models", [])}
    rows.update({r["model"]: r for r in serving["models"]})
    return {**old, "serving": {**serving, "models": list(rows.values())}}


def _serving(names: list[str], args, target: str, device, host: dict) -> dict:
    """The serving table's results for the models ``names`` (from every suite)."""
    chosen = entries(list(SUITES), set(names), args.broader_size)
    if missing := [n for n in names if n not in {e["name"] for e in chosen}]:
        print(f"serving: no model {', '.join(missing)} in the suites", file=sys.stderr)
    seconds = args.serving_seconds or (0.5 if args.quick else 1.0)
    rounds = args.serving_rounds or (3 if args.quick else 5)
    return serve(chosen, target, rounds, seconds, device, host)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-seconds", type=float, default=None,
                    help="time a fast model in bigger blocks until its timed runs take this long "
                         f"(at most {MAX_BLOCK} runs a block; default 2, 0 with --quick)")
    ap.add_argument("--quick", action="store_true", help="5 rounds, small scaling sizes")
    ap.add_argument("--suite", default=",".join(SUITES),
                    help=f"comma-separated suites among {', '.join(SUITES)} (default: all)")
    ap.add_argument("--broader-size", choices=("full", "small"), default="full",
                    help="size of the broader suite's models (small: the tests')")
    ap.add_argument("--targets", default="native,numpy",
                    help="comma-separated compile targets, each timed against onnxruntime "
                         "(default native,numpy: this machine's default backend and the numpy "
                         "reference backend, one target when they are the same); 'numpy' "
                         "names cpu-<this machine's vector class>; TARGET@MODE compiles with "
                         "--precision_mode MODE (native@allow_mix_precision_bf16) and reports "
                         "its outputs' cosine to the first float32 target's; one this machine "
                         "cannot use is skipped")
    ap.add_argument("--only", default=None, help="comma-separated model names")
    ap.add_argument("--contended", nargs="?", const=CONTENDED, default=None, metavar="MODELS",
                    help="also time these models (default resnet50; a full run does) quiet and "
                         "then beside a busy process spinning on a core")
    ap.add_argument("--serving", nargs="?", const=SERVING, default=None, metavar="MODELS",
                    help="also serve these models with 1, 2 and 4 requests in flight (default "
                         f"{SERVING}; a full run does): inferences/s and latency percentiles of "
                         "aircc, onnxruntime and OpenVINO (where installed)")
    ap.add_argument("--serving-only", action="store_true",
                    help="serve only (--serving's models, or its default): no latency rows, "
                         "contended run or compile scaling; the results file in --out keeps "
                         "its other sections and other models' serving rows")
    ap.add_argument("--serving-seconds", type=float, default=None,
                    help="each serving block's window (default 1, 0.5 with --quick)")
    ap.add_argument("--serving-rounds", type=int, default=None, help="default 5, 3 with --quick")
    ap.add_argument("--out", default=HERE, help="directory for results.json, results.md and results.svg")
    ap.add_argument("--device-cpus", default="none", metavar="LIST",
                    help="CPUs of the device's stream workers, and of the host thread while it "
                         "times runs (default 'none': not pinned; a oneDNN target pinned to "
                         "fewer CPUs runs that many threads)")
    ap.add_argument("--ray", action="store_true",
                    help="also time batch inference on Ray (ray_throughput.py): rows/s with 1 "
                         "and 2 actors")
    args = ap.parse_args(argv)
    suites = [s for s in args.suite.split(",") if s]
    if unknown := set(suites) - set(SUITES):
        ap.error(f"unknown suite(s) {', '.join(sorted(unknown))}; known: {', '.join(SUITES)}")
    cpus = None if args.device_cpus.lower() == "none" else args.device_cpus
    device = aircc.VirtualDevice(cpus=cpus) if cpus else None
    rounds = args.rounds or (5 if args.quick else 25)
    min_seconds = args.min_seconds if args.min_seconds is not None else (0.0 if args.quick else 2.0)
    full = not args.only and "light" in suites and not args.serving_only
    contend = "" if args.serving_only else args.contended or (CONTENDED if full else "")
    contend_names = [n for n in contend.split(",") if n]
    serving_names = [n for n in (args.serving or (SERVING if full or args.serving_only else "")).split(",") if n]
    wanted = set(args.only.split(",")) | set(contend_names) if args.only else None
    selected = [] if args.serving_only else entries(suites, wanted, args.broader_size)
    host = machine()             # numpy's GEMM rate before a OneDNN target changes its threads
    targets, skipped = usable_targets(expand([t for t in args.targets.split(",") if t]), device)
    results = {"machine": host, "rounds": rounds, "min_seconds": min_seconds,
               "min_block": MIN_BLOCK, "max_block": MAX_BLOCK, "suites": suites,
               "targets": list(targets), "target_info": targets, "skipped_targets": skipped,
               "models": [], "device_cpus": sorted(device.cpus) if device else None}
    if not targets:
        print("no usable target: nothing to time", file=sys.stderr)
        return 1
    cache: dict = {}
    for entry in selected:
        if args.only and entry["name"] not in args.only.split(","):
            continue
        r = bench_model(entry, list(targets), rounds, args.warmup, cache, device, min_seconds)
        results["models"].append(r)
        if (line := row_line(r, results["machine"]["gemm_gflops"])) is not None:
            print(line, flush=True)
    results["geomean_ratio"] = geomeans(results["models"])
    light = results["geomean_ratio"].get("light", {}).get(results["targets"][0])
    if light is not None:
        results["light_geomean_ratio"] = light
    if contend_names:
        known = {e["name"]: e for e in selected}
        if missing := [n for n in contend_names if n not in known]:
            print(f"contended run: no model {', '.join(missing)} in the suites run", file=sys.stderr)
        results["contended"] = contended([known[n] for n in contend_names if n in known], list(targets),
                                         rounds, args.warmup, device, min_seconds)
    if serving_names:
        results["serving"] = _serving(serving_names, args, next(iter(targets)), device, host)
    if not args.only and not args.serving_only:
        results["compile_scaling"] = compile_scaling([500, 2000] if args.quick else SCALING_SIZES)
        results["compile_growth_exponent"] = growth_exponents(results["compile_scaling"])
        results["load"] = load_time()
    os.makedirs(args.out, exist_ok=True)
    if args.ray:
        import ray_throughput

        path = os.path.join(args.out, "ray.json")
        ray_throughput.main(["--json", path])
        with open(path) as f:
            results["ray"] = json.load(f)
    path = os.path.join(args.out, "results.json")
    if args.serving_only and os.path.exists(path):    # the serving table alone: keep the rest
        with open(path) as f:
            results = kept_with_serving(json.load(f), results["serving"])
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(markdown(results))
    timed = [r for r in results["models"] if "ratio" in r]
    if timed:
        with open(os.path.join(args.out, "results.svg"), "w") as f:
            f.write(svg({**results, "models": timed}))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

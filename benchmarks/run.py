"""aircc against onnxruntime on the same CPU, same process, interleaved.

    python benchmarks/run.py                 # full suite -> benchmarks/results.json, .md, .svg
    python benchmarks/run.py --quick         # fewer rounds
    python benchmarks/run.py --only resnet50 --rounds 20

For every model: compile, load, warm up, then ``rounds`` rounds, each timing a block
of aircc runs and a block of onnxruntime runs on the same inputs (alternating which
goes first).  A block waits until the other engine's threads are idle, runs once
untimed, then times its runs back to back, so that each engine runs in its own
default configuration as it would alone (``quiet.py``); a fast model's blocks grow
until its timed runs take ``--min-seconds``.  Reported: median latency of each,
the ratio aircc / onnxruntime (the median over rounds of each round's ratio of
block medians), peak device memory, host time per inference, compile time,
and the model's multiply-adds with each engine's effective GFLOP/s beside numpy's
own float32 GEMM rate (``work.py``: how near the GEMM limit each runs).  Also: compile
time against graph size (synthetic graphs, with the fitted growth exponent) and the
load time of a .om with 90 MB of weights.  ``results.svg`` plots the ratios and the
compile scaling (``plot.py``).  Ratios are measured in one run because the machine is
shared and noisy; medians, not means.  Host time per inference is the host
thread's CPU time in the run call (not the wait for the device), over the timed
runs of our blocks: back to back, as an application serving the model runs
it.  By default the device's stream workers run on CPU 0, and so does
the host thread while it times runs (both engines are called from it); the BLAS
and onnxruntime pools are not pinned.  ``--device-cpus none`` leaves all unpinned.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

import aircc
from aircc.compiler.driver import CompileOptions, compile_model
from aircc.formats import save_om
from plot import growth_exponent, svg
from quiet import wait_until_quiet
from work import gemm_gflops, multiply_adds

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
sys.path.insert(0, os.path.join(ROOT, "samples"))


def machine() -> dict:
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "onnxruntime": ort.__version__, "cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        info["cpu"] = platform.processor()
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


def suite(quick: bool) -> list[dict]:
    from bert_encoder import build_bert_encoder, make_inputs

    entries = []
    for f in sorted(os.listdir(LIGHT)):
        if f.endswith(".onnx"):
            name = f[len("light_"):-len(".onnx")]
            entries.append({"name": name, "model": onnx.load(os.path.join(LIGHT, f)),
                            "options": CompileOptions(), "feeds": None})
    entries.append({"name": "sample_mlp", "model": onnx.load(os.path.join(ROOT, "samples", "mlp.onnx")),
                    "options": CompileOptions(input_shapes={"input": [4, 784]}), "feeds": None})
    entries.append({"name": "sample_branches",
                    "model": onnx.load(os.path.join(ROOT, "samples", "branches.onnx")),
                    "options": CompileOptions(), "feeds": None})
    bert = build_bert_encoder()
    for b, s in ((1, 16), (4, 64), (8, 128)):
        entries.append({"name": f"bert_dynamic_{b}x{s}", "model": bert, "options": CompileOptions(),
                        "feeds": make_inputs(b, s), "shared": "bert"})
    return entries


def random_feeds(inputs: list[dict], seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {i["name"]: rng.standard_normal(i["shape"]).astype(i["dtype"]) for i in inputs}


def bench_model(entry: dict, rounds: int, warmup: int, cache: dict, device=None,
                min_seconds: float = 0.0) -> dict:
    key = entry.get("shared")
    if key and key in cache:
        compiled, compile_s, model, sess = cache[key]
    else:
        t = time.perf_counter()
        compiled = compile_model(entry["model"], entry["options"])
        compile_s = time.perf_counter() - t
        model = aircc.load(compiled.om, device=device)
        sess = _session(entry["model"])
        if key:
            cache[key] = (compiled, compile_s, model, sess)
    feeds = entry["feeds"] or random_feeds(model.inputs)
    with device.host_thread_on_device_cpus() if device else contextlib.nullcontext():
        return _timed(entry, model, sess, feeds, compiled, compile_s, rounds, warmup, key, min_seconds)


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


def _timed(entry, model, sess, feeds, compiled, compile_s, rounds, warmup, key,
           min_seconds: float = 0.0) -> dict:
    t = time.perf_counter()
    for _ in range(warmup):
        model.run(feeds)
        sess.run(None, feeds)
    block = block_size((time.perf_counter() - t) / max(warmup, 1), rounds, min_seconds)
    ours, theirs, host, waits, ratios, noisy = [], [], [], [], [], 0
    engines = (lambda: model.run(feeds), lambda: sess.run(None, feeds))
    for r in range(rounds):
        medians = [0.0, 0.0]
        for who in ((0, 1) if r % 2 == 0 else (1, 0)):
            after = (lambda: host.append(model.last_host_seconds)) if who == 0 else None
            times, waited, quiet = _block(engines[who], block, after)
            (ours if who == 0 else theirs).extend(times)
            medians[who] = statistics.median(times)
            waits.append(waited)
            noisy += not quiet
        ratios.append(medians[0] / medians[1])
    stats = model.run_stats()
    if stats["mode"] == "static":
        peak = stats["arena_bytes"] + stats["weights_bytes"] + stats["prepared_bytes"]
    else:
        peak = (stats["peak_allocated_bytes"] + stats["prepared_bytes"]
                + sum(w.nbytes for w in compiled.om.weights.values()))
    result = {
        "model": entry["name"], "mode": compiled.report["mode"],
        "kernels": compiled.report["kernels"], "streams": compiled.report["streams"],
        "aircc_ms": 1e3 * statistics.median(ours), "onnxruntime_ms": 1e3 * statistics.median(theirs),
        "host_us_per_inference": 1e6 * statistics.median(host),
        "peak_device_bytes": int(peak), "compile_s": compile_s, "rounds": rounds,
        "block": block, "quiet_wait_ms": 1e3 * statistics.median(waits), "blocks_not_quiet": noisy,
    }
    # each round times both engines one after the other: the median of the rounds' ratios
    # is the paired comparison, robust to the machine slowing down for a while
    result["ratio"] = statistics.median(ratios)
    try:
        macs = multiply_adds(entry["model"], {k: np.shape(v) for k, v in feeds.items()})
    except ValueError:
        macs = None
    if macs:
        result["gmacs"] = macs / 1e9
        result["aircc_gflops"] = 2 * macs / 1e9 / (result["aircc_ms"] / 1e3)
        result["onnxruntime_gflops"] = 2 * macs / 1e9 / (result["onnxruntime_ms"] / 1e3)
    if not key:
        model.close()
    return result


def synthetic_graph(n: int, width: int = 64) -> onnx.ModelProto:
    """n nodes: a chain of 4-node blocks (Relu and Sigmoid of one input, their Add, a Tanh)
    on [1, width] float32 tensors.  At the default width every branch is too small to
    open a stream of its own; at 65536 (256 KiB) the branches take four streams, with
    events between them."""
    from onnx import TensorProto, helper

    nodes, x = [], "x"
    k = 0
    while len(nodes) < n:
        nodes.append(helper.make_node("Relu", [x], [f"a{k}"]))
        nodes.append(helper.make_node("Sigmoid", [x], [f"b{k}"]))
        nodes.append(helper.make_node("Add", [f"a{k}", f"b{k}"], [f"c{k}"]))
        nodes.append(helper.make_node("Tanh", [f"c{k}"], [f"d{k}"]))
        x = f"d{k}"
        k += 1
    g = helper.make_graph(nodes[:n] if len(nodes) == n else nodes, "synthetic",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


#: Synthetic graph sizes whose compile times the full run reports (and fits a slope to).
SCALING_SIZES = [1000, 2500, 5000, 10000, 20000, 40000]


#: Widths of the synthetic graphs' tensors: all on one stream, and branches on streams of
#: their own (four), with events between them.
SCALING_WIDTHS = {"small tensors": 64, "big tensors": 65536}


def compile_scaling(sizes) -> list[dict]:
    """Compile time of each synthetic graph size, in each series of :data:`SCALING_WIDTHS`."""
    out = []
    for series, width in SCALING_WIDTHS.items():
        for n in sizes:
            m = synthetic_graph(n, width)
            t = time.perf_counter()
            compiled = compile_model(m, CompileOptions())
            out.append({"series": series, "nodes": len(m.graph.node),
                        "compile_s": time.perf_counter() - t, "kernels": compiled.report["kernels"],
                        "streams": compiled.report["streams"]})
    return out


def growth_exponents(rows: list[dict]) -> dict[str, float]:
    """Per series, the fitted exponent of compile time against node count."""
    series: dict[str, list] = {}
    for c in rows:
        series.setdefault(c["series"], []).append((c["nodes"], c["compile_s"]))
    return {name: growth_exponent(points) for name, points in series.items()}


def load_time(megabytes: int = 90) -> dict:
    from onnx import TensorProto, helper, numpy_helper

    n = megabytes * (1 << 20) // 4
    side = int(math.sqrt(n))
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((side, side)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, side])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, side])], [w])
    compiled = compile_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                                               ir_version=8))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.om")
        save_om(compiled.om, path)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            m = aircc.load(path)
            times.append(time.perf_counter() - t)
            m.close()
        size = os.path.getsize(path)
    return {"weights_mb": round(w.ByteSize() / (1 << 20), 1), "file_bytes": size,
            "load_s_median": statistics.median(times)}


def markdown(results: dict) -> str:
    lines = [f"Machine: {results['machine']['cpu']}, {results['machine']['cpus']} CPUs, "
             f"Python {results['machine']['python']}, numpy {results['machine']['numpy']} "
             f"(OpenBLAS kernels {results['machine'].get('blas_kernels', 'unknown')}; float32 GEMM "
             f"{results['machine'].get('gemm_gflops', 0):.0f} GFLOP/s at 1024^3), "
             f"onnxruntime {results['machine']['onnxruntime']}; {results['rounds']} rounds, each a "
             f"block of at least {MIN_BLOCK} timed runs of each engine after one untimed (fast models more, "
             f"until {results.get('min_seconds', 0):g} s of timed runs, up to {MAX_BLOCK}), each block "
             f"started with the other engine's threads idle; medians; "
             + (f"device workers and the host thread on CPU {','.join(map(str, results['device_cpus']))}."
                if results.get("device_cpus") else "nothing pinned."), "",
             "| model | mode | aircc ms | onnxruntime ms | ratio | host us/inference "
             "| peak device MB | compile s | GMAC | aircc GFLOP/s | onnxruntime GFLOP/s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results["models"]:
        rates = (f"{r['gmacs']:.3f} | {r['aircc_gflops']:.0f} | {r['onnxruntime_gflops']:.0f}"
                 if r.get("gmacs") else "- | - | -")
        lines.append(f"| {r['model']} | {r['mode']} | {r['aircc_ms']:.2f} | {r['onnxruntime_ms']:.2f} | "
                     f"{r['ratio']:.2f} | {r['host_us_per_inference']:.0f} | "
                     f"{r['peak_device_bytes'] / (1 << 20):.1f} | {r['compile_s']:.2f} | {rates} |")
    if results.get("light_geomean_ratio"):
        lines += ["", f"Geometric mean ratio over the light models: {results['light_geomean_ratio']:.2f}"]
    if results.get("compile_scaling"):
        rows = results["compile_scaling"]
        series = list(dict.fromkeys(c["series"] for c in rows))
        streams: dict[str, int] = {}
        for c in rows:
            streams[c["series"]] = max(streams.get(c["series"], 0), c["streams"])
        lines += ["", "| synthetic nodes | " + " | ".join(
            f"compile s, {name} ({streams[name]} stream{'s' * (streams[name] > 1)})"
            for name in series) + " |",
            "| ---: |" + " ---: |" * len(series)]
        by_nodes: dict[int, dict] = {}
        for c in rows:
            by_nodes.setdefault(c["nodes"], {})[c["series"]] = c["compile_s"]
        for nodes, times in by_nodes.items():
            lines.append(f"| {nodes} | " + " | ".join(
                f"{times[name]:.2f}" if name in times else "-" for name in series) + " |")
        exponents = results.get("compile_growth_exponent") or {}
        if exponents:
            lines += ["", "Compile time grows as " + ", ".join(
                f"nodes^{e:.2f} on {name}" for name, e in exponents.items())
                + " (least-squares slopes on log-log axes; 1 is linear)."]
    if results.get("load"):
        ld = results["load"]
        lines += ["", f"Loading a .om with {ld['weights_mb']} MB of weights: {1e3 * ld['load_s_median']:.0f} ms (median of 5)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-seconds", type=float, default=None,
                    help="time a fast model in bigger blocks until its timed runs take this long "
                         f"(at most {MAX_BLOCK} runs a block; default 2, 0 with --quick)")
    ap.add_argument("--quick", action="store_true", help="5 rounds, small scaling sizes")
    ap.add_argument("--only", default=None, help="comma-separated model names")
    ap.add_argument("--out", default=HERE, help="directory for results.json, results.md and results.svg")
    ap.add_argument("--device-cpus", default="0", metavar="LIST",
                    help="CPUs of the device's stream workers, and of the host thread while it "
                         "times runs (default 0; 'none': not pinned)")
    args = ap.parse_args(argv)
    cpus = None if args.device_cpus.lower() == "none" else args.device_cpus
    device = aircc.VirtualDevice(cpus=cpus) if cpus else None
    rounds = args.rounds or (5 if args.quick else 25)
    entries = suite(args.quick)
    if args.only:
        wanted = set(args.only.split(","))
        entries = [e for e in entries if e["name"] in wanted]
    min_seconds = args.min_seconds if args.min_seconds is not None else (0.0 if args.quick else 2.0)
    results = {"machine": machine(), "rounds": rounds, "min_seconds": min_seconds, "models": [],
               "device_cpus": sorted(device.cpus) if device else None}
    cache: dict = {}
    for entry in entries:
        r = bench_model(entry, rounds, args.warmup, cache, device, min_seconds)
        results["models"].append(r)
        print(f"{r['model']:<24} {r['mode']:<8} aircc {r['aircc_ms']:9.2f} ms  ort {r['onnxruntime_ms']:9.2f} ms  "
              f"ratio {r['ratio']:5.2f}  host {r['host_us_per_inference']:8.0f} us", flush=True)
    light = [r["ratio"] for r in results["models"] if not r["model"].startswith(("sample_", "bert_"))]
    if light:
        results["light_geomean_ratio"] = math.exp(sum(math.log(x) for x in light) / len(light))
    if not args.only:
        results["compile_scaling"] = compile_scaling([500, 2000] if args.quick else SCALING_SIZES)
        results["compile_growth_exponent"] = growth_exponents(results["compile_scaling"])
        results["load"] = load_time()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(markdown(results))
    with open(os.path.join(args.out, "results.svg"), "w") as f:
        f.write(svg(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

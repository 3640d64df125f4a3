"""The benchmark script runs end to end on a small model and writes what the README shows."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from aircc.ops import resolve_target

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_benchmark_quick_run_writes_json_and_table(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick",
                           "--only", "sample_mlp", "--rounds", "3", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    (row,) = results["models"]
    assert row["model"] == "sample_mlp" and row["mode"] == "static" and row["rounds"] == 3
    assert results["targets"][0] == "native"                       # and the numpy backend:
    assert results["targets"][-1] == f"cpu-{resolve_target('native').vector_class}"
    assert set(row["targets"]) == set(results["targets"])
    assert row["block"] == 2 and row["blocks_not_quiet"] == 0 and row["quiet_wait_ms"] >= 0
    assert row["aircc_ms"] > 0 and row["onnxruntime_ms"] > 0 and row["ratio"] > 0
    assert row["host_us_per_inference"] > 0 and row["peak_device_bytes"] > 0
    assert results["machine"]["blas_kernels"]                      # which BLAS kernels ran
    assert results["machine"]["gemm_gflops"] > 0
    assert row["gmacs"] > 0
    assert abs(row["aircc_gflops"] - 2e3 * row["gmacs"] / row["aircc_ms"]) < 1e-6 * row["aircc_gflops"]
    assert abs(row["onnxruntime_gflops"] - 2e3 * row["gmacs"] / row["onnxruntime_ms"]) < 1e-6 * row["onnxruntime_gflops"]
    table = (tmp_path / "results.md").read_text()
    assert "OpenBLAS kernels" in table and "| sample_mlp | static |" in table
    assert "GFLOP/s at 1024^3" in table and "| onnxruntime GFLOP/s |" in table
    figure = ElementTree.parse(tmp_path / "results.svg").getroot()
    assert [t.text for t in figure.iter(SVG + "title")] == [f"sample_mlp: {row['ratio']:.2f}"]



def test_broader_model_against_each_usable_target_with_a_contended_run(tmp_path):
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick",
                           "--suite", "broader", "--broader-size", "small", "--only", "lstm",
                           "--targets", "native,no-such-target", "--contended", "lstm",
                           "--rounds", "3", "--min-seconds", "1",     # the neighbour's CPU time
                           "--out", str(tmp_path)],                    # counts in 10 ms ticks
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    skipped = [line for line in proc.stdout.splitlines() if "no-such-target" in line]
    assert skipped[0].startswith("target no-such-target skipped: CompileOptionError")
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["suites"] == ["broader"] and results["targets"] == ["native"]
    assert "unknown target 'no-such-target'" in results["skipped_targets"]["no-such-target"]
    (row,) = results["models"]
    assert row["model"] == "lstm" and row["suite"] == "broader" and row["errors"] == {}
    native = row["targets"]["native"]
    assert native["compiled_for"] == results["target_info"]["native"].split()[0]
    assert native["mode"] == "static" and native["aircc_ms"] > 0 and native["ratio"] > 0
    assert native["fallback_nodes"] == sum(native["fallback_ops"].values())
    assert set(native["fallback_ops"]) <= {"LSTM", "Gather", "MatMul"}
    assert row["ratio"] == native["ratio"] and row["target"] == "native"      # the first target's
    assert row["gmacs"] > 0 and native["aircc_gflops"] > 0 and row["onnxruntime_gflops"] > 0
    assert results["geomean_ratio"] == {"broader": {"native": pytest.approx(native["ratio"])}}
    (contended,) = results["contended"]
    assert contended["model"] == "lstm"
    assert contended["quiet"]["targets"]["native"]["ratio"] > 0
    assert contended["contended"]["targets"]["native"]["aircc_ms"] > 0
    assert contended["contended"]["onnxruntime_ms"] > 0
    assert "while True: pass" in contended["neighbour"]["what"]
    assert 0.2 < contended["neighbour"]["core_share"] <= 1.2           # it did take a core
    # (its CPU time is counted in scheduler ticks: over a 1-2 s block, a tick or two past 1)
    assert row["others_cpu_cores"] >= 0                                # what other processes took
    assert contended["contended"]["others_cpu_cores"] > 0.2             # the neighbour among them
    table = (tmp_path / "results.md").read_text()
    assert "### The broader suite" in table and "| lstm | static |" in table
    assert "Skipped: no-such-target" in table and "| fallback nodes |" in table
    assert "Geometric mean ratio over the broader suite:" in table
    assert "Contended: a separate Python process" in table and "| lstm | native |" in table


def _timed_target(ms: float, ratio: float, fallback: dict) -> dict:
    return {"aircc_ms": ms, "ratio": ratio, "aircc_gflops": 10.0, "host_us_per_inference": 5.0,
            "peak_device_bytes": 1 << 20, "compile_s": 0.1, "mode": "static",
            "fallback_nodes": sum(fallback.values()), "fallback_ops": fallback}


def test_table_has_a_column_set_per_target_failures_and_the_contended_run():
    report = _bench_module("report")
    a, b = _timed_target(2.0, 2.0, {"LSTM": 2}), _timed_target(1.0, 1.0, {})
    row = {"model": "lstm", "suite": "broader", "onnxruntime_ms": 1.0, "gmacs": 0.01,
           "onnxruntime_gflops": 20.0, "others_cpu_cores": 0.03, "errors": {},
           "targets": {"native": a, "dnnl": b}, **a}
    failed = {"model": "unet", "suite": "broader", "errors": {"dnnl": "KernelError: node 'x' (op Resize) failed"}}
    results = {"machine": {"cpu": "cpu", "cpus": 2, "python": "3", "numpy": "2", "onnxruntime": "1"},
               "rounds": 1, "targets": ["native", "dnnl"],
               "target_info": {"native": "cpu-avx2 (...)", "dnnl": "dnnl-avx2 (...)"},
               "skipped_targets": {"cpu-x": "CompileOptionError: unknown target 'cpu-x'"},
               "models": [row, failed], "geomean_ratio": {"broader": {"native": 2.0, "dnnl": 1.0}},
               "contended": [{"model": "lstm", "quiet": row, "contended": {**row, "onnxruntime_ms": 3.0},
                              "neighbour": {"what": "a spinner", "core_share": 0.9}}]}
    table = report.markdown(results)
    assert "| model | mode | aircc native ms | aircc dnnl ms | onnxruntime ms | ratio native | ratio dnnl |" in table
    assert "| lstm | static | 2.00 | 1.00 | 1.00 | 2.00 | 1.00 |" in table
    assert "| native 2 (LSTM 2); dnnl 0 | 0.03 |" in table
    assert "Geometric mean ratio over the broader suite: native 2.00, dnnl 1.00" in table
    assert "- unet [dnnl]: KernelError: node 'x' (op Resize) failed" in table
    assert "Skipped: cpu-x (CompileOptionError: unknown target 'cpu-x')." in table
    assert "| lstm | native | 2.00 | 2.00 | 1.00 | 3.00 | 2.00 | 2.00 | 0.03 | 0.90 |" in table
    line = report.row_line(row, 200.0)
    assert "native     2.00 ms ratio  2.00 fallback 2" in line and "(GEMM 200)" in line
    assert report.row_line(failed, 200.0) is None


SVG = "{http://www.w3.org/2000/svg}"


def _bench_module(name: str):
    """A module of ``benchmarks/`` (not a package: imported from its folder)."""
    import importlib

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def _plot():
    return _bench_module("plot")


def test_growth_exponent_is_the_log_log_slope():
    plot = _plot()
    assert plot.growth_exponent([(1000, 0.05), (2000, 0.1), (8000, 0.4)]) == pytest.approx(1.0)
    assert plot.growth_exponent([(10, 1.0), (100, 100.0)]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="two sizes"):
        plot.growth_exponent([(10, 1.0)])
    with pytest.raises(ValueError, match="two different sizes"):
        plot.growth_exponent([(10, 1.0), (10, 2.0)])


def test_figure_has_a_bar_per_model_and_a_point_per_graph_size():
    plot = _plot()
    results = {"machine": {"cpu": "cpu", "cpus": 2},
               "models": [{"model": "fast", "ratio": 0.5}, {"model": "slow", "ratio": 2.5}],
               "compile_scaling": [{"series": "a", "nodes": n, "compile_s": n / 1e4} for n in (1000, 4000, 16000)]
               + [{"series": "b", "nodes": n, "compile_s": (n / 1e4) ** 2} for n in (1000, 4000)]}
    root = ElementTree.fromstring(plot.svg(results))
    titles = [t.text for t in root.iter(SVG + "title")]
    assert titles == ["fast: 0.50", "slow: 2.50", "a, 1,000 nodes: 0.10 s", "a, 4,000 nodes: 0.40 s",
                      "a, 16,000 nodes: 1.60 s", "b, 1,000 nodes: 0.01 s", "b, 4,000 nodes: 0.16 s"]
    bars = {r.find(SVG + "title").text.split(":")[0]: r for r in root.iter(SVG + "rect")
            if r.find(SVG + "title") is not None}
    # log axis: 0.5 and 2.5 lie 1 / 0.5 = 2 and 2.5 times away from parity
    width = {k: float(r.get("width")) for k, r in bars.items()}
    assert width["slow"] / width["fast"] == pytest.approx(math.log(2.5) / math.log(2), rel=1e-2)
    assert bars["fast"].get("fill") != bars["slow"].get("fill")      # faster and slower differ
    text = " ".join(t.text or "" for t in root.iter(SVG + "text"))
    assert "a: t ~ n^1.00" in text and "b: t ~ n^2.00" in text
    with pytest.raises(ValueError, match="no models"):
        plot.svg({"models": []})


def test_compile_scaling_series_are_compiled_on_their_streams_and_tabled():
    run = _bench_module("run")
    rows = run.compile_scaling([200, 400])
    assert [(c["series"], c["nodes"]) for c in rows] == [
        (name, n) for name in run.SCALING_WIDTHS for n in (200, 400)]
    streams = {c["series"]: c["streams"] for c in rows}
    assert streams == {"small tensors": 1, "big tensors": 4}
    assert all(c["compile_s"] > 0 for c in rows)
    exponents = run.growth_exponents(rows)
    assert set(exponents) == set(run.SCALING_WIDTHS)
    results = {"machine": {"cpu": "cpu", "cpus": 2, "python": "3", "numpy": "2", "onnxruntime": "1"},
               "rounds": 1, "models": [], "compile_scaling": rows, "compile_growth_exponent": exponents}
    table = run.markdown(results)
    assert "| synthetic nodes | compile s, small tensors (1 stream) | compile s, big tensors (4 streams) |" in table
    assert f"| 400 | {rows[1]['compile_s']:.2f} | {rows[3]['compile_s']:.2f} |" in table
    assert f"nodes^{exponents['big tensors']:.2f} on big tensors" in table


def _work():
    return _bench_module("work")


def _counted_model():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in
            (("w", (8, 2, 3, 3)), ("wt", (8, 4, 2, 2)), ("m", (64, 16)), ("g", (8, 32)))]
    init.append(numpy_helper.from_array(np.array([-1, 64], np.int64), "shape"))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], group=2),  # 4 -> 8 channels
        helper.make_node("ConvTranspose", ["c", "wt"], ["t"], strides=[2, 2]),    # 8 -> 4, 8 x 8
        helper.make_node("Reshape", ["t", "shape"], ["r"]),                       # (n * 4, 64)
        helper.make_node("MatMul", ["r", "m"], ["mm"]),                           # (n * 4, 16)
        helper.make_node("Gemm", ["g", "mm"], ["y"], transA=1),                   # (32, 16)
    ]
    graph = helper.make_graph(
        nodes, "work", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_multiply_adds_counts_conv_matmul_gemm_from_the_feeds_shapes():
    work, model = _work(), _counted_model()
    n = 2                                   # the Gemm's inner dimension is n * 4 = 8
    conv = (n * 8 * 4 * 4) * (2 * 3 * 3)    # per output: its group's 2 channels x 3 x 3
    convt = (n * 8 * 4 * 4) * (4 * 2 * 2)   # per input: 4 outputs x 2 x 2
    matmul = (n * 4) * 64 * 16
    gemm = 32 * (n * 4) * 16
    assert work.multiply_adds(model, {"x": (n, 4, 4, 4)}) == conv + convt + matmul + gemm


def test_multiply_adds_counts_recurrent_gates_depthwise_convs_and_attention_products():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in
            (("lw", (1, 16, 3)), ("lr", (1, 16, 4)), ("gw", (2, 12, 4)), ("gr", (2, 12, 4)),
             ("dw", (6, 1, 3, 3)))]
    nodes = [
        helper.make_node("LSTM", ["x", "lw", "lr"], ["", "h"], hidden_size=4),        # Y omitted
        helper.make_node("GRU", ["h", "gw", "gr"], ["g"], hidden_size=4, direction="bidirectional"),
        helper.make_node("Conv", ["img", "dw"], ["d"], group=6, pads=[1, 1, 1, 1]),    # depthwise
        helper.make_node("MatMul", ["q", "k"], ["s"]),                                  # scores
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "work", [helper.make_tensor_value_info("x", f, [5, 2, 3]),
                        helper.make_tensor_value_info("img", f, [1, 6, 8, 8]),
                        helper.make_tensor_value_info("q", f, [2, 4, 7, 16]),
                        helper.make_tensor_value_info("k", f, [2, 4, 16, 7])],
        [helper.make_tensor_value_info(n, f, None) for n in ("g", "d", "s")], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    lstm = 5 * 2 * 16 * (3 + 4)           # every step: 4 gates x 4 hidden over input + hidden
    gru = 1 * 2 * 2 * 12 * (4 + 4)        # the LSTM's last state (1 step, batch 2), both ways
    depthwise = 6 * 8 * 8 * 9
    scores = 2 * 4 * 7 * 7 * 16
    shapes = {"x": (5, 2, 3), "img": (1, 6, 8, 8), "q": (2, 4, 7, 16), "k": (2, 4, 16, 7)}
    assert _work().multiply_adds(model, shapes) == lstm + gru + depthwise + scores


def test_multiply_adds_refuses_a_count_with_unknown_shapes():
    import pytest

    with pytest.raises(ValueError, match="unknown after shape inference"):
        _work().multiply_adds(_counted_model(), {})      # the batch left symbolic


def test_gemm_rate_is_measured():
    assert _work().gemm_gflops(n=128, repeats=3) > 0


def test_blocks_grow_for_fast_models_to_the_minimum_time():
    run = _bench_module("run")
    assert run.block_size(0.06, 25, 2.0) == 2                  # ResNet-sized: the minimum
    assert run.block_size(0.004, 25, 2.0) == 20                # 25 x 20 x 4 ms = 2 s
    assert run.block_size(1e-5, 25, 2.0) == run.MAX_BLOCK      # capped
    assert run.block_size(1e-5, 25, 0.0) == 2                  # --quick: no minimum


def test_a_block_waits_for_quiet_runs_once_untimed_then_times_its_runs():
    run = _bench_module("run")
    calls, after = [], []
    times, waited, quiet = run._block(lambda: calls.append(1), 3, lambda: after.append(len(calls)))
    assert len(times) == 3 and all(t >= 0 for t in times)
    assert len(calls) == 4                      # one untimed run first
    assert after == [2, 3, 4]                   # called after each timed run
    assert quiet and waited >= 0


def test_busy_threads_sees_a_running_thread_and_the_wait_outlasts_it():
    import threading
    import time

    import numpy as np

    quiet = _bench_module("quiet")
    a = np.ones((768, 768), np.float32)
    stop, ids = threading.Event(), []

    def work():                                 # GEMMs release the GIL: the thread runs
        ids.append(threading.get_native_id())
        while not stop.is_set():
            a @ a

    worker = threading.Thread(target=work)
    worker.start()
    try:
        deadline, seen = time.perf_counter() + 5, False
        while not seen and time.perf_counter() < deadline:
            seen = bool(ids) and ids[0] in quiet.busy_threads()
        assert seen
        waited, got_quiet = quiet.wait_until_quiet(limit_s=0.01)
        assert not got_quiet and waited >= 0.01
    finally:
        stop.set()
        worker.join()
    waited, got_quiet = quiet.wait_until_quiet(limit_s=5)    # BLAS workers included
    assert got_quiet
    assert threading.get_native_id() not in quiet.busy_threads()     # never the caller


def _tiny_entry():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from aircc.compiler.driver import CompileOptions

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                              "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return {"name": "tiny", "model": model, "options": CompileOptions(), "feeds": None}


def test_serving_table_has_each_engine_at_each_number_in_flight(capsys):
    serving = _bench_module("serving")
    machine = {"cpu": "cpu", "cpus": 2, "onnxruntime": "1"}
    results = serving.serve([_tiny_entry()], "native", rounds=1, seconds=0.05, machine=machine)
    (row,) = results["models"]
    assert row["errors"] == {} and row["aircc_mode"] == "contexts"
    engines = {"aircc", "onnxruntime"} | ({"openvino_f32", "openvino_default"} if results["openvino"] else set())
    assert [r["n"] for r in row["in_flight"]] == [1, 2, 4]
    for r in row["in_flight"]:
        assert set(r["engines"]) == engines
        for e in r["engines"].values():
            assert e["per_second"] > 0 and 0 < e["p50_ms"] <= e["p90_ms"] <= e["p99_ms"]
        assert r["ratio"] > 0 and r["best_peer"] in ("onnxruntime", "openvino_f32")
    assert row["in_flight"][0]["aircc_scaling"] == 1.0
    out = capsys.readouterr().out
    assert out.startswith("Machine: cpu, 2 CPUs (avx512f ")
    assert ("OpenVINO skipped" in out) == (results["openvino"] is None)
    table = _bench_module("report").markdown({"machine": machine, "models": [], "serving": results})
    assert "| model | N | aircc mode | aircc inf/s | onnxruntime inf/s |" in table
    assert f"| tiny | 4 | {row['aircc_mode']} |" in table


def test_serving_skips_openvino_where_it_is_missing_and_loads_aircc_for_throughput(
        monkeypatch, capsys):
    import aircc

    serving = _bench_module("serving")
    load, asked = aircc.load, []

    def recording(om, **options):
        asked.append(options["hint"])
        return load(om, **options)

    monkeypatch.setattr(serving, "openvino_version", lambda: None)
    monkeypatch.setattr(aircc, "load", recording)
    results = serving.serve([_tiny_entry()], "native", rounds=1, seconds=0.02, in_flight=(1, 2))
    assert "OpenVINO skipped: not installed (pip install openvino)" in capsys.readouterr().out
    assert results["skipped"] == {"openvino": "not installed (pip install openvino)"}
    (row,) = results["models"]
    assert row["aircc_mode"] == "contexts" and asked == ["latency", "throughput"]
    assert set(row["in_flight"][1]["engines"]) == {"aircc", "onnxruntime"}


def test_serving_windows_keep_n_requests_in_flight():
    import concurrent.futures as cf
    import threading
    import time

    serving = _bench_module("serving")
    lock, now, most = threading.Lock(), [0], [0]

    def request():
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.002)
        with lock:
            now[0] -= 1

    w = serving.threads_window(request, 3, 0.05)
    assert most[0] == 3 and w.completed == len(w.latencies) >= 3 and w.per_second > 0
    most[0] = 0
    with cf.ThreadPoolExecutor(8) as pool:
        w = serving.futures_window(lambda: pool.submit(request), 2, 0.05)
    assert most[0] == 2 and w.completed >= 2 and w.seconds >= 0.05


def test_a_serving_only_run_updates_its_models_rows_and_keeps_the_rest():
    run = _bench_module("run")
    old = {"models": [{"name": "resnet50"}], "serving": {"rounds": 5, "models": [
        {"model": "squeezenet", "n": 1}, {"model": "resnet50", "n": 1}]}}
    new = {"rounds": 3, "models": [{"model": "resnet50", "n": 2}, {"model": "bert", "n": 2}]}
    kept = run.kept_with_serving(old, new)
    assert kept["models"] == old["models"] and kept["serving"]["rounds"] == 3
    assert kept["serving"]["models"] == [{"model": "squeezenet", "n": 1},
                                         {"model": "resnet50", "n": 2}, {"model": "bert", "n": 2}]


def test_a_target_with_a_precision_mode_is_timed_beside_float32_with_its_agreement():
    run, report = _bench_module("run"), _bench_module("report")
    targets = _bench_module("targets")
    assert targets.options_of("native@force_bf16") == {"target": "native",
                                                         "precision_mode": "force_bf16"}
    assert targets.options_of("native") == {"target": "native"}
    usable, skipped = targets.usable_targets(["native", "native@allow_mix_precision_bf16"])
    assert "native" in usable
    names = list(usable)
    row = run.bench_model(_tiny_entry(), names, rounds=1, warmup=0, cache={})
    assert row["errors"] == {}
    if "native@allow_mix_precision_bf16" in usable:        # a CPU with AVX512-BF16 or AMX
        t = row["targets"]["native@allow_mix_precision_bf16"]
        assert 0.999 < t["cosine_to_float32"] <= 1.0 + 1e-9
        table = "\n".join(report._table([row], names))
        assert "cosine to f32 native@allow_mix_precision_bf16" in table
    else:
        assert "AVX512-BF16" in skipped["native@allow_mix_precision_bf16"]
    assert "cosine_to_float32" not in row["targets"]["native"]

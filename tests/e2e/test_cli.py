"""The command lines: aircc compile / inspect / ops, and airrun."""
from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

import aircc
from aircc.cli.airrun_cmd import main as airrun
from aircc.cli.aircc_cmd import main as aircc_cli
from testdata import numpy_target, SAMPLES


def _compile(tmp_path, *extra):
    out = tmp_path / "mlp.om"
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(out),
                                       "--input-shape", "input:4,784", *extra])
    assert r.exit_code == 0, r.output
    return out, r.output


def test_compile_run_and_save_outputs(tmp_path):
    om, text = _compile(tmp_path)
    assert "compiled" in text and "arena" in text
    npz = tmp_path / "y.npz"
    r = CliRunner().invoke(airrun, [str(om), "--input", f"{SAMPLES}/mlp_input.npy", "--output", str(npz)])
    assert r.exit_code == 0, r.output
    assert "probs: float32[4, 10]" in r.output
    y = np.load(npz)["probs"]
    np.testing.assert_allclose(y.sum(axis=1), 1, rtol=1e-5)
    # named input form and .npz input form give the same result
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, input=np.load(f"{SAMPLES}/mlp_input.npy"))
    for spec in (f"input={SAMPLES}/mlp_input.npy", str(feeds)):
        npz2 = tmp_path / "y2.npz"
        r = CliRunner().invoke(airrun, [str(om), "--input", spec, "--output", str(npz2), "--quiet"])
        assert r.exit_code == 0, r.output
        np.testing.assert_array_equal(np.load(npz2)["probs"], y)


def test_inspect_json_has_the_plan(tmp_path):
    om, _ = _compile(tmp_path)
    r = CliRunner().invoke(aircc_cli, ["inspect", str(om), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    for key in ("mode", "streams", "events", "tasks_per_stream", "arena_bytes",
                "lower_bound_bytes", "no_reuse_bytes", "memory_plan"):
        assert key in info
    assert info["mode"] == "static"
    assert len(info["tasks_per_stream"]) == info["streams"]
    assert {"name", "offset", "size", "first_task", "last_task"} <= set(info["memory_plan"][0])
    assert info["in_place"] == []          # the MLP sample has no Concat
    text = CliRunner().invoke(aircc_cli, ["inspect", str(om)]).output
    assert "streams" in text and "arena" in text


def test_emit_ir_and_report_and_single_stream(tmp_path):
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/branches.onnx", "--emit", "ir"])
    assert r.exit_code == 0 and r.output.startswith("graph @main(")
    assert "Conv(" in r.output
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/branches.onnx", "--emit", "report"])
    assert json.loads(r.output)["streams"] == 1          # its branches are too small to split
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/branches.onnx", "--emit", "report",
                                       "--min-branch-bytes", "0", "--target", numpy_target()])
    report = json.loads(r.output)
    assert report["streams"] == 2 and report["events"] > 0   # the MaxPool branch; Convs stay
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/branches.onnx", "--emit", "report",
                                       "--min-branch-bytes", "0", "--split-matrix-branches"])
    assert json.loads(r.output)["streams"] == 3
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/branches.onnx", "--emit", "report",
                                       "--streams", "1"])
    report = json.loads(r.output)
    assert report["streams"] == 1 and report["events"] == 0


def test_errors_are_reported_cleanly(tmp_path):
    bad = tmp_path / "bad.om"
    bad.write_bytes(b"garbage" * 20)
    r = CliRunner().invoke(aircc_cli, ["inspect", str(bad)])
    assert r.exit_code == 3 and "bad magic" in r.output          # a bad model
    r = CliRunner().invoke(airrun, [str(bad), "--random", "0"])
    assert r.exit_code == 3 and r.stderr.startswith("error: [145100]")
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(tmp_path / "x.om"),
                                       "--mode", "static"])
    assert r.exit_code == 2 and "--input-shape" in r.output
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "--input-shape", "nonsense"])
    assert r.exit_code != 0 and "NAME:D1,D2" in r.output


def test_ops_lists_supported_ops():
    r = CliRunner().invoke(aircc_cli, ["ops"])
    assert r.exit_code == 0
    assert any(line.split()[1] == "Conv" and "native" in line for line in r.output.splitlines())
    r = CliRunner().invoke(aircc_cli, ["ops", "--domain", "com.microsoft"])
    rows = [line.split() for line in r.output.splitlines()]
    assert r.exit_code == 0 and {row[0] for row in rows} == {"com.microsoft"}
    assert {"Attention", "SkipLayerNormalization", "QLinearAdd", "MatMulNBits"} <= {row[1] for row in rows}
    assert len({line.index("opset") for line in r.output.splitlines()}) == 1     # one column
    r = CliRunner().invoke(aircc_cli, ["ops", "--domain", "org.pytorch.aten"])
    assert r.exit_code == 2 and "aircc runs no op of that domain" in r.output


def test_dynamic_mode_stats_and_gears_from_the_command_line(tmp_path):
    om = tmp_path / "mlp_dyn.om"
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(om)])
    assert r.exit_code == 0 and "dynamic mode" in r.output and "host kernels" in r.output
    for cores in ("1", "3"):
        r = CliRunner().invoke(airrun, [str(om), "--input", f"{SAMPLES}/mlp_input.npy", "--stats",
                                        "--quiet", "--repeat", "4", "--runtime-cores", cores,
                                        "--no-replay"])
        assert r.exit_code == 0, r.output
        assert f"runtime cores        {cores}" in r.output
        assert "tiling cache" in r.output and "hit rate" in r.output
        assert "allocator peaks" in r.output and "MatMul" in r.output
        assert "replayed runs        0:" in r.output
        assert "runs through the host kernels  4:" in r.output
    r = CliRunner().invoke(airrun, [str(om), "--input", f"{SAMPLES}/mlp_input.npy", "--stats",
                                    "--quiet", "--repeat", "4"])
    assert r.exit_code == 0 and "replayed runs        3: one submission each" in r.output
    assert "(1 input shapes recorded)" in r.output and "runs through the host kernels  1:" in r.output
    launches = int(r.output.split("runs through the host kernels  1: ")[1].split(" launches")[0])
    assert f"host submissions {launches + 3}" in r.output       # the first run's launches, then one per replay
    gears = tmp_path / "mlp_gears.om"
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(gears),
                                       "--dynamic-batch", "1,2,4,8"])
    assert r.exit_code == 0 and "gears [1, 2, 4, 8]" in r.output
    x3 = tmp_path / "x3.npy"
    np.save(x3, np.load(f"{SAMPLES}/mlp_input.npy")[:3])
    r = CliRunner().invoke(airrun, [str(gears), "--input", str(x3), "--quiet"])
    assert r.exit_code == 4 and "no gear" in r.output            # a bad input
    r = CliRunner().invoke(airrun, [str(gears), "--input", str(x3), "--quiet", "--pad-to-gear", "--stats"])
    assert r.exit_code == 0 and "probs: float32[3, 10]" in r.output and "gears" in r.output
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(gears),
                                       "--dynamic-batch", "1,x"])
    assert r.exit_code != 0 and "batch sizes" in r.output


def test_airrun_benchmark_reports_latency_statistics(tmp_path):
    om, _ = _compile(tmp_path)
    r = CliRunner().invoke(airrun, [str(om), "--input", f"{SAMPLES}/mlp_input.npy", "--quiet",
                                    "--benchmark", "7"])
    assert r.exit_code == 0, r.output
    line = next(l for l in r.output.splitlines() if l.startswith("benchmark:"))
    assert "7 runs" in line and "median" in line and "p90" in line and "inferences/s" in line
    median = float(line.split("median ")[1].split(" ms")[0])
    assert median > 0


def test_airrun_device_cpus(tmp_path):
    import os

    om, _ = _compile(tmp_path)
    before = os.sched_getaffinity(0)
    first = min(before)
    r = CliRunner().invoke(airrun, [str(om), "--input", f"{SAMPLES}/mlp_input.npy", "--quiet",
                                    "--device-cpus", str(first), "--benchmark", "3"])
    assert r.exit_code == 0, r.output
    assert "probs: float32[4, 10]" in r.output and "3 runs" in r.output
    assert os.sched_getaffinity(0) == before          # the host thread is put back
    r = CliRunner().invoke(airrun, [str(om), "--input", f"{SAMPLES}/mlp_input.npy",
                                    "--device-cpus", str(max(before) + 1)])
    assert r.exit_code == 2 and "not all available" in r.output


def test_layout_option_plans_channels_last_and_inspect_shows_it(tmp_path):
    from testdata import light_path

    om = tmp_path / "squeeze.om"
    r = CliRunner().invoke(aircc_cli, ["compile", light_path("squeezenet"), "-o", str(om),
                                       "--target", "cpu-avx2", "--layout", "nhwc"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(aircc_cli, ["inspect", str(om)])
    line = next(x for x in r.output.splitlines() if x.startswith("layouts"))
    assert "30 kernels channels-last; reorders 1 (data_0.nhwc/layout), views 1" in line
    r = CliRunner().invoke(aircc_cli, ["inspect", str(om), "--json"])
    assert json.loads(r.output)["compile_report"]["layout_reorders"] == 1
    r = CliRunner().invoke(aircc_cli, ["compile", light_path("squeezenet"), "-o", str(om),
                                       "--target", "cpu-avx2", "--layout", "nchw"])
    r = CliRunner().invoke(aircc_cli, ["inspect", str(om), "--json"])
    assert json.loads(r.output)["layouts"]["channels_last_kernels"] == 0


def test_compile_reports_the_nodes_on_fallback_kernels(tmp_path):
    import onnx
    from onnx import helper
    from graphs import model, tensor

    m = model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
               helper.make_node("Det", ["r"], ["y"], name="det")],
              [tensor("x", [2, 3, 3])], [tensor("y", [2])])
    src = tmp_path / "det.onnx"
    onnx.save(m, str(src))
    r = CliRunner().invoke(aircc_cli, ["compile", str(src), "-o", str(tmp_path / "det.om")])
    assert r.exit_code == 0, r.output
    assert "fallback kernels (onnx reference implementation): 1 node(s), ops Det: det" in r.output
    r = CliRunner().invoke(aircc_cli, ["compile", str(src), "--emit", "report"])
    assert json.loads(r.output)["fallback_nodes"] == [{"node": "det", "op": "Det"}]


def test_airrun_habits_version_shapes_warmup_percentiles_json_and_log(tmp_path):
    om = tmp_path / "mlp_dyn.om"
    assert CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(om)]).exit_code == 0
    r = CliRunner().invoke(airrun, ["--version"])
    assert r.exit_code == 0 and "version" in r.output and aircc.__version__ in r.output
    r = CliRunner().invoke(airrun, [str(om), "--random", "1", "--quiet"])
    assert r.exit_code == 2 and "give --input-shape input:N,784" in r.output
    bench = tmp_path / "bench.json"
    r = CliRunner().invoke(airrun, [str(om), "--random", "1", "--input_shape", "input:5,784",
                                    "--quiet", "--iterations", "9", "--warmup", "1",
                                    "--benchmark-json", str(bench), "--log", "info"])
    assert r.exit_code == 0, r.output
    assert "probs: float32[5, 10]" in r.output and "9 runs after 1 warm-up" in r.output
    assert "aircc INFO [aircc.load] model 'mlp' (dynamic) loaded on device" in r.output
    figures = json.loads(bench.read_text())
    assert figures["runs"] == 9 and figures["model"] == "mlp"
    assert figures["min_ms"] <= figures["p50_ms"] <= figures["p90_ms"] <= figures["p95_ms"] \
        <= figures["p99_ms"] <= figures["max_ms"]
    r = CliRunner().invoke(airrun, [str(om), "--random", "1", "--input-shape", "input:5,783"])
    assert r.exit_code == 2 and "does not fit the input's shape ['batch', 784]" in r.output
    r = CliRunner().invoke(airrun, [str(om), "--random", "1", "--benchmark-json", str(bench)])
    assert r.exit_code == 2 and "--benchmark-json needs --benchmark N" in r.output


def test_aircc_compile_takes_atc_spellings_and_dumps_json_with_mode_1(tmp_path):
    om = tmp_path / "g.om"
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(om),
                                       "--dynamic_batch_size=1,2,4", "--log=info", "--quiet"])
    assert r.exit_code == 0 and "gears [1, 2, 4]" in r.output, r.output
    assert "aircc INFO [aircc.compile] passes:" in r.output         # the log, on stderr
    dump = tmp_path / "m.json"
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "--mode=1",
                                       "--input_shape=input:2,784", "--json", str(dump)])
    assert r.exit_code == 0, r.output
    s = json.loads(dump.read_text())
    assert s["mode"] == "static" and s["inputs"][0]["shape"] == [2, 784] and s["name"] == "mlp"
    r = CliRunner().invoke(aircc_cli, ["compile", str(om), "--mode", "1"])   # an .om: its summary
    assert r.exit_code == 0 and json.loads(r.output)["gears"]
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "-o", str(om),
                                       "--json", str(dump)])
    assert r.exit_code == 2 and "--json goes with --mode 1" in r.output

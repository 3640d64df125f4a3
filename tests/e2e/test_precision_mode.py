"""--precision_mode: a float16 model compiled force_fp32 runs on the float32 kernels,
takes and gives float16 as it declares, matches onnxruntime, and says so in the .om, the
compile report and ``inspect``; the command line, the Python API and the session take it."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnxruntime.transformers.float16 import convert_float_to_float16

import aircc
from aircc.cli.aircc_cmd import main as aircc_cli
from aircc.errors import CompileOptionError
from aircc.formats import dump_om, load_om
from testdata import SAMPLES

X = np.random.default_rng(0).standard_normal((4, 784)).astype(np.float16)


@pytest.fixture(scope="module")
def half(tmp_path_factory) -> str:
    """The sample MLP in float16 throughout, inputs and outputs too."""
    path = str(tmp_path_factory.mktemp("half") / "mlp16.onnx")
    onnx.save(convert_float_to_float16(onnx.load(f"{SAMPLES}/mlp.onnx"), keep_io_types=False), path)
    return path


@pytest.fixture(scope="module")
def reference(half) -> np.ndarray:
    return ort.InferenceSession(half, providers=["CPUExecutionProvider"]).run(None, {"input": X})[0]


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_force_fp32_runs_a_float16_model_in_float32_with_its_float16_io(half, reference, mode):
    shapes = {"input": [4, 784]} if mode == "static" else {}
    c = aircc.compile(half, mode=mode, input_shapes=shapes, precision_mode="force_fp32")
    assert c.report.precision_mode == "force_fp32"
    assert c.report.stats["precision_casts"] == 2          # the input in, the output out
    assert set(c.report.ops_per_precision) == {"float16", "float32"}
    assert c.report.ops_per_precision["float16"] == 1      # the output's cast
    assert load_om(dump_om(c.om)).parsed().model.precision_mode == "force_fp32"
    m = aircc.load(c.om)
    assert [(i.dtype, o.dtype) for i, o in zip(m.inputs, m.outputs)] == [("float16", "float16")]
    y = m.run({"input": X})["probs"]
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), reference.astype(np.float32), atol=1e-3)
    kept = aircc.compile(half, mode=mode, input_shapes=shapes)
    assert kept.report.precision_mode == "must_keep_origin_dtype"
    assert set(kept.report.ops_per_precision) == {"float16"}


def test_the_command_line_and_the_session_take_the_mode(half, reference, tmp_path):
    om = tmp_path / "m.om"
    r = CliRunner().invoke(aircc_cli, ["compile", half, "-o", str(om), "--precision_mode",
                                       "force_fp32", "--input-shape", "input:4,784", "--quiet"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(aircc_cli, ["inspect", str(om), "--json"])
    assert json.loads(r.output)["precision_mode"] == "force_fp32"
    r = CliRunner().invoke(aircc_cli, ["compile", half, "-o", str(om), "--precision_mode",
                                       "force_fp16"])
    assert r.exit_code != 0 and "force_fp16" in r.output
    sess = aircc.InferenceSession(half, providers=[("AirccVirtualDeviceProvider",
                                                    {"precision_mode": "force_fp32"})])
    assert sess.model.run_stats().runs == 0
    np.testing.assert_allclose(sess.run(None, {"input": X})[0].astype(np.float32),
                               reference.astype(np.float32), atol=1e-3)
    with pytest.raises(CompileOptionError, match="not available in this version"):
        aircc.InferenceSession(half, providers=[("AirccVirtualDeviceProvider",
                                                 {"precision_mode": "force_fp16"})])


def small_cnn() -> onnx.ModelProto:
    """Two convolutions with a residual, pooled, then a classifier."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)

    def const(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])],
        [const("w1", (16, 3, 3, 3), 0.3), const("b1", (16,), 0.1), const("w2", (16, 16, 3, 3), 0.1),
         const("b2", (16,), 0.1), const("wf", (10, 16), 0.5), const("bf", (10,), 0.1)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_allow_mix_precision_bf16_runs_the_convolutions_in_bfloat16_close_to_float32(
        monkeypatch, mode):
    from aircc.errors import TargetUnavailableError
    from aircc.ops import machine

    model = small_cnn()
    x = np.random.default_rng(2).standard_normal((2, 3, 16, 16)).astype(np.float32)
    c = aircc.compile(model, mode=mode, precision_mode="allow_mix_precision_bf16")
    assert c.report.stats["bf16_ops"] == 3              # the convolutions and the classifier
    assert c.report.stats["bf16_values"] == 1   # r1: the second conv reads it twice (x, residual)
    assert c.report.ops_per_precision["bfloat16"] == 3
    assert load_om(dump_om(c.om)).parsed().model.precision_mode == "allow_mix_precision_bf16"
    want = aircc.load(aircc.compile(model, mode=mode).om).run({"x": x})["y"]
    if machine.host_cpu_flags() & {"avx512_bf16", "amx_bf16"}:
        loaded = aircc.load(c.om)
        got = [loaded.run({"x": x})["y"] for _ in range(2)][-1]     # dynamic: a replay
        cos = float(np.dot(got.ravel(), want.ravel()) / np.linalg.norm(got) / np.linalg.norm(want))
        assert cos > 0.999 and not np.array_equal(got, want)     # close, and really bfloat16
        assert (got.argmax(1) == want.argmax(1)).all()
    machine.host_vector_classes()         # read (and cached) from the real flags first
    monkeypatch.setattr(machine, "host_cpu_flags", lambda: frozenset({"avx512f", "avx2"}))
    with pytest.raises(TargetUnavailableError, match="need AVX512-BF16 or AMX-BF16, which this "
                                                     "machine's CPU lacks"):
        aircc.load(c.om)


def test_modify_mixlist_from_the_command_line(tmp_path):
    mixlist = tmp_path / "mixlist.json"
    mixlist.write_text(json.dumps({"black-list": {"to-add": ["Conv", "Gemm"]}}))
    onnx.save(small_cnn(), tmp_path / "cnn.onnx")
    r = CliRunner().invoke(aircc_cli, ["compile", str(tmp_path / "cnn.onnx"), "--emit", "report",
                                       "--precision_mode", "allow_mix_precision_bf16",
                                       "--modify_mixlist", str(mixlist)])
    assert r.exit_code == 0, r.output
    assert '"bf16_ops": 0' in r.output
    mixlist.write_text("{not json")
    r = CliRunner().invoke(aircc_cli, ["compile", str(tmp_path / "cnn.onnx"), "--emit", "report",
                                       "--modify_mixlist", str(mixlist)])
    assert r.exit_code != 0 and "is not JSON" in r.output


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_bfloat16_kernels_keep_nan_and_infinities_where_float32_does(mode):
    """NaN and +-inf in the input (through a bfloat16 chain, a fused Relu and a residual):
    every output that float32 makes NaN or infinite is NaN or infinite in bfloat16 too,
    and the finite ones stay close."""
    from aircc.ops import machine

    if not machine.host_cpu_flags() & {"avx512_bf16", "amx_bf16"}:
        with pytest.raises(aircc.TargetUnavailableError):
            aircc.load(aircc.compile(small_cnn(), precision_mode="force_bf16").om)
        return
    x = np.random.default_rng(3).standard_normal((2, 3, 16, 16)).astype(np.float32)
    x[0, 0, 3, 3], x[0, 1, 8, 8], x[1, 2, 0, 0] = np.nan, np.inf, -np.inf
    want = aircc.load(aircc.compile(small_cnn(), mode=mode).om).run({"x": x})["y"]
    got = aircc.load(aircc.compile(small_cnn(), mode=mode, precision_mode="force_bf16").om
                     ).run({"x": x})["y"]
    assert np.isnan(want).any()                                   # the case is exercised
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=0.05, atol=0.05)

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
                                       "force_bf16"])
    assert r.exit_code != 0 and "force_bf16" in r.output
    sess = aircc.InferenceSession(half, providers=[("AirccVirtualDeviceProvider",
                                                    {"precision_mode": "force_fp32"})])
    assert sess.model.run_stats().runs == 0
    np.testing.assert_allclose(sess.run(None, {"input": X})[0].astype(np.float32),
                               reference.astype(np.float32), atol=1e-3)
    with pytest.raises(CompileOptionError, match="not available in this version"):
        aircc.InferenceSession(half, providers=[("AirccVirtualDeviceProvider",
                                                 {"precision_mode": "allow_mix_precision_bf16"})])

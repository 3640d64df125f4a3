"""ONNX's narrow element types (bfloat16, float8, float4, int4, int2) as ml_dtypes' numpy
dtypes: Cast to and from each in both modes against onnx's reference evaluator, weights of
each stored in the .om and read back bit-exactly, a bfloat16 model through the Python API,
and airrun's file form of such inputs (np.save's raw bytes)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import aircc
from aircc.cli.airrun_cmd import main as airrun
from aircc.errors import InputError
from aircc.formats import load_om
from aircc.formats.checks import DTYPES, ML_DTYPES
from testdata import numpy_target

#: ONNX type -> ml_dtypes name (the stored dtype name)
TYPES = {T.BFLOAT16: "bfloat16", T.FLOAT8E4M3FN: "float8_e4m3fn",
         T.FLOAT8E4M3FNUZ: "float8_e4m3fnuz", T.FLOAT8E5M2: "float8_e5m2",
         T.FLOAT8E5M2FNUZ: "float8_e5m2fnuz", T.FLOAT8E8M0: "float8_e8m0fnu",
         T.FLOAT4E2M1: "float4_e2m1fn", T.INT4: "int4", T.UINT4: "uint4",
         T.INT2: "int2", T.UINT2: "uint2"}
MODES = ("static", "dynamic")
FLOAT8 = {T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ}
#: halves (round to nearest even), out of every range, negatives, NaN, +-inf
SOURCE = np.array([0.0, 0.5, 1.5, 2.5, -3.25, 7.0, 1e3, -6e4, 1e9, 3.0e-3,
                   np.nan, np.inf, -np.inf], np.float32)


def _model(nodes, inputs, outputs, inits=(), opset=25):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feeds, mode, tmp_path, name="m"):
    path = tmp_path / f"{name}_{mode}.om"
    aircc.compile(model, path, mode=mode, target=numpy_target())
    m = aircc.load(path)
    try:
        return m.run(feeds), load_om(path)
    finally:
        m.close()


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8 if a.dtype.itemsize == 1 else np.uint16)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.name in ML_DTYPES:
        np.testing.assert_array_equal(_bits(got), _bits(want))
    else:
        np.testing.assert_array_equal(got, want)


def test_the_format_stores_every_type():
    assert set(TYPES.values()) <= DTYPES
    for name in TYPES.values():
        assert ML_DTYPES[name] == np.dtype(getattr(ml_dtypes, name))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("to", list(TYPES), ids=list(TYPES.values()))
def test_cast_to_and_from_each_type_matches_onnx_reference(to, mode, tmp_path):
    """float32 -> T (with saturate 1 and 0 for float8), T -> float32, float16 -> T."""
    cases = [({}, T.FLOAT)]
    if to in FLOAT8:
        cases.append(({"saturate": 0}, T.FLOAT))
    cases.append(({}, T.FLOAT16))
    for k, (attrs, src) in enumerate(cases):
        with np.errstate(over="ignore"):         # 1e9 is inf in float16
            x = SOURCE.astype(helper.tensor_dtype_to_np_dtype(src))
        model = _model([helper.make_node("Cast", ["x"], ["y"], to=to, **attrs),
                        helper.make_node("Cast", ["y"], ["z"], to=T.FLOAT)],
                       [helper.make_tensor_value_info("x", src, [len(x)])],
                       [helper.make_tensor_value_info("y", to, [len(x)]),
                        helper.make_tensor_value_info("z", T.FLOAT, [len(x)])])
        want = ReferenceEvaluator(model).run(None, {"x": x})
        got, _ = _run(model, {"x": x}, mode, tmp_path, f"cast{k}")
        assert got["y"].dtype.name == TYPES[to]
        _same(got["y"], want[0])
        _same(got["z"], want[1])


@pytest.mark.parametrize("mode", MODES)
def test_castlike_and_a_weight_of_each_type_is_stored_bit_exactly(mode, tmp_path):
    """Concat(x, w) keeps w a weight of its own type in the .om (nothing to fold); the
    stored weight, the output and CastLike's result are the reference's bits."""
    rng = np.random.default_rng(0)
    for to, name in TYPES.items():
        dt = np.dtype(getattr(ml_dtypes, name))
        w = (rng.standard_normal((2, 3)) * 4).astype(np.float32).astype(dt)
        x = (rng.standard_normal((1, 3)) * 4).astype(np.float32).astype(dt)
        like = _model([helper.make_node("Concat", ["x", "w"], ["y"], axis=0),
                       helper.make_node("CastLike", ["y", "f"], ["z"]),
                       helper.make_node("CastLike", ["z", "x"], ["back"])],
                      [helper.make_tensor_value_info("x", to, [1, 3]),
                       helper.make_tensor_value_info("f", T.FLOAT, [1])],
                      [helper.make_tensor_value_info("y", to, [3, 3]),
                       helper.make_tensor_value_info("z", T.FLOAT, [3, 3]),
                       helper.make_tensor_value_info("back", to, [3, 3])],
                      [numpy_helper.from_array(w, "w")])
        feeds = {"x": x, "f": np.zeros(1, np.float32)}
        want = ReferenceEvaluator(like).run(None, feeds)
        got, om = _run(like, feeds, mode, tmp_path, name)
        stored = [a for a in om.weights.values() if a.dtype == dt]
        assert len(stored) == 1, (name, {k: a.dtype for k, a in om.weights.items()})
        _same(stored[0], w)
        for key, ref in zip(("y", "z", "back"), want):
            _same(got[key], ref)


def test_om_weights_of_every_stored_type_round_trip(tmp_path):
    """Weights of each type (every bit pattern of the 1-byte types) written and read back."""
    model = _model([helper.make_node("Identity", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    om = aircc.compile(model, mode="static", target=numpy_target()).om
    for name, dt in ML_DTYPES.items():
        bits = np.arange(65536 if dt.itemsize == 2 else 256, dtype=f"u{dt.itemsize}")
        om.weights[f"w_{name}"] = bits.view(dt).reshape(-1, 4)
    path = tmp_path / "w.om"
    aircc.formats.save_om(om, path)
    back = load_om(path)
    for name, dt in ML_DTYPES.items():
        a = back.weights[f"w_{name}"]
        assert a.dtype == dt
        np.testing.assert_array_equal(_bits(a), _bits(om.weights[f"w_{name}"]))


def _bf16_model():
    w = np.array([[2, 0.5, 1, 4]], np.float32).astype(ml_dtypes.bfloat16)
    return _model([helper.make_node("Mul", ["x", "w"], ["m"]),
                   helper.make_node("Softmax", ["m"], ["y"], axis=-1)],
                  [helper.make_tensor_value_info("x", T.BFLOAT16, ["n", 4])],
                  [helper.make_tensor_value_info("y", T.BFLOAT16, ["n", 4])],
                  [numpy_helper.from_array(w, "w")], opset=21)


@pytest.mark.parametrize("mode", MODES)
def test_bfloat16_input_and_output_through_the_python_api(mode, tmp_path):
    model = _bf16_model()
    path = tmp_path / f"bf16_{mode}.om"
    aircc.compile(model, path, mode=mode, input_shapes={"x": [2, 4]} if mode == "static" else None)
    x = np.array([[1.5, -2.25, 3.0, 0.1], [0, 1, 2, 3]], np.float32).astype(ml_dtypes.bfloat16)
    m = aircc.load(path)
    try:
        assert m.inputs[0].dtype == "bfloat16" and m.outputs[0].dtype == "bfloat16"
        y = m.run({"x": x})["y"]
        with pytest.raises(InputError, match="must be bfloat16, got float32"):
            m.run({"x": x.astype(np.float32)})
    finally:
        m.close()
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(y.astype(np.float32), want.astype(np.float32), rtol=1e-2)


def test_airrun_reads_np_save_raw_bytes_as_the_input_type(tmp_path):
    """np.save writes an ml_dtypes array as raw bytes (|V2) and np.load gives them back so;
    airrun views them as the input's type, and a file of another width is an InputError."""
    model = _bf16_model()
    om = tmp_path / "bf16.om"
    aircc.compile(model, om, input_shapes={"x": [2, 4]})
    x = np.array([[1.5, -2.25, 3.0, 0.1], [0, 1, 2, 3]], np.float32).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x)
    assert np.load(tmp_path / "x.npy").dtype == np.dtype("V2")     # no round trip of the dtype
    m = aircc.load(om)
    try:
        want = m.run({"x": x})["y"]
    finally:
        m.close()
    np.savez(tmp_path / "feeds.npz", x=x)
    for spec in (str(tmp_path / "x.npy"), f"x={tmp_path / 'x.npy'}", str(tmp_path / "feeds.npz")):
        out = tmp_path / "y.npz"
        r = CliRunner().invoke(airrun, [str(om), "--input", spec, "--output", str(out)])
        assert r.exit_code == 0, r.output
        assert "y: bfloat16[2, 4]" in r.output
        y = np.load(out)["y"]
        assert y.dtype == np.dtype("V2")
        _same(y.view(ml_dtypes.bfloat16), want)
    np.save(tmp_path / "x4.npy", x.astype(np.float32).view("V4"))
    r = CliRunner().invoke(airrun, [str(om), "--input", str(tmp_path / "x4.npy")])
    assert r.exit_code == 4
    assert "input 'x' must be bfloat16, got |V4" in r.output

"""Sequences and optionals at a model's inputs and outputs (dynamic mode): the onnx node
cases that have them, the Python API's lists and None, airrun's .npz form, the .om."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h

import aircc
from aircc.cli.airrun_cmd import main as airrun
from aircc.errors import CompileOptionError, InputError
from aircc.formats import dump_om, load_om

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
from conformance import run_case  # noqa: E402

#: Node cases whose graph inputs or outputs are sequences or optionals, passing dynamic.
MIN_PASSES = 29


def _io_kinds(model: onnx.ModelProto) -> set[str]:
    g = model.graph
    return {v.type.WhichOneof("value") for v in [*g.input, *g.output]}


def sequence_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in collect_testcases("")
                if _io_kinds(c.model) & {"sequence_type", "optional_type"}]


def test_node_cases_with_sequence_or_optional_io_pass_dynamic():
    cases = sequence_cases()
    passed, failures = [], []
    for c in cases:
        try:
            run_case(c.model, c.data_sets, getattr(c, "rtol", 1e-3), getattr(c, "atol", 1e-7))
            passed.append(c.name)
        except Exception as e:
            failures.append((c.name, f"{type(e).__name__}: {str(e)[:120]}"))
    assert len(cases) >= 29
    assert len(passed) >= MIN_PASSES, failures
    names = set(passed)
    for must in ("test_identity_sequence", "test_identity_opt", "test_if_opt", "test_loop13_seq",
                 "test_loop16_seq_none", "test_optional_get_element_optional_sequence",
                 "test_optional_has_element_empty_optional_input", "test_split_to_sequence_2",
                 "test_sequence_insert_at_back", "test_sequence_map_add_2_sequences_expanded", "test_sequence_map_add_2_sequences"):
        assert must in names, failures


def test_static_mode_refuses_them_by_name():
    case = next(c for c in sequence_cases() if c.name == "test_identity_opt")
    with pytest.raises(CompileOptionError) as e:
        aircc.compile(case.model, mode="static")
    assert "opt_in" in str(e.value) and "optional:" in str(e.value) and "--mode dynamic" in str(e.value)
    case = next(c for c in sequence_cases() if c.name == "test_sequence_insert_at_back")
    with pytest.raises(CompileOptionError, match="sequence:"):
        aircc.compile(case.model, mode="static")


def _model() -> onnx.ModelProto:
    """s2 = s with x appended; o2 = o (an optional tensor); has = whether o holds one."""
    seq = h.make_sequence_type_proto(h.make_tensor_type_proto(T.FLOAT, ["n"]))
    opt = h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, ["m"]))
    g = h.make_graph(
        [h.make_node("SequenceInsert", ["s", "x"], ["s2"]), h.make_node("Identity", ["o"], ["o2"]),
         h.make_node("OptionalHasElement", ["o"], ["has"])], "seq_io",
        [h.make_value_info("s", seq), h.make_tensor_value_info("x", T.FLOAT, ["n"]),
         h.make_value_info("o", opt)],
        [h.make_value_info("s2", seq), h.make_value_info("o2", opt),
         h.make_tensor_value_info("has", T.BOOL, [])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


@pytest.fixture(scope="module")
def om_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("seq") / "seq_io.om"
    aircc.compile(_model(), str(path))
    return path


def test_om_records_the_kinds_and_the_api_round_trips_lists_and_none(om_path):
    om = load_om(om_path.read_bytes())            # the strict reader accepts the kinds
    model = om.parsed().model
    assert [(i.name, i.dtype, i.shape) for i in model.inputs] == [
        ("s", "sequence:float32", None), ("x", "float32", ("n",)), ("o", "optional:float32", None)]
    assert [o.dtype for o in model.outputs] == ["sequence:float32", "optional:float32", "bool"]
    assert load_om(dump_om(om)).parsed().model.inputs == model.inputs
    m = aircc.load(str(om_path))
    try:
        a, b, x = np.ones(3, np.float32), np.arange(2, dtype=np.float32), np.full(4, 7, np.float32)
        out = m.run({"s": [a, b], "x": x, "o": None})
        assert isinstance(out["s2"], list) and len(out["s2"]) == 3
        for got, want in zip(out["s2"], [a, b, x]):
            np.testing.assert_array_equal(got, want)
        assert out["o2"] is None and out["has"].item() is False
        out = m.run({"s": [], "x": x, "o": b})
        assert len(out["s2"]) == 1 and np.array_equal(out["s2"][0], x)
        np.testing.assert_array_equal(out["o2"], b)
        assert out["has"].item() is True
    finally:
        m.close()


@pytest.mark.parametrize("feeds, message", [
    ({"s": np.ones(3, np.float32), "o": None}, "input 's' is a sequence of float32 tensors: feed a list"),
    ({"s": [np.ones(3, np.int64)], "o": None}, "its elements must be float32, got int64"),
    ({"s": [[1.0, 2.0]], "o": None}, "each element must be a numpy array"),
    ({"s": [], "o": [np.ones(2, np.float32)]}, "input 'o' is an optional float32 tensor"),
    ({"s": [], "o": None, "x_": None}, "unknown input names"),
])
def test_a_wrong_feed_kind_is_a_clear_input_error(om_path, feeds, message):
    m = aircc.load(str(om_path))
    try:
        feeds = {"x": np.ones(2, np.float32), **feeds}
        with pytest.raises(InputError, match=message.replace("(", r"\(")):
            m.run(feeds)
        with pytest.raises(InputError, match="input 'x' is a float32 tensor: feed an array"):
            m.run({"s": [], "o": None, "x": [np.ones(2, np.float32)]})
    finally:
        m.close()


def test_airrun_npz_form_both_ways(om_path, tmp_path):
    a, x = np.ones((2,), np.float32), np.arange(3, dtype=np.float32)
    feeds, out = tmp_path / "feeds.npz", tmp_path / "out.npz"
    np.savez(feeds, **{"s/0": a, "s/1": a * 2, "x": x})         # o left out: empty
    r = CliRunner().invoke(airrun, [str(om_path), "--input", str(feeds), "--output", str(out)])
    assert r.exit_code == 0, r.output
    assert "s2: sequence of 3: float32[2], float32[2], float32[3]" in r.output
    assert "o2: empty optional" in r.output
    z = np.load(out)
    assert sorted(z.files) == ["has", "o2/none", "s2/0", "s2/1", "s2/2"]
    np.testing.assert_array_equal(z["s2/2"], x)
    # an empty sequence (the marker s/), an optional that holds a tensor
    np.savez(feeds, **{"s/": np.zeros(0, np.float32), "x": x, "o": a})
    r = CliRunner().invoke(airrun, [str(om_path), "--input", str(feeds), "--output", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    z = np.load(out)
    assert sorted(z.files) == ["has", "o2", "s2/0"] and bool(z["has"])
    np.testing.assert_array_equal(z["o2"], a)
    # the same output written back in as inputs: s2/0 is no input of the model
    r = CliRunner().invoke(airrun, [str(om_path), "--input", str(out)])
    assert r.exit_code != 0 and "holds ['has', 'o2', 's2/0'], which the model does not have" in r.output


@pytest.mark.parametrize("arrays, message", [
    ({"s": np.ones(2, np.float32)}, "input 's' is a sequence; store it as s/0, s/1"),
    ({"s/0": np.ones(2, np.float32), "s/2": np.ones(2, np.float32)}, "has elements [0, 2]"),
    ({"s/x": np.ones(2, np.float32)}, "give an element index"),
])
def test_airrun_refuses_a_wrong_npz_form(om_path, tmp_path, arrays, message):
    feeds = tmp_path / "bad.npz"
    np.savez(feeds, x=np.ones(2, np.float32), **arrays)
    r = CliRunner().invoke(airrun, [str(om_path), "--input", str(feeds)])
    assert r.exit_code != 0 and message in r.output, r.output
    np.save(tmp_path / "s.npy", np.ones(2, np.float32))
    r = CliRunner().invoke(airrun, [str(om_path), "--input", f"s={tmp_path / 's.npy'}"])
    assert r.exit_code != 0 and "as s/0, s/1, ..." in r.output, r.output

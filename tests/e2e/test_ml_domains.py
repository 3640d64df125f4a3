"""The ai.onnx.ml and ai.onnx.preview.training domains: onnx's node cases, scikit-learn
models converted by skl2onnx against onnxruntime, models importing only ai.onnx.ml,
the refusal of map values, and the command lines."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import aircc.backend as backend
from aircc.cli.airrun_cmd import main as airrun
from aircc.cli.aircc_cmd import main as aircc_cli
from aircc.compiler.driver import CompileOptions, compile_model
from aircc.errors import ModelImportError, UnsupportedOpError
from sklearn_models import sklearn_models as _sklearn_models

DOMAINS = {"ai.onnx.ml", "ai.onnx.preview.training"}
ML = "ai.onnx.ml"


def _domain_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in collect_testcases("")
                if any(n.domain in DOMAINS for n in c.model.graph.node)]


def _has_strings(model: onnx.ModelProto) -> bool:
    g = model.graph
    return any(v.type.tensor_type.elem_type == TensorProto.STRING for v in [*g.input, *g.output])


def _run(model, feeds_list, mode: str):
    rep = backend.prepare(model, mode=mode)
    try:
        return [rep.run([backend.as_array(x) for x in feeds]) for feeds in feeds_list]
    finally:
        rep.model.close()


def _check_case(case, mode: str) -> None:
    got = _run(case.model, [ins for ins, _ in case.data_sets], mode)
    for outs, (_, expected) in zip(got, case.data_sets):
        assert len(outs) == len(expected)
        for g, e in zip(outs, expected):
            e = backend.as_array(e)
            assert g.shape == e.shape and (g.dtype == e.dtype or e.dtype.kind in "OU")
            if e.dtype.kind in "OUbiu":
                np.testing.assert_array_equal(g, e)
            else:
                np.testing.assert_allclose(g, e, rtol=getattr(case, "rtol", 1e-3),
                                           atol=getattr(case, "atol", 1e-7))


def test_every_node_case_of_the_ml_and_training_domains_passes_in_both_modes():
    """15 cases with onnx 1.23: 8 of ai.onnx.ml (4 LabelEncoders on string tensors), 7 of
    the training domain.  Dynamic mode runs every one; static mode runs the 11 without
    strings (static models hold no string tensors: the 4 string cases run in ``auto``
    mode, which chooses dynamic for them)."""
    cases = _domain_cases()
    passed = {"static": 0, "dynamic": 0, "auto (strings)": 0}
    for case in cases:
        _check_case(case, "dynamic")
        passed["dynamic"] += 1
        if _has_strings(case.model):
            _check_case(case, "auto")
            passed["auto (strings)"] += 1
        else:
            _check_case(case, "static")
            passed["static"] += 1
    assert len(cases) >= 15
    assert passed == {"static": len(cases) - 4, "dynamic": len(cases), "auto (strings)": 4}


def test_static_mode_refuses_string_tensors_by_name():
    """A static model's values live in device memory, which holds no strings: forcing
    static on a string LabelEncoder is a clear CompileOptionError, not a KeyError."""
    from aircc.errors import CompileOptionError

    case = next(c for c in _domain_cases() if _has_strings(c.model))
    with pytest.raises(CompileOptionError, match=r"--mode static: .*\(object\).*--mode dynamic"):
        compile_model(case.model, CompileOptions(mode="static"))


def test_native_kernels_run_the_ml_cases_and_the_reference_the_rest():
    fallback = {}
    for case in _domain_cases():
        report = compile_model(case.model, CompileOptions(mode="dynamic")).report
        for n in report.fallback_nodes:
            fallback[n.op] = fallback.get(n.op, 0) + 1
    assert set(fallback) == {"Adagrad", "Adam", "Momentum", "TreeEnsemble"}


# ----------------------------------------------------------- scikit-learn
@pytest.mark.parametrize("name", list(_sklearn_models()))
def test_skl2onnx_models_match_onnxruntime(name):
    from skl2onnx import to_onnx

    model, x, classifier = _sklearn_models()[name]
    x = x.astype(np.float32)
    options = {classifier: {"zipmap": False}} if classifier else None
    onx = to_onnx(model, x[:1], options=options, target_opset={"": 17, ML: 3})
    assert any(n.domain == ML for n in onx.graph.node)
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {onx.graph.input[0].name: x})
    fixed = copy.deepcopy(onx)          # static mode wants the batch fixed
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = len(x)
    for mode, m in (("static", fixed), ("dynamic", onx)):
        assert compile_model(m, CompileOptions(mode=mode)).report.fallback_nodes == []
        (got,) = _run(m, [[x]], mode)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-4)


def test_zipmap_is_refused_at_compile_time():
    from sklearn.linear_model import LogisticRegression
    from skl2onnx import to_onnx

    x = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    onx = to_onnx(LogisticRegression().fit(x, x[:, 0] > 0), x[:1])   # with its ZipMap
    with pytest.raises(UnsupportedOpError) as e:
        compile_model(onx, CompileOptions())
    message = str(e.value)
    assert "'ZipMap'" in message and "ai.onnx.ml" in message and "map(" in message


# ----------------------------------------------------- ai.onnx.ml models alone
def _ml_only_model(batch=None) -> onnx.ModelProto:
    """Scaler -> LinearRegressor -> Binarizer, importing ai.onnx.ml only."""
    nodes = [helper.make_node("Scaler", ["X"], ["S"], domain=ML, offset=[1.0, 2.0, 3.0],
                              scale=[0.5, 2.0, -1.0]),
             helper.make_node("LinearRegressor", ["S"], ["Y"], domain=ML, targets=2,
                              coefficients=[1.0, -1.0, 0.5, 0.0, 2.0, 1.0], intercepts=[0.1, -3.0]),
             helper.make_node("Binarizer", ["Y"], ["B"], domain=ML, threshold=0.5)]
    graph = helper.make_graph(nodes, "ml_only", [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT, [batch or "N", 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch or "N", 2]),
         helper.make_tensor_value_info("B", TensorProto.FLOAT, [batch or "N", 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(ML, 1)])


def _ml_only_expected(x):
    s = (x - [1.0, 2.0, 3.0]) * [0.5, 2.0, -1.0]
    y = s @ np.array([[1.0, -1.0, 0.5], [0.0, 2.0, 1.0]]).T + [0.1, -3.0]
    return y, (y > 0.5).astype(np.float64)


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_model_importing_only_ai_onnx_ml_compiles_and_runs(mode):
    model = _ml_only_model(4 if mode == "static" else None)
    assert [o.domain for o in model.opset_import] == [ML]
    x = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    (got,) = _run(model, [[x]], mode)
    for g, e in zip(got, _ml_only_expected(x.astype(np.float64))):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_an_unknown_version_of_a_known_domain_is_refused():
    model = _ml_only_model()
    model.opset_import[0].version = 99
    with pytest.raises(ModelImportError, match="opset 99 of domain ai.onnx.ml"):
        compile_model(model, CompileOptions())


def _tree_model(aggregate: str, version: int) -> onnx.ModelProto:
    """Two trees over 2 features, thresholds as a tensor (opset 3), two targets; a target
    no reached leaf weights is 0, as onnxruntime computes it."""
    attrs = dict(nodes_treeids=[0, 0, 0, 1, 1, 1, 1, 1], nodes_nodeids=[0, 1, 2, 0, 1, 2, 3, 4],
                 nodes_featureids=[1, 0, 0, 0, 1, 0, 0, 0],
                 nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_GT", "BRANCH_LT",
                              "LEAF", "LEAF", "LEAF"],
                 nodes_truenodeids=[1, 0, 0, 1, 3, 0, 0, 0],
                 nodes_falsenodeids=[2, 0, 0, 2, 4, 0, 0, 0],
                 nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 0, 0],
                 target_treeids=[0, 0, 1, 1, 1, 1], target_nodeids=[1, 2, 2, 3, 4, 4],
                 target_ids=[0, 1, 0, 1, 0, 1], target_weights=[1.5, -2.0, 0.25, 4.0, -1.0, 3.0],
                 n_targets=2, aggregate_function=aggregate, base_values=[0.5, -0.5])
    if version >= 3:
        attrs["nodes_values_as_tensor"] = helper.make_tensor(
            "v", TensorProto.FLOAT, [8], [0.3, 0, 0, -0.2, 1.1, 0, 0, 0])
    else:
        attrs["nodes_values"] = [0.3, 0, 0, -0.2, 1.1, 0, 0, 0]
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, **attrs)
    graph = helper.make_graph([node], "trees", [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT, [64, 2])], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [64, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(ML, version)])


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("version", [1, 3])
def test_tree_ensemble_regressor_matches_onnxruntime(aggregate, version):
    model = _tree_model(aggregate, version)
    x = np.random.default_rng(2).normal(size=(64, 2)).astype(np.float32)
    x[::7, 1] = np.nan                       # missing values follow tracks_true
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    assert compile_model(model, CompileOptions()).report.fallback_nodes == []
    for mode in ("static", "dynamic"):
        (got,) = _run(model, [[x]], mode)
        np.testing.assert_allclose(got[0], expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("keys,values,attrs", [
    ([3, 1, 7], [0.5, 1.5, -2.0], {"default_float": 9.0}),
    ([0.5, np.nan, -1.0], [10, 20, 30], {}),
])
def test_label_encoder_numeric_tables_match_onnxruntime(keys, values, attrs):
    kind = {int: "int64s", float: "floats"}
    key_attr = f"keys_{kind[type(keys[0])]}"
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, **{
        key_attr: keys, f"values_{kind[type(values[0])]}": values}, **attrs)
    x_type = TensorProto.INT64 if key_attr == "keys_int64s" else TensorProto.FLOAT
    y_type = TensorProto.INT64 if isinstance(values[0], int) else TensorProto.FLOAT
    graph = helper.make_graph([node], "le", [helper.make_tensor_value_info("X", x_type, [2, 3])],
                              [helper.make_tensor_value_info("Y", y_type, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(ML, 2)])
    x = (np.array([[3, 2, 7], [1, 1, 0]], np.int64) if x_type == TensorProto.INT64
         else np.array([[0.5, np.nan, 4.0], [-1.0, 0.5, 0.0]], np.float32))
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    for mode in ("static", "dynamic"):
        (got,) = _run(model, [[x]], mode)
        assert got[0].dtype == expected.dtype
        np.testing.assert_array_equal(got[0], expected)


# ----------------------------------------------------------- command lines
def test_aircc_compile_then_airrun_on_an_ml_only_model(tmp_path):
    src, om, npz = tmp_path / "ml.onnx", tmp_path / "ml.om", tmp_path / "out.npz"
    onnx.save(_ml_only_model(), src)
    x = np.random.default_rng(3).normal(size=(5, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(aircc_cli, ["compile", str(src), "-o", str(om), "--input-shape", "X:5,3"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(airrun, [str(om), "--input", str(tmp_path / "x.npy"), "--output", str(npz)])
    assert r.exit_code == 0, r.output
    assert "Y: float32[5, 2]" in r.output
    y, b = _ml_only_expected(x.astype(np.float64))
    np.testing.assert_allclose(np.load(npz)["Y"], y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.load(npz)["B"], b)


def test_aircc_ops_lists_the_ml_and_training_domains():
    out = CliRunner().invoke(aircc_cli, ["ops"]).output.splitlines()
    rows = {(line.split()[0], line.split()[1], line.split()[3]): line.split()[4]
            for line in out if line.strip()}
    assert rows[(ML, "TreeEnsembleRegressor", "3+")] == "native"
    assert rows[(ML, "LabelEncoder", "4+")] == "native"
    assert rows[(ML, "SVMClassifier", "1+")] == "native"
    assert rows[(ML, "TreeEnsemble", "5+")] == "fallback"
    assert rows[("ai.onnx.preview.training", "Adam", "1+")] == "fallback"
    assert not any(op in ("ZipMap", "Gradient") for _, op, _ in rows)

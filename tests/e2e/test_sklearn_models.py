"""Common scikit-learn estimators and transformers (tests/sklearn_models.py's survey),
converted by skl2onnx as users convert them (its default opsets, ZipMap off), compile in
static mode at a fixed batch and in dynamic mode at two batches, with no node on the
fallback kernel, and match onnxruntime."""
from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import aircc
from sklearn_models import estimator_survey

ML = "ai.onnx.ml"
STATIC_BATCH, DYNAMIC_BATCHES = 8, (5, 17)


@functools.lru_cache(maxsize=None)
def _survey() -> dict[str, tuple]:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")          # convergence warnings of the small fits
        return estimator_survey()


@functools.lru_cache(maxsize=None)
def _converted(name: str) -> tuple[onnx.ModelProto, np.ndarray]:
    from skl2onnx import to_onnx

    model, x, classifier = _survey()[name]
    x = x.astype(np.float32)
    options = {classifier: {"zipmap": False}} if classifier else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)     # SVC's deprecated probA_, probB_
        return to_onnx(model, x[:1], options=options), x


def _expect_same(got: dict, expected: list, names: list[str], where: str) -> None:
    assert list(got) == names, where
    for name, e in zip(names, expected):
        g = got[name]
        assert g.dtype == e.dtype and g.shape == e.shape, (where, name, g.dtype, g.shape, e.dtype, e.shape)
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=f"{where}: {name}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"{where}: {name}")


def _check_both_modes(onx: onnx.ModelProto, feeds_of) -> None:
    """Static at STATIC_BATCH rows, dynamic at each of DYNAMIC_BATCHES: no fallback node,
    onnxruntime's outputs (``feeds_of(rows)`` makes the inputs)."""
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in onx.graph.output]
    for mode, batches in (("static", (STATIC_BATCH,)), ("dynamic", DYNAMIC_BATCHES)):
        shapes = ({k: v.shape for k, v in feeds_of(STATIC_BATCH).items()} if mode == "static"
                  else None)
        compiled = aircc.compile(onx, mode=mode, input_shapes=shapes)
        assert compiled.report.fallback_nodes == [], mode
        with aircc.load(compiled) as model:
            for rows in batches:
                feeds = feeds_of(rows)
                _expect_same(model.run(feeds), session.run(None, feeds), names, f"{mode}, {rows} rows")


@pytest.mark.parametrize("name", list(_survey()))
def test_estimator_compiles_static_and_dynamic_natively_and_matches_onnxruntime(name):
    onx, x = _converted(name)
    start = 3                                   # rows past the first, which the model converted
    _check_both_modes(onx, lambda rows: {onx.graph.input[0].name: x[start:start + rows]})


def test_the_survey_covers_the_ml_ops_made_native():
    ops = {n.op_type for name in _survey() for n in _converted(name)[0].graph.node if n.domain == ML}
    assert {"SVMClassifier", "SVMRegressor", "Imputer", "OneHotEncoder"} <= ops


@pytest.mark.parametrize("transformer", ["StandardScaler", "Normalizer"])
def test_a_transformer_of_several_inputs_joins_them_natively(transformer):
    """skl2onnx joins a transformer's several inputs with a FeatureVectorizer."""
    from sklearn import preprocessing
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    x = np.random.default_rng(4).normal(size=(40, 5)).astype(np.float32)
    model = getattr(preprocessing, transformer)().fit(x)
    onx = convert_sklearn(model, initial_types=[("a", FloatTensorType([None, 2])),
                                                ("b", FloatTensorType([None, 3]))])
    assert "FeatureVectorizer" in {n.op_type for n in onx.graph.node}
    _check_both_modes(onx, lambda rows: {"a": x[:rows, :2], "b": x[:rows, 2:]})

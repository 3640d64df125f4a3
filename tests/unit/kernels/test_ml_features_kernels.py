"""Imputer, OneHotEncoder and FeatureVectorizer (ai.onnx.ml) against onnxruntime, and
against onnx's reference for the input types onnxruntime does not register."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError, UnsupportedVariantError
from aircc.ops import InferContext, TensorType, op_def
from kernel_harness import check, ints, rand, run_ours

ML = "ai.onnx.ml"
ORT = dict(domain=ML, engine="ort")


def _with_nans(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.reshape(-1)[::3] = np.nan
    return x


@pytest.mark.parametrize("values", [[1.5, -2.0, 3.0, 0.25], [7.0]])
@pytest.mark.parametrize("replaced", [np.nan, 0.0])
def test_imputer_replaces_floats_per_feature_or_with_one_value(values, replaced):
    x = _with_nans(rand(6, 4))
    x[1, 2] = x[4, 0] = 0.0
    attrs = dict(imputed_value_floats=values, replaced_value_float=replaced)
    check("Imputer", [x], attrs, **ORT)
    check("Imputer", [x], attrs, domain=ML)


def test_imputer_of_one_sample_as_a_vector():
    check("Imputer", [_with_nans(rand(5))], dict(imputed_value_floats=[1.0, 2.0, 3.0, 4.0, 5.0],
                                                 replaced_value_float=np.nan), **ORT)


@pytest.mark.parametrize("values", [[10, 20, 30], [-1]])
def test_imputer_replaces_int64s(values):
    attrs = dict(imputed_value_int64s=values, replaced_value_int64=2)
    check("Imputer", [ints(8, 3, lo=0, hi=4)], attrs, **ORT)


@pytest.mark.parametrize("x, attrs", [
    (_with_nans(rand(6, 3, dtype=np.float64)), dict(imputed_value_floats=[1.0, 2.0, 3.0],
                                                    replaced_value_float=np.nan)),
    (ints(6, 3, lo=0, hi=3, dtype=np.int32), dict(imputed_value_int64s=[9], replaced_value_int64=1)),
])
def test_imputer_of_types_onnxruntime_leaves(x, attrs):
    check("Imputer", [x], attrs, domain=ML)


@pytest.mark.parametrize("x", [ints(6, 3, lo=-1, hi=5), ints(7, lo=0, hi=6)])
def test_one_hot_encoder_of_int64s(x):
    check("OneHotEncoder", [x], dict(cats_int64s=[4, 0, 2, 1], zeros=1), **ORT)
    check("OneHotEncoder", [x], dict(cats_int64s=[4, 0, 2, 1], zeros=1), domain=ML)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_hot_encoder_truncates_floats(dtype):
    """A float is its int64 truncation (2.7 is category 2), as onnxruntime casts it; NaN
    and infinities are no category."""
    x = np.array([[0.0, 2.7, -1.0], [3.0, np.nan, np.inf], [1.2, 5.0, 2.0]], dtype)
    check("OneHotEncoder", [x], dict(cats_int64s=[0, 1, 2, 3, 5]), **ORT)


def test_one_hot_encoder_of_int32s():
    check("OneHotEncoder", [ints(5, 2, lo=0, hi=4, dtype=np.int32)], dict(cats_int64s=[1, 3, 0]),
          domain=ML)


def test_one_hot_encoder_with_a_category_listed_twice_sets_its_last_column():
    check("OneHotEncoder", [ints(5, 2, lo=0, hi=4)], dict(cats_int64s=[1, 3, 1, 0]), **ORT)


def test_one_hot_encoder_without_zeros_refuses_an_unknown_value():
    attrs = dict(cats_int64s=[0, 1, 2], zeros=0)
    check("OneHotEncoder", [ints(4, 2, lo=0, hi=3)], attrs, **ORT)
    with pytest.raises(ValueError, match="value 7 is none of cats_int64s and zeros is 0"):
        run_ours("OneHotEncoder", [np.array([[1, 7]], np.int64)], attrs, domain=ML)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_feature_vectorizer_cuts_and_pads_each_input(dtype):
    a, b, c = ints(5, 2, dtype=dtype), ints(5, 4, dtype=dtype), ints(5, 1, dtype=dtype)
    check("FeatureVectorizer", [a, b, c], dict(inputdimensions=[2, 3, 3]), **ORT)


def test_feature_vectorizer_flattens_trailing_dims_and_reads_a_vector_as_one_row():
    check("FeatureVectorizer", [rand(3, 2, 2), rand(3, 3)], dict(inputdimensions=[4, 3]), **ORT)
    check("FeatureVectorizer", [rand(3), rand(2)], dict(inputdimensions=[3, 4]), **ORT)


def _infer(op, types, attrs):
    ctx = InferContext(types, attrs, [None] * len(types), node="n", op=op)
    return op_def(op, 1, ML).infer(ctx)


def test_shapes_are_static_with_a_symbolic_batch():
    f = TensorType("float32", ("N", 3))
    assert _infer("Imputer", [f], dict(imputed_value_floats=[0.0], replaced_value_float=1.0)) == [f]
    assert _infer("OneHotEncoder", [TensorType("int64", ("N", 3))], dict(cats_int64s=[1, 2])) == [
        TensorType("float32", ("N", 3, 2))]
    assert _infer("FeatureVectorizer", [f, TensorType("float32", ("N", 2))],
                  dict(inputdimensions=[3, 5])) == [TensorType("float32", ("N", 8))]


def test_strings_and_mismatched_imputations_are_left_to_the_fallback():
    with pytest.raises(UnsupportedVariantError):
        _infer("OneHotEncoder", [TensorType("object", ("N",))], dict(cats_strings=["a"]))
    with pytest.raises(UnsupportedVariantError, match="imputed_value_floats for a int64 input"):
        _infer("Imputer", [TensorType("int64", ("N", 2))], dict(imputed_value_floats=[1.0]))


@pytest.mark.parametrize("op, types, attrs, message", [
    ("Imputer", [TensorType("float32", (2, 3))], dict(imputed_value_floats=[1.0, 2.0]),
     "2 imputed values for 3 features"),
    ("Imputer", [TensorType("float32", (2, 3))], {}, "exactly one of imputed_value_floats"),
    ("OneHotEncoder", [TensorType("int64", (2, 3, 4))], dict(cats_int64s=[1]), "rank 3"),
    ("FeatureVectorizer", [TensorType("float32", (2, 3))], dict(inputdimensions=[3, 1]),
     "inputdimensions has 2 values for 1 inputs"),
])
def test_malformed_nodes_are_refused_by_name(op, types, attrs, message):
    with pytest.raises(ShapeInferenceError, match=message):
        _infer(op, types, attrs)

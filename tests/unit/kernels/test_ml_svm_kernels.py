"""SVMClassifier and SVMRegressor (ai.onnx.ml) against onnxruntime, whose semantics the
kernels follow, and against onnx's reference where the two agree: every kernel type,
one-vs-one voting, binary models, Platt scaling, post_transform, linear (no support
vector) models, one-class models, and the uses left to the fallback."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError, UnsupportedVariantError
from aircc.ops import InferContext, TensorType, op_def
from kernel_harness import check, ints, rand

ML = "ai.onnx.ml"
ORT = dict(domain=ML, engine="ort", n_out=2)
KERNELS = ["LINEAR", "POLY", "RBF", "SIGMOID"]
POSTS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]


def svc(per_class, features=4, kernel="RBF", proba=False, **extra) -> dict:
    """A one-vs-one SVC's attributes: ``per_class`` support vectors of each class."""
    k, v = len(per_class), sum(per_class)
    attrs = dict(classlabels_ints=[10 * (i + 1) for i in range(k)], vectors_per_class=per_class,
                 support_vectors=rand(v * features).tolist(),
                 coefficients=rand((k - 1) * v, lo=-2, hi=2).tolist(),
                 rho=rand(k * (k - 1) // 2, lo=-0.3, hi=0.3).tolist(), kernel_type=kernel,
                 kernel_params=[0.4, 0.5, 3.0])
    if proba:
        attrs.update(prob_a=rand(k * (k - 1) // 2, lo=-4, hi=-1).tolist(),
                     prob_b=rand(k * (k - 1) // 2, lo=-0.5, hi=0.5).tolist())
    return {**attrs, **extra}


def linear(k, features=4, positive=False, **extra) -> dict:
    """A liblinear model's attributes: one coefficient row per class, rho[0] its intercept."""
    coef = rand(k * features, lo=0 if positive else -1, hi=1)
    return dict(classlabels_ints=list(range(3, 3 + k)), coefficients=coef.tolist(),
                rho=[0.1], kernel_type="LINEAR", kernel_params=[0.0, 0.0, 1.0], **extra)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("per_class", [[3, 2, 4], [2, 3]])
def test_svc_votes_one_vs_one_for_every_kernel(kernel, per_class):
    check("SVMClassifier", [rand(16, 4)], svc(per_class, kernel=kernel), rtol=1e-5, atol=1e-5, **ORT)


@pytest.mark.parametrize("kernel", KERNELS)
def test_svc_multiclass_agrees_with_onnx_reference(kernel):
    check("SVMClassifier", [rand(12, 4)], svc([2, 3, 1, 2], kernel=kernel), domain=ML, n_out=2,
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("post", POSTS)
def test_svc_multiclass_scores_go_through_post_transform(post):
    check("SVMClassifier", [rand(16, 4)], svc([2, 3, 2, 1], post_transform=post), rtol=1e-4,
          atol=1e-5, **ORT)


@pytest.mark.parametrize("post", POSTS[:-1])
def test_svc_binary_writes_both_score_columns(post):
    """[-s, s], their logistic with LOGISTIC, [1 - s, s] with SOFTMAX and SOFTMAX_ZERO:
    onnxruntime's choices (onnx's reference differs)."""
    check("SVMClassifier", [rand(16, 4)], svc([3, 4], post_transform=post), rtol=1e-5, atol=1e-5,
          **ORT)


@pytest.mark.parametrize("per_class", [[3, 4], [2, 3, 4], [2, 1, 2, 3, 2]])
@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC"])
def test_svc_probabilities_by_platt_scaling(per_class, post):
    x = rand(32, 4, lo=-2, hi=2)
    check("SVMClassifier", [x], svc(per_class, proba=True, post_transform=post), rtol=1e-4,
          atol=2e-5, **ORT)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_svc_features_of_other_types_compute_in_float(dtype):
    x = ints(8, 4, lo=-2, hi=3, dtype=dtype)
    check("SVMClassifier", [x], svc([3, 2, 2], features=4, kernel="POLY"), rtol=1e-5, atol=1e-5,
          **ORT)


def test_svc_one_sample_as_a_vector():
    check("SVMClassifier", [rand(4)], svc([2, 2, 3], proba=True), rtol=1e-4, atol=1e-5, **ORT)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("post", POSTS)
def test_linear_model_scores_every_class(k, post):
    check("SVMClassifier", [rand(16, 4)], linear(k, post_transform=post), rtol=1e-5, atol=1e-5, **ORT)


@pytest.mark.parametrize("positive", [True, False])
def test_linear_binary_label_follows_the_top_score_threshold(positive):
    """Two classes: the second label where the top score reaches 0.5 (all weights
    positive) or 0 (mixed), else the best class."""
    x = rand(64, 4, lo=-1.5, hi=1.5)
    check("SVMClassifier", [x], linear(2, positive=positive), rtol=1e-5, atol=1e-5, **ORT)


@pytest.mark.parametrize("kernel", KERNELS)
def test_svr_for_every_kernel(kernel):
    attrs = dict(n_supports=5, support_vectors=rand(5 * 3).tolist(), coefficients=rand(5).tolist(),
                 rho=[0.25], kernel_type=kernel, kernel_params=[0.3, 0.2, 2.0])
    check("SVMRegressor", [rand(16, 3)], attrs, domain=ML, rtol=1e-5, atol=1e-5)
    check("SVMRegressor", [rand(16, 3)], attrs, domain=ML, engine="ort", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("one_class", [0, 1])
@pytest.mark.parametrize("vectors", [0, 6])
def test_svr_linear_and_one_class(one_class, vectors):
    attrs = dict(n_supports=vectors, coefficients=rand(vectors or 3).tolist(), rho=[-0.05],
                 one_class=one_class, kernel_type="RBF" if vectors else "LINEAR",
                 kernel_params=[0.5, 0.0, 3.0])
    if vectors:
        attrs["support_vectors"] = rand(vectors * 3).tolist()
    check("SVMRegressor", [rand(32, 3)], attrs, domain=ML, engine="ort", rtol=1e-5, atol=1e-5)
    check("SVMRegressor", [rand(3)], attrs, domain=ML, engine="ort", rtol=1e-5, atol=1e-5)


def _infer(op, attrs, shape=(4, 4), dtype="float32", n_out=2):
    ctx = InferContext([TensorType(dtype, shape)], attrs, [None], node="n", op=op, num_outputs=n_out)
    return op_def(op, 1, ML).infer(ctx)


def test_shapes_are_static_with_a_symbolic_batch():
    assert _infer("SVMClassifier", svc([2, 2, 2, 2]), ("N", 4)) == [
        TensorType("int64", ("N",)), TensorType("float32", ("N", 6))]
    assert _infer("SVMClassifier", svc([2, 2], proba=True), ("N", 4))[1].shape == ("N", 2)
    assert _infer("SVMClassifier", linear(3), (5, 4))[1] == TensorType("float32", (5, 3))
    reg = dict(n_supports=0, coefficients=[1.0, 2.0], rho=[0.0])
    assert _infer("SVMRegressor", reg, ("N", 2), n_out=1) == [TensorType("float32", ("N", 1))]


def test_string_labels_and_undefined_uses_are_left_to_the_fallback():
    strings = {**svc([2, 2]), "classlabels_strings": ["a", "b"]}
    del strings["classlabels_ints"]
    for op, attrs in [("SVMClassifier", strings),
                      ("SVMClassifier", svc([2, 2], post_transform="PROBIT")),
                      ("SVMRegressor", dict(n_supports=0, coefficients=[1.0] * 4, rho=[0.0],
                                            post_transform="LOGISTIC"))]:
        with pytest.raises(UnsupportedVariantError):
            _infer(op, attrs)


@pytest.mark.parametrize("attrs, message", [
    (svc([2, 2], kernel="CUBIC"), "kernel_type must be one of"),
    ({**svc([2, 2]), "support_vectors": [0.0] * 7}, "support_vectors has 7 values, 16 expected"),
    ({**svc([2, 2, 2]), "rho": [0.0]}, "rho has 1 values, at least 3 expected"),
    ({**svc([2, 2], proba=True), "prob_b": [0.0, 1.0]}, "prob_a and prob_b must have the same"),
    ({**svc([2, 2]), "vectors_per_class": [2, 1, 1]}, "vectors_per_class has 3 values, 2"),
    ({"coefficients": [1.0], "rho": [0.0]}, "classlabels_ints or classlabels_strings"),
])
def test_malformed_classifiers_are_refused_by_name(attrs, message):
    with pytest.raises(ShapeInferenceError, match=message):
        _infer("SVMClassifier", attrs)

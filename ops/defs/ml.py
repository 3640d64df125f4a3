"""The ``ai.onnx.ml`` domain: linear models, scalers, encoders, tree ensembles; the SVMs
are in :mod:`.ml_svm`, Imputer, OneHotEncoder and FeatureVectorizer in :mod:`.ml_features`.

Inputs are a feature matrix ``[N, C]`` (a vector ``[C]`` is one sample).  A use the
native kernels leave (string class labels, a post-transform they do not compute) runs
on the fallback, onnx's reference implementation; the ops of this domain without a
native definition (CategoryMapper, TreeEnsemble-5) run there too, but for those taking maps
(ZipMap, DictVectorizer, CastMap), which the importer refuses.
"""
from __future__ import annotations

import numpy as np

from aircc.ops.registry import InferContext, define
from aircc.ops.types import TensorType

ML = "ai.onnx.ml"
FEATURE_TYPES = ("float32", "float64", "int64", "int32")
POST_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")


def feature_dims(ctx: InferContext) -> tuple:
    """(N, C) of input 0, a feature matrix or one sample."""
    x = ctx.input_type(0)
    shape = ctx.input_shape(0)
    if x.dtype not in FEATURE_TYPES:
        ctx.fail(f"input 0 must be float, double, int64 or int32, got {x.dtype}")
    if len(shape) == 1:
        return 1, shape[0]
    if len(shape) != 2:
        ctx.unsupported(f"input 0 has rank {len(shape)}: the native kernel takes [N, C] or [C]")
    return shape[0], shape[1]


def post_transform_attr(ctx: InferContext, allowed=POST_TRANSFORMS) -> str:
    """The ``post_transform`` attribute; one not in ``allowed`` is left to the fallback."""
    post = ctx.attrs.get("post_transform", "NONE")
    if post not in allowed:
        ctx.unsupported(f"post_transform {post!r}")
    return post


def int_label_count(ctx: InferContext, name: str) -> int:
    """How many int64 class labels (``name``); string labels are left to the fallback."""
    if ctx.attrs.get("classlabels_strings"):
        ctx.unsupported("string class labels")
    return len(ctx.attrs.get(name) or [])


@define("LinearRegressor", 1, ML)
def linear_regressor(ctx: InferContext) -> list[TensorType]:
    """Y[N, targets] = X @ coefficients^T + intercepts (``post_transform`` NONE)."""
    n, _ = feature_dims(ctx)
    post_transform_attr(ctx, ("NONE",))
    return [TensorType("float32", (n, int(ctx.attrs.get("targets", 1))))]


def linear_classes(attrs: dict, c) -> tuple[int, int]:
    """(score columns the coefficients give, class labels) of a LinearClassifier."""
    labels = len(attrs.get("classlabels_ints") or attrs.get("classlabels_strings") or [])
    rows = len(attrs["coefficients"]) // c if isinstance(c, int) and c else len(attrs["intercepts"])
    return rows, labels


@define("LinearClassifier", 1, ML)
def linear_classifier(ctx: InferContext) -> list[TensorType]:
    """Scores Z = post_transform(X @ coefficients^T + intercepts) and the label of the best
    class Y (a single score column is one class against a threshold; with two labels it
    is the second class, the first scoring its negation)."""
    n, c = feature_dims(ctx)
    post_transform_attr(ctx)
    int_label_count(ctx, "classlabels_ints")
    if "intercepts" not in ctx.attrs or not isinstance(c, int):
        ctx.unsupported("no intercepts or an unknown feature count")
    rows, labels = linear_classes(ctx.attrs, c)
    cols = 2 if rows == 1 and labels == 2 else rows
    return [TensorType("int64", (n,)), TensorType("float32", (n, cols))][:max(ctx.num_outputs, 1)]


@define("Scaler", 1, ML)
def scaler(ctx: InferContext) -> list[TensorType]:
    """Y = (X - offset) * scale, per feature (one value broadcasts), as float."""
    feature_dims(ctx)
    return [TensorType("float32", ctx.input_shape(0))]


@define("Normalizer", 1, ML)
def normalizer(ctx: InferContext) -> list[TensorType]:
    """Each row divided by its ``norm``: MAX, L1 or L2."""
    feature_dims(ctx)
    if ctx.attrs.get("norm") not in ("MAX", "L1", "L2"):
        ctx.fail(f"norm must be MAX, L1 or L2, got {ctx.attrs.get('norm')!r}")
    return [TensorType("float32", ctx.input_shape(0))]


@define("Binarizer", 1, ML)
def binarizer(ctx: InferContext) -> list[TensorType]:
    """Y = 1 where X > threshold, else 0, in X's type."""
    x = ctx.input_type(0)
    if x.dtype not in FEATURE_TYPES:
        ctx.fail(f"input 0 must be float, double, int64 or int32, got {x.dtype}")
    return [x]


@define("ArrayFeatureExtractor", 1, ML)
def array_feature_extractor(ctx: InferContext) -> list[TensorType]:
    """The features ``indices`` (input 1) of each row of X, along its last axis (a vector X
    gives one row)."""
    x = ctx.input_type(0)
    shape = ctx.input_shape(0)
    ishape = ctx.input_shape(1)
    if ctx.input_type(1).dtype != "int64":
        ctx.fail(f"indices must be int64, got {ctx.input_type(1).dtype}")
    k = 1
    for d in ishape:
        k = k * d if isinstance(k, int) and isinstance(d, int) else ctx.sym("k")
    lead = (1,) if len(shape) == 1 else tuple(shape[:-1])
    return [TensorType(x.dtype, (*lead, k))]


#: LabelEncoder: the attribute suffixes of keys and values and their element types.
LABEL_TYPES = {"floats": "float32", "int64s": "int64", "strings": "object"}


def label_encoder_types(attrs: dict, version: int) -> tuple[str | None, str | None]:
    """(key dtype, value dtype) a LabelEncoder's attributes say (None: not said)."""
    if version < 2:
        return None, None
    key = next((t for s, t in LABEL_TYPES.items() if f"keys_{s}" in attrs), None)
    value = next((t for s, t in LABEL_TYPES.items() if f"values_{s}" in attrs), None)
    if key is None and isinstance(attrs.get("keys_tensor"), np.ndarray):
        key = attrs["keys_tensor"].dtype.name
    if value is None and isinstance(attrs.get("values_tensor"), np.ndarray):
        value = attrs["values_tensor"].dtype.name
    return key, value


def _label_encoder_rule(version: int):
    def infer(ctx: InferContext) -> list[TensorType]:
        x = ctx.input_type(0)
        if version == 1:
            out = "int64" if x.dtype == "object" else "object"
            if x.dtype not in ("object", "int64"):
                ctx.fail(f"input must be string or int64, got {x.dtype}")
            return [TensorType(out, x.shape)]
        key, value = label_encoder_types(ctx.attrs, version)
        if key is None or value is None:
            ctx.fail("keys and values must both be given")
        if key != x.dtype:
            ctx.fail(f"input is {x.dtype}, the keys are {key}")
        return [TensorType(value, x.shape)]

    infer.__doc__ = ("Each element of X mapped by the table keys -> values (int64, float, "
                     "string; any tensor type from opset 4), the default where no key matches")
    return infer


for _v in (1, 2, 4):
    define("LabelEncoder", _v, ML)(_label_encoder_rule(_v))


def _tree_rule(classifier: bool):
    def infer(ctx: InferContext) -> list[TensorType]:
        n, _ = feature_dims(ctx)
        ids = ctx.attrs.get("class_ids" if classifier else "target_ids")
        if not ctx.attrs.get("nodes_modes") or ids is None:
            ctx.fail("the ensemble has no nodes or no leaf weights")
        if classifier:
            post_transform_attr(ctx)
            labels = int_label_count(ctx, "classlabels_int64s")
            if labels < 2:
                ctx.unsupported(f"{labels} class label(s)")
            return [TensorType("int64", (n,)),
                    TensorType("float32", (n, labels))][:max(ctx.num_outputs, 1)]
        post_transform_attr(ctx, ("NONE",))
        if ctx.attrs.get("aggregate_function", "SUM") not in ("SUM", "AVERAGE", "MIN", "MAX"):
            ctx.fail(f"aggregate_function {ctx.attrs.get('aggregate_function')!r}")
        return [TensorType("float32", (n, int(ctx.attrs.get("n_targets", 1))))]

    infer.__doc__ = (
        "Every tree walked from its root to a leaf (BRANCH_LEQ/LT/GTE/GT/EQ/NEQ on one "
        "feature, missing values down the true branch where tracked); the leaves' weights "
        + ("summed per class plus base_values, post-transformed (Z), and the best class (Y)"
           if classifier else "aggregated per target (SUM, AVERAGE, MIN, MAX) plus base_values"))
    return infer


for _v in (1, 3):
    define("TreeEnsembleRegressor", _v, ML)(_tree_rule(False))
    define("TreeEnsembleClassifier", _v, ML)(_tree_rule(True))

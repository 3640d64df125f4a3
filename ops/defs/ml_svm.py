"""Support vector machines of ``ai.onnx.ml``: SVMClassifier and SVMRegressor.

Both run in one of two modes, as libsvm and liblinear models do.  With support vectors
(``vectors_per_class`` / ``n_supports``) a sample's kernel values against every support
vector (LINEAR, POLY, RBF, SIGMOID, with ``kernel_params`` = gamma, coef0, degree) are
combined by the dual coefficients; without, the coefficients are the weights of a linear
model.  The semantics are onnxruntime's, which skl2onnx's converters are written
against (where onnx's reference differs: a binary classifier's second score column,
a linear multiclass label, a regressor's ``post_transform``); string class labels and
the uses onnxruntime leaves undefined run on the fallback.
"""
from __future__ import annotations

from dataclasses import dataclass

from aircc.ops.registry import InferContext, define
from aircc.ops.types import TensorType

from .ml import ML, feature_dims, int_label_count, post_transform_attr

KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


@dataclass(frozen=True)
class SvmLayout:
    """How an SVMClassifier's attributes are laid out and what its score output holds."""

    classes: int
    """Class labels (``classlabels_ints``)."""
    vectors: int
    """Support vectors (0: a linear model, one coefficient row per class)."""
    probabilities: bool
    """Pairwise Platt scaling (``prob_a``, ``prob_b``) into one probability per class."""

    @property
    def pairs(self) -> int:
        """One-vs-one classifiers: one per pair of classes."""
        return self.classes * (self.classes - 1) // 2

    @property
    def score_columns(self) -> int:
        """Columns of Z: the pairwise decision values (two for a binary model: the
        negated value and the value), else one per class."""
        if self.vectors and not self.probabilities:
            return self.pairs if self.classes > 2 else 2
        return self.classes


def svm_layout(attrs: dict) -> SvmLayout:
    """The :class:`SvmLayout` an SVMClassifier's attributes give."""
    labels = attrs.get("classlabels_ints") or attrs.get("classlabels_strings") or []
    return SvmLayout(len(labels), int(sum(attrs.get("vectors_per_class") or [])),
                     bool(attrs.get("prob_a")))


def _size(ctx: InferContext, name: str, want: int, what: str, at_least: bool = False) -> None:
    got = len(ctx.attrs.get(name) or [])
    if got < want if at_least else got != want:
        ctx.fail(f"{name} has {got} values, {'at least ' if at_least else ''}{want} expected ({what})")


def _kernel_type(ctx: InferContext, vectors: int) -> None:
    kernel = ctx.attrs.get("kernel_type", "LINEAR")
    if kernel not in KERNELS:
        ctx.fail(f"kernel_type must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if vectors and kernel != "LINEAR":
        _size(ctx, "kernel_params", 3, "gamma, coef0, degree")


@define("SVMClassifier", 1, ML)
def svm_classifier(ctx: InferContext) -> list[TensorType]:
    """One-vs-one SVM: each pair of classes (i, j) scores sum(coefficients * kernel(X,
    support vectors of i and j)) + rho, and votes for i when positive; Y is the label of
    the most voted class.  Z: the pairwise scores, post-transformed (two classes: -s, s,
    or their logistic; 1 - s, s with SOFTMAX or SOFTMAX_ZERO), or, with prob_a / prob_b,
    each class's probability (Platt scaling coupled pairwise, as libsvm); without support
    vectors, X @ coefficients^T + rho[0] per class, Y its best class (of two: the second
    where the top score reaches 0.5, or passes 0 if a weight is negative).  Probabilities and
    linear scores then go through ``post_transform``."""
    n, c = feature_dims(ctx)
    post = post_transform_attr(ctx)
    if int_label_count(ctx, "classlabels_ints") == 0:
        ctx.fail("classlabels_ints or classlabels_strings must be given")
    layout = svm_layout(ctx.attrs)
    _kernel_type(ctx, layout.vectors)
    if len(ctx.attrs.get("prob_a") or []) != len(ctx.attrs.get("prob_b") or []):
        ctx.fail("prob_a and prob_b must have the same length")
    if layout.vectors:
        _size(ctx, "vectors_per_class", layout.classes, "one count per class label")
        if layout.classes < 2:
            ctx.unsupported("support vectors with one class label")
        if isinstance(c, int):
            _size(ctx, "support_vectors", layout.vectors * c, f"{layout.vectors} vectors of {c} features")
        _size(ctx, "coefficients", (layout.classes - 1) * layout.vectors,
              "classes - 1 rows of one per support vector", at_least=True)
        _size(ctx, "rho", layout.pairs, "one per pair of classes", at_least=True)
        if layout.probabilities:
            _size(ctx, "prob_a", layout.pairs, "one per pair of classes", at_least=True)
        elif layout.classes == 2 and post == "PROBIT":
            ctx.unsupported("PROBIT of a binary model's single score (onnxruntime leaves its "
                            "second column unwritten)")
    else:
        if isinstance(c, int):
            _size(ctx, "coefficients", layout.classes * c, f"{layout.classes} classes of {c} features")
        _size(ctx, "rho", 1, "the intercept", at_least=True)
    return [TensorType("int64", (n,)), TensorType("float32", (n, layout.score_columns))]


@define("SVMRegressor", 1, ML)
def svm_regressor(ctx: InferContext) -> list[TensorType]:
    """Y[N, 1] = sum(coefficients * kernel(X, support vectors)) + rho[0], or X @
    coefficients + rho[0] without support vectors (``n_supports`` 0); with ``one_class``,
    1 where that is positive, else -1 (OneClassSVM)."""
    n, c = feature_dims(ctx)
    post_transform_attr(ctx, ("NONE",))
    vectors = int(ctx.attrs.get("n_supports", 0))
    _kernel_type(ctx, vectors)
    if isinstance(c, int):
        if vectors:
            _size(ctx, "support_vectors", vectors * c, f"{vectors} vectors of {c} features")
        else:
            _size(ctx, "coefficients", c, "one weight per feature")
    if vectors:
        _size(ctx, "coefficients", vectors, "one per support vector", at_least=True)
    _size(ctx, "rho", 1, "the intercept", at_least=True)
    return [TensorType("float32", (n, 1))]

"""Kernels of the SVMs of ``ai.onnx.ml`` (their shape rules: :mod:`aircc.ops.defs.ml_svm`).

As onnxruntime computes them: features in float32, the kernel matrix of a batch against
every support vector at once (one GEMM; RBF's squared distances through one), the one-vs-one
decision values as one more product with a [vectors, pairs] matrix of the dual
coefficients (in float64, as onnxruntime sums them), votes counted per class, and the
pairwise probabilities coupled for every sample together, one iteration of libsvm's
method at a time.  What derives from the attributes alone is made once per node.
"""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.ml_svm import svm_layout

from .ml import derived, post_transform
from .numpy_backend import NUMPY

ML = "ai.onnx.ml"


class SvmKernel:
    """kernel(X, B) of ``kernel_type`` with ``kernel_params`` (gamma, coef0, degree)."""

    def __init__(self, attrs: dict, vectors: int):
        params = [*(attrs.get("kernel_params") or []), 0.0, 0.0, 0.0][:3]
        self.kind = attrs.get("kernel_type", "LINEAR") if vectors else "LINEAR"
        self.gamma, self.coef0, self.degree = (np.float32(p) for p in params)

    def __call__(self, x: np.ndarray, b: np.ndarray) -> np.ndarray:
        """[N, M] float32 kernel values of the rows of x [N, F] against those of b [M, F]."""
        if self.kind == "RBF":
            x64, b64 = x.astype(np.float64), b.astype(np.float64)
            d = (x64 * x64).sum(1)[:, None] + (b64 * b64).sum(1)[None, :] - 2.0 * (x64 @ b64.T)
            return np.exp(-self.gamma * np.maximum(d, 0.0)).astype(np.float32)
        k = x @ b.T
        if self.kind == "LINEAR":
            return k
        k *= self.gamma
        k += self.coef0
        return np.tanh(k) if self.kind == "SIGMOID" else k ** self.degree


def _features(x: np.ndarray) -> np.ndarray:
    """A feature matrix [N, F] in float32 (a vector is one sample)."""
    return (x.reshape(1, -1) if x.ndim == 1 else x).astype(np.float32, copy=False)


class SvmClassifierModel:
    """An SVMClassifier's attributes as arrays: support vectors, the [vectors, pairs]
    matrix of dual coefficients, which class each pair votes for."""

    def __init__(self, attrs: dict):
        self.layout = layout = svm_layout(attrs)
        self.kernel = SvmKernel(attrs, layout.vectors)
        self.labels = np.asarray(attrs["classlabels_ints"], np.int64)
        self.post = attrs.get("post_transform", "NONE")
        coef = np.asarray(attrs["coefficients"], np.float32)
        self.rho = np.asarray(attrs["rho"], np.float64)
        self.all_positive = bool((coef >= 0).all())
        k = layout.classes
        if not layout.vectors:
            self.weights = coef.reshape(k, -1)
            return
        self.support = np.asarray(attrs["support_vectors"], np.float32).reshape(layout.vectors, -1)
        per_class = np.asarray(attrs["vectors_per_class"], np.int64)
        start = np.concatenate([[0], np.cumsum(per_class)])
        dual = coef[:(k - 1) * layout.vectors].reshape(k - 1, layout.vectors).astype(np.float64)
        self.pair_weights = np.zeros((layout.vectors, layout.pairs), np.float64)
        self.winner = np.zeros((layout.pairs, k), np.int64)      # pair -> class i (s > 0)
        self.loser = np.zeros((layout.pairs, k), np.int64)       # pair -> class j
        pair = 0
        for i in range(k):
            for j in range(i + 1, k):
                vi, vj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
                self.pair_weights[vi, pair] = dual[j - 1, vi]
                self.pair_weights[vj, pair] = dual[i, vj]
                self.winner[pair, i] = self.loser[pair, j] = 1
                pair += 1
        if layout.probabilities:
            self.prob_a = np.asarray(attrs["prob_a"], np.float32)[:layout.pairs]
            self.prob_b = np.asarray(attrs["prob_b"], np.float32)[:layout.pairs]
            self.upper = np.triu_indices(k, 1)

    def run(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(labels [N], scores [N, score columns]) of the samples x [N, F]."""
        if not self.layout.vectors:
            return self._linear(x)
        s = self.kernel(x, self.support).astype(np.float64) @ self.pair_weights
        s += self.rho[:self.layout.pairs]
        positive = s > 0
        votes = positive.astype(np.int64) @ self.winner + (~positive).astype(np.int64) @ self.loser
        label = self.labels[np.argmax(votes, axis=1)]
        s = s.astype(np.float32)
        if self.layout.probabilities:
            return label, post_transform(self._probabilities(s), self.post)
        if self.layout.classes > 2:
            return label, post_transform(s, self.post)
        if self.post in ("NONE", "LOGISTIC"):      # as onnxruntime: -s, s (their logistic)
            return label, post_transform(np.concatenate([-s, s], axis=1), self.post)
        return label, np.concatenate([1 - s, s], axis=1)

    def _linear(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = x @ self.weights.T + np.float32(self.rho[0])
        best = np.argmax(s, axis=1)
        label = self.labels[best]
        if self.layout.classes == 2 and not self.layout.probabilities:
            top = s.max(axis=1)
            second = (top >= 0.5) if self.all_positive else (top > 0)
            label = np.where(second, self.labels[1], label)
        if self.layout.classes == 1:
            return label, post_transform(s, self.post) if self.post == "PROBIT" else s
        return label, post_transform(s, self.post)

    def _probabilities(self, s: np.ndarray) -> np.ndarray:
        """Each class's probability from the pairwise decision values s [N, pairs]."""
        v = s * self.prob_a + self.prob_b
        with np.errstate(over="ignore"):
            p = np.clip(1 / (1 + np.exp(v)), np.float32(1e-7), np.float32(1 - 1e-7))
        k = self.layout.classes
        r = np.zeros((s.shape[0], k, k), np.float32)
        r[:, self.upper[0], self.upper[1]] = p
        r[:, self.upper[1], self.upper[0]] = 1 - p
        return couple_probabilities(r)


def couple_probabilities(r: np.ndarray) -> np.ndarray:
    """Class probabilities [N, k] from pairwise ones r [N, k, k] (r[i, j]: i beats j), by
    libsvm's fixed-point method (Wu, Lin and Weng 2004, method 2) as onnxruntime runs it
    (float32, at most 100 iterations, each sample until it converges)."""
    n, k, _ = r.shape
    q = -np.swapaxes(r, 1, 2) * r
    diag = np.arange(k)
    q[:, diag, diag] = (r * r).sum(axis=1)
    p = np.full((n, k), 1.0 / k, np.float32)
    eps = np.float32(0.005) / np.float32(k)
    active = np.ones(n, bool)
    for _ in range(100):
        qp = np.einsum("nij,nj->ni", q, p)
        pqp = (p * qp).sum(axis=1)
        active &= np.abs(qp - pqp[:, None]).max(axis=1) >= eps
        if not active.any():
            break
        for i in range(k):
            qii = q[:, i, i]
            with np.errstate(divide="ignore", invalid="ignore"):
                diff = np.where(active, (pqp - qp[:, i]) / qii, np.float32(0))
            p[:, i] += diff
            grow = 1 + diff
            pqp = (pqp + diff * (diff * qii + 2 * qp[:, i])) / grow / grow
            qp = (qp + diff[:, None] * q[:, i, :]) / grow[:, None]
            p /= grow[:, None]
    return p


@NUMPY.kernel("SVMClassifier", 1, ML)
class SVMClassifier:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        model = derived(attrs, "svm_classifier", SvmClassifierModel)
        label, scores = model.run(_features(ins[0]))
        np.copyto(outs[0], label)
        if len(outs) > 1 and outs[1] is not None:
            np.copyto(outs[1], scores, casting="unsafe")


class SvmRegressorModel:
    """An SVMRegressor's support vectors and coefficients as arrays."""

    def __init__(self, attrs: dict):
        vectors = int(attrs.get("n_supports", 0))
        self.kernel = SvmKernel(attrs, vectors)
        coef = np.asarray(attrs["coefficients"], np.float32)
        self.rho = np.float32(attrs["rho"][0])
        self.one_class = bool(attrs.get("one_class", 0))
        if vectors:
            self.support = np.asarray(attrs["support_vectors"], np.float32).reshape(vectors, -1)
            self.coef = coef[:vectors].astype(np.float64)
        else:
            self.support, self.coef = coef.reshape(1, -1), np.ones(1, np.float64)

    def run(self, x: np.ndarray) -> np.ndarray:
        """Y [N, 1] of the samples x [N, F]."""
        y = (self.kernel(x, self.support).astype(np.float64) @ self.coef + self.rho)[:, None]
        return np.where(y > 0, 1.0, -1.0) if self.one_class else y


@NUMPY.kernel("SVMRegressor", 1, ML)
class SVMRegressor:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        model = derived(attrs, "svm_regressor", SvmRegressorModel)
        np.copyto(outs[0], model.run(_features(ins[0])), casting="unsafe")

"""Kernels of the ``ai.onnx.ml`` domain (their shape rules: :mod:`aircc.ops.defs.ml`).

What a kernel derives from its attributes alone (a tree ensemble's node arrays, a
LabelEncoder's sorted table) is made once per node and kept (:func:`derived`).  Tree
ensembles walk every (sample, tree) pair a level at a time, vectorised: one step per
level of the deepest tree, not one per sample and node.
"""
from __future__ import annotations

import threading

import numpy as np

from aircc.ops.defs.ml import label_encoder_types, linear_classes

from .numpy_backend import NUMPY

ML = "ai.onnx.ml"
_DERIVED: dict[tuple[int, str], tuple[dict, object]] = {}
_LOCK = threading.Lock()


def derived(attrs: dict, kind: str, build):
    """``build(attrs)``, made once per attribute dict (a node's) and kept."""
    key = (id(attrs), kind)
    hit = _DERIVED.get(key)
    if hit is not None and hit[0] is attrs:
        return hit[1]
    value = build(attrs)
    with _LOCK:
        _DERIVED[key] = (attrs, value)
    return value


def _matrix(x: np.ndarray) -> np.ndarray:
    """A feature matrix [N, C] as float (float64 stays; the rest compute in float32)."""
    x = x.reshape(1, -1) if x.ndim == 1 else x
    return x if x.dtype == np.float64 else x.astype(np.float32)


def _erf_inv(x: np.ndarray) -> np.ndarray:
    """The approximation of erf^-1 onnxruntime and onnx's reference use (a = 0.147)."""
    sgn = np.where(x < 0, -1.0, 1.0)
    w = (1.0 - x) * (1.0 + x)
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.log(w)
        v = 2.0 / (np.pi * 0.147) + 0.5 * log
        r = sgn * np.sqrt(-v + np.sqrt(v * v - log / 0.147))
    return np.where(w == 0, 0.0, r)


def post_transform(scores: np.ndarray, how: str) -> np.ndarray:
    """Scores [N, K] through the op's ``post_transform``."""
    if how == "LOGISTIC":
        return 1.0 / (1.0 + np.exp(-scores))
    if how == "SOFTMAX":
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if how == "SOFTMAX_ZERO":
        top = scores.max(axis=1, keepdims=True)
        e = np.where(np.abs(scores) > 1e-7, np.exp(scores - top), scores * np.exp(-top))
        total = e.sum(axis=1, keepdims=True)
        return np.where(total == 0, 0.5, e / np.where(total == 0, 1, total))
    if how == "PROBIT":
        return 1.41421356 * _erf_inv(scores * 2 - 1)
    return scores


def _labels(best: np.ndarray, labels) -> np.ndarray:
    return np.asarray(labels, np.int64)[best] if labels else best.astype(np.int64)


# ------------------------------------------------------------ linear models
@NUMPY.kernel("LinearRegressor", 1, ML)
class LinearRegressor:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = _matrix(ins[0])
        coef = np.asarray(attrs["coefficients"], x.dtype).reshape(int(attrs.get("targets", 1)), -1)
        y = x @ coef.T
        if attrs.get("intercepts"):
            y += np.asarray(attrs["intercepts"], x.dtype)
        np.copyto(outs[0], y, casting="unsafe")


@NUMPY.kernel("LinearClassifier", 1, ML)
class LinearClassifier:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = _matrix(ins[0])
        rows, labels = linear_classes(attrs, x.shape[1])
        coef = np.asarray(attrs["coefficients"], x.dtype).reshape(rows, x.shape[1])
        s = x @ coef.T + np.asarray(attrs["intercepts"], x.dtype)
        if rows == 1 and labels == 2:
            s = np.concatenate([-s, s], axis=1)
        how = attrs.get("post_transform", "NONE")
        s = post_transform(s, how)
        ints = attrs.get("classlabels_ints")
        if s.shape[1] > 1:
            label = _labels(np.argmax(s, axis=1), ints)
        else:
            hit = s[:, 0] >= (0 if how == "NONE" else 0.5)
            label = np.where(hit, ints[0] if ints else 1, 0).astype(np.int64)
        np.copyto(outs[0], label)
        if len(outs) > 1 and outs[1] is not None:
            np.copyto(outs[1], s, casting="unsafe")


# ---------------------------------------------------------- preprocessing
@NUMPY.kernel("Scaler", 1, ML)
class Scaler:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        offset = np.asarray(attrs.get("offset", [0.0]), np.float64)
        scale = np.asarray(attrs.get("scale", [1.0]), np.float64)
        np.copyto(outs[0], (ins[0] - offset) * scale, casting="unsafe")


@NUMPY.kernel("Normalizer", 1, ML)
class Normalizer:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = _matrix(ins[0])
        norm = attrs["norm"]
        if norm == "MAX":
            d = np.abs(x).max(axis=1, keepdims=True)
        elif norm == "L1":
            d = np.abs(x).sum(axis=1, keepdims=True)
        else:
            d = np.sqrt(np.square(x).sum(axis=1, keepdims=True))
        np.copyto(outs[0], (x / np.maximum(d, 1e-30)).reshape(outs[0].shape), casting="unsafe")


@NUMPY.kernel("Binarizer", 1, ML)
class Binarizer:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        np.copyto(outs[0], ins[0] > attrs.get("threshold", 0.0), casting="unsafe")


@NUMPY.kernel("ArrayFeatureExtractor", 1, ML)
class ArrayFeatureExtractor:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, idx = ins[0], ins[1].reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= x.shape[-1]):
            raise IndexError(f"indices {idx.tolist()} out of range for {x.shape[-1]} features")
        np.copyto(outs[0], np.take(x, idx, axis=-1).reshape(outs[0].shape))


# ------------------------------------------------------------ LabelEncoder
_DEFAULTS = {"float32": ("default_float", -0.0), "int64": ("default_int64", -1),
             "object": ("default_string", "_Unused")}


def _table(attrs: dict, version: int):
    """(keys, values, default) of a LabelEncoder, keys sorted when numeric."""
    if version == 1:
        return None
    key, value = label_encoder_types(attrs, version)
    pick = {"float32": "floats", "int64": "int64s", "object": "strings"}
    keys = attrs.get(f"keys_{pick.get(key)}")
    keys = np.asarray(attrs["keys_tensor"] if keys is None else keys, key)
    values = attrs.get(f"values_{pick.get(value)}")
    values = np.asarray(attrs["values_tensor"] if values is None else values, value)
    if isinstance(attrs.get("default_tensor"), np.ndarray):
        default = attrs["default_tensor"].reshape(-1)[0]
    else:
        kind = "object" if value == "object" else "float32" if values.dtype.kind == "f" else "int64"
        name, default = _DEFAULTS[kind]
        default = attrs.get(name, default)
    if key == "object":
        return dict(zip(keys.tolist(), values.tolist())), None, default
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order], default


def label_encode(x: np.ndarray, out: np.ndarray, attrs: dict, version: int) -> None:
    """out = the table's value of each element of x (the default where none matches)."""
    if version == 1:
        classes = list(attrs.get("classes_strings", []))
        if x.dtype == object:
            index = {c: k for k, c in enumerate(classes)}
            d = attrs.get("default_int64", -1)
            out[...] = np.array([index.get(v, d) for v in x.reshape(-1)], np.int64).reshape(x.shape)
        else:
            d = attrs.get("default_string", "_Unused")
            out[...] = np.array([classes[v] if 0 <= v < len(classes) else d
                                 for v in x.reshape(-1).tolist()], object).reshape(x.shape)
        return
    keys, values, default = derived(attrs, "label_encoder", lambda a: _table(a, version))
    if values is None:                                    # string keys: a dict
        got = [keys.get(v, default) for v in x.reshape(-1).tolist()]
        out[...] = np.array(got, dtype=out.dtype).reshape(x.shape)
        return
    pos = np.clip(np.searchsorted(keys, x), 0, max(len(keys) - 1, 0))
    hit = keys[pos] == x if len(keys) else np.zeros(x.shape, bool)
    if version >= 4 and keys.dtype.kind == "f" and np.isnan(keys).any():   # NaN matches NaN
        hit |= np.isnan(x)
        pos = np.where(np.isnan(x), np.flatnonzero(np.isnan(keys))[0], pos)
    np.copyto(out, np.where(hit, values[pos] if len(keys) else default, default), casting="unsafe")


def _label_encoder(version: int):
    class LabelEncoder:
        @staticmethod
        def kernel(ins, outs, attrs, tiling, ws) -> None:
            label_encode(ins[0], outs[0], attrs, version)
    return LabelEncoder


for _v in (1, 2, 4):
    NUMPY.kernel("LabelEncoder", _v, ML)(_label_encoder(_v))


# ---------------------------------------------------------- tree ensembles
_MODES = {"LEAF": 0, "BRANCH_LEQ": 1, "BRANCH_LT": 2, "BRANCH_GTE": 3, "BRANCH_GT": 4,
          "BRANCH_EQ": 5, "BRANCH_NEQ": 6}


def _attr_array(attrs: dict, name: str, dtype, default=None):
    t = attrs.get(f"{name}_as_tensor")
    if isinstance(t, np.ndarray) and t.size:
        return np.asarray(t, np.float64).reshape(-1)
    v = attrs.get(name)
    return default if v is None else np.asarray(v, dtype)


class TreeModel:
    """A tree ensemble's nodes as flat arrays (every tree's), leaf weights as a dense
    [node, output] matrix."""

    def __init__(self, attrs: dict, classifier: bool):
        trees = np.asarray(attrs["nodes_treeids"], np.int64)
        ids = np.asarray(attrs["nodes_nodeids"], np.int64)
        n = len(trees)
        at = {(t, k): i for i, (t, k) in enumerate(zip(trees.tolist(), ids.tolist()))}
        self.mode = np.array([_MODES[m] for m in attrs["nodes_modes"]], np.int8)
        self.leaf = self.mode == 0
        self.modes = sorted(set(self.mode[~self.leaf].tolist()))
        self.feature = np.asarray(attrs["nodes_featureids"], np.int64)
        self.value = _attr_array(attrs, "nodes_values", np.float32, np.zeros(n, np.float32))
        self.missing_true = _attr_array(attrs, "nodes_missing_value_tracks_true", np.int64,
                                        np.zeros(n, np.int64)) >= 1

        def child(name):
            nxt = attrs[name]
            return np.array([i if self.leaf[i] else at[(t, nxt[i])]
                             for i, t in enumerate(trees.tolist())], np.int64)

        self.true, self.false = child("nodes_truenodeids"), child("nodes_falsenodeids")
        self.roots = np.array([np.flatnonzero(trees == t)[0] for t in sorted(set(trees.tolist()))],
                              np.int64)
        p = "class" if classifier else "target"
        out_ids = np.asarray(attrs[f"{p}_ids"], np.int64)
        leaves = np.array([at[(t, k)] for t, k in zip(attrs[f"{p}_treeids"], attrs[f"{p}_nodeids"])],
                          np.int64)
        weights = _attr_array(attrs, f"{p}_weights", np.float32, np.zeros(0))
        if classifier:
            outputs = len(attrs["classlabels_int64s"])
        else:
            outputs = int(attrs.get("n_targets", 1))
        self.aggregate = "SUM" if classifier else attrs.get("aggregate_function", "SUM")
        fill = {"MIN": np.finfo(np.float32).max, "MAX": np.finfo(np.float32).min}.get(self.aggregate, 0)
        self.weights = np.full((n, outputs), fill, np.float64)
        ufunc = {"MIN": np.minimum, "MAX": np.maximum}.get(self.aggregate, np.add)
        ufunc.at(self.weights, (leaves, out_ids), weights.astype(np.float64))
        self.weighted = np.zeros((n, outputs), bool)      # which outputs a leaf has weights for
        self.weighted[leaves, out_ids] = True
        self.unweighted_zero = not classifier
        base = _attr_array(attrs, "base_values", np.float32)
        self.base = None if base is None or not base.size else base.astype(np.float64)
        self.class_ids = sorted(set(out_ids.tolist()))

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """The leaf each (sample, tree) reaches: [N, trees] node indices."""
        n = x.shape[0]
        cur = np.repeat(self.roots[None, :], n, axis=0)
        rows = np.repeat(np.arange(n)[:, None], len(self.roots), axis=1)
        while True:
            active = ~self.leaf[cur]
            if not active.any():
                return cur
            c, r = cur[active], rows[active]
            v = x[r, self.feature[c]]
            t = self.value[c].astype(v.dtype)
            if len(self.modes) == 1:
                go = _compare(self.modes[0], v, t)
            else:
                m = self.mode[c]
                go = np.zeros(len(c), bool)
                for code in self.modes:
                    sel = m == code
                    go[sel] = _compare(code, v[sel], t[sel])
            go = np.where(np.isnan(v), self.missing_true[c], go)
            cur[active] = np.where(go, self.true[c], self.false[c])

    def scores(self, x: np.ndarray) -> np.ndarray:
        at = self.leaves(x)
        w = self.weights[at]                              # [N, trees, outputs]
        if self.aggregate == "MIN":
            s = w.min(axis=1)
        elif self.aggregate == "MAX":
            s = w.max(axis=1)
        else:
            s = w.sum(axis=1)
            if self.aggregate == "AVERAGE":
                s /= len(self.roots)
        s = s if self.base is None else s + self.base
        if self.unweighted_zero:          # as onnxruntime: no leaf weighted it, 0
            s = np.where(self.weighted[at].any(axis=1), s, 0.0)
        return s


def _compare(code: int, v: np.ndarray, t: np.ndarray) -> np.ndarray:
    return (np.less_equal, np.less, np.greater_equal, np.greater, np.equal,
            np.not_equal)[code - 1](v, t)


@NUMPY.kernel("TreeEnsembleRegressor", 3, ML)
@NUMPY.kernel("TreeEnsembleRegressor", 1, ML)
class TreeEnsembleRegressor:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        model = derived(attrs, "trees", lambda a: TreeModel(a, False))
        np.copyto(outs[0], model.scores(_matrix(ins[0])), casting="unsafe")


@NUMPY.kernel("TreeEnsembleClassifier", 3, ML)
@NUMPY.kernel("TreeEnsembleClassifier", 1, ML)
class TreeEnsembleClassifier:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        model = derived(attrs, "trees", lambda a: TreeModel(a, True))
        s = model.scores(_matrix(ins[0]))
        how = attrs.get("post_transform", "NONE")
        if len(model.class_ids) == 1 and s.shape[1] == 2:   # binary: one class's score
            one = s[:, model.class_ids[0]].copy()
            s[:, 1] = one
            s[:, 0] = 1 - one if how in ("NONE", "PROBIT") else -one
        s = post_transform(s, how)
        np.copyto(outs[0], _labels(np.argmax(s, axis=1), attrs["classlabels_int64s"]))
        if len(outs) > 1 and outs[1] is not None:
            np.copyto(outs[1], s, casting="unsafe")

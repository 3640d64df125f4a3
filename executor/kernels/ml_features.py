"""Kernels of ``ai.onnx.ml``'s feature preparation ops (their shape rules:
:mod:`aircc.ops.defs.ml_features`): Imputer, OneHotEncoder, FeatureVectorizer."""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.ml_features import imputed_values

from .ml import derived
from .numpy_backend import NUMPY

ML = "ai.onnx.ml"


def impute(x: np.ndarray, out: np.ndarray, values: np.ndarray, replaced) -> None:
    """out = x with the elements equal to ``replaced`` (NaN: the NaNs) set to ``values``
    (one per feature along the last axis, or one for all)."""
    missing = np.isnan(x) if x.dtype.kind == "f" and np.isnan(replaced) else x == replaced
    if values.size != x.shape[-1]:
        values = values[:1]
    np.copyto(out, x)
    np.copyto(out, np.broadcast_to(values, x.shape), where=missing)


@NUMPY.kernel("Imputer", 1, ML)
class Imputer:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        values, replaced = imputed_values(attrs, ins[0].dtype.name)
        impute(ins[0], outs[0], np.asarray(values, ins[0].dtype), replaced)


class Categories:
    """A OneHotEncoder's ``cats_int64s`` sorted, with each one's column (a category listed
    twice: its last)."""

    def __init__(self, attrs: dict):
        column = {c: k for k, c in enumerate(attrs["cats_int64s"])}
        self.keys = np.array(sorted(column), np.int64)
        self.columns = np.array([column[c] for c in self.keys.tolist()], np.int64)

    def columns_of(self, x: np.ndarray) -> np.ndarray:
        """The column of each element of x (-1: no category)."""
        if x.dtype.kind == "f":
            finite = np.isfinite(x)
            ints = np.trunc(np.where(finite, x, 0)).astype(np.int64)
        else:
            finite, ints = True, x.astype(np.int64, copy=False)
        pos = np.minimum(np.searchsorted(self.keys, ints), len(self.keys) - 1)
        return np.where((self.keys[pos] == ints) & finite, self.columns[pos], -1)


@NUMPY.kernel("OneHotEncoder", 1, ML)
class OneHotEncoder:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        cats = derived(attrs, "one_hot", Categories)
        cols = cats.columns_of(ins[0]).reshape(-1)
        if not attrs.get("zeros", 1) and (cols < 0).any():
            bad = ins[0].reshape(-1)[np.flatnonzero(cols < 0)[0]]
            raise ValueError(f"value {bad} is none of cats_int64s and zeros is 0")
        y = outs[0].reshape(cols.size, outs[0].shape[-1])
        y.fill(0)
        hit = np.flatnonzero(cols >= 0)
        y[hit, cols[hit]] = 1


@NUMPY.kernel("FeatureVectorizer", 1, ML)
class FeatureVectorizer:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        y.fill(0)
        at = 0
        for x, width in zip(ins, attrs["inputdimensions"]):
            rows = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
            k = min(rows.shape[1], int(width))
            y[:, at:at + k] = rows[:, :k]
            at += int(width)

"""Kernels of GatherND, ScatterElements and ScatterND (:mod:`aircc.ops.defs.scatter`):
numpy's fancy indexing, and its unbuffered ``ufunc.at`` for the reductions, so that
repeated indices each count (``scatter_add`` of two updates at one place adds both)."""
from __future__ import annotations

import numpy as np

from aircc.ops.shapes import axis_plain, prod

from .numpy_backend import NUMPY

#: Scatter reduction -> the ufunc whose ``at`` applies it (None: plain assignment).
REDUCE = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(y: np.ndarray, where: tuple, values: np.ndarray, attrs: dict) -> None:
    """``y[where] = values``, or reduced into ``y`` by the node's ``reduction``."""
    r = attrs.get("reduction", "none")
    ufunc = REDUCE[r.decode() if isinstance(r, bytes) else r]
    if ufunc is None:
        y[where] = values
    else:
        ufunc.at(y, where, values)


def _wrapped(idx: np.ndarray, dims) -> np.ndarray:
    """Indices with negative ones counted from the end of their dims (``dims`` broadcast
    against the last axis or given as one size)."""
    idx = idx.astype(np.int64, copy=False)
    return np.where(idx < 0, idx + np.asarray(dims, np.int64), idx)


@NUMPY.kernel("GatherND", 11)
class GatherND:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, idx = ins[0], ins[1]
        b = int(attrs.get("batch_dims", 0))
        k = idx.shape[-1]
        batch = prod(x.shape[:b])
        data = x.reshape(batch, *x.shape[b:])
        tuples = _wrapped(idx.reshape(batch, -1, k), x.shape[b:b + k])
        picked = data[(np.arange(batch)[:, None], *(tuples[..., j] for j in range(k)))]
        np.copyto(outs[0], picked.reshape(outs[0].shape))


@NUMPY.kernel("ScatterElements", 11)
class ScatterElements:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, idx, upd = ins[0], ins[1], ins[2]
        y = outs[0]
        axis = axis_plain(attrs.get("axis", 0), x.ndim)
        np.copyto(y, x)
        where = list(np.indices(idx.shape, sparse=True))
        where[axis] = _wrapped(idx, x.shape[axis])
        _scatter(y, tuple(where), upd, attrs)


@NUMPY.kernel("ScatterND", 11)
class ScatterND:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, idx, upd = ins[0], ins[1], ins[2]
        y = outs[0]
        k = idx.shape[-1]
        np.copyto(y, x)
        tuples = _wrapped(idx.reshape(-1, k), x.shape[:k])
        slices = upd.reshape(tuples.shape[0], *x.shape[k:])
        _scatter(y, tuple(tuples.T), slices, attrs)

"""Softmax and LogSoftmax kernels: since 1 (input coerced to 2-D at ``axis``, default 1)
and since 13 (along ``axis``, default -1).  :func:`softmax`, :func:`softmax_add` and
:func:`softmax_exact` are shared with the fused attention kernels."""
from __future__ import annotations

import numpy as np

from aircc.ops.shapes import axis_plain, prod
from aircc.ops.targets import Target
from aircc.ops.types import TensorType

from .blas import gemm
from .numpy_backend import NUMPY
from .scratch import carve, constant_column, view, workspace


def _views(x: np.ndarray, y: np.ndarray, attrs: dict, coerce: bool):
    """(x, y, axis) with x/y reshaped to 2-D for the coerced (old) semantics."""
    if coerce:
        axis = axis_plain(attrs.get("axis", 1), x.ndim)
        shape = (prod(x.shape[:axis]), prod(x.shape[axis:]))
        return x.reshape(shape), view(y, shape), 1
    return x, y, axis_plain(attrs.get("axis", -1), max(x.ndim, 1))


#: Below this many elements a softmax is all per-call cost: the sums come from one
#: numpy reduction (no GEMM, no per-row bookkeeping) and any underflowing row sends
#: the whole tensor the exact way (see :func:`_normalize_small`).
SMALL = 8192

#: A row whose exponentials, shifted by the tensor's maximum, sum to less than this
#: is recomputed with its own maximum (see :func:`_softmax_rows`).
ROW_SUM_FLOOR = 2.0 ** -40


def softmax(x: np.ndarray, y: np.ndarray, axis: int) -> None:
    """y = softmax(x) along ``axis`` (y may be x)."""
    if x.ndim == 0:
        y[...] = 1
        return
    if axis == x.ndim - 1 and x.dtype == np.float32 and x.size >= SMALL and x.flags.c_contiguous \
            and y.flags.c_contiguous:
        n = x.shape[-1]
        if _softmax_rows(x.reshape(-1, n), y.reshape(-1, n)):
            return
    elif x.size and x.size < SMALL and x.dtype in (np.float32, np.float64):
        top = x.max()
        if np.isfinite(top):
            np.subtract(x, top, out=y)
            if _normalize_small(y, axis):
                return
    softmax_exact(x, y, axis)


def _normalize_small(y: np.ndarray, axis: int) -> bool:
    """``y`` holds the input minus a shift at least its maximum: exponentiate and divide
    by the sums along ``axis``.  False when some sum falls under ``ROW_SUM_FLOOR`` (a
    row far below the shift, whose precision underflow would eat): the caller then
    recomputes the exact way from its inputs."""
    np.exp(y, out=y)
    sums = np.add.reduce(y, axis=axis, keepdims=True)
    if sums.min() < ROW_SUM_FLOOR:
        return False
    np.divide(y, sums, out=y)
    return True


def softmax_exact(x: np.ndarray, y: np.ndarray, axis: int) -> None:
    """y = softmax(x) along ``axis`` with each row shifted by its own maximum (a row
    holding +inf gives NaN, as in onnxruntime): the exact path, for any input.  ufunc
    methods straight: on small tensors this is all per-call cost."""
    top = np.maximum.reduce(x, axis=axis, keepdims=True)
    if np.isinf(top).any():
        with np.errstate(invalid="ignore"):
            np.subtract(x, top, out=y)
    else:
        np.subtract(x, top, out=y)
    np.exp(y, out=y)
    np.divide(y, np.add.reduce(y, axis=axis, keepdims=True), out=y)


def _softmax_rows(x: np.ndarray, y: np.ndarray) -> bool:
    """Softmax over the rows of 2-D ``x``, shifted by the maximum of the whole tensor.

    Any shift gives the same softmax; a row maximum costs numpy a slow reduction
    over short contiguous rows, the tensor's maximum one fast pass.  Every
    exponential is then at most 1 (no overflow).  False (nothing written) when the
    maximum is not finite (NaN or infinite inputs): the exact path handles those."""
    top = x.max()
    if not np.isfinite(top):
        return False
    np.subtract(x, top, out=y)
    _exp_normalize_rows(y, lambda rows: x[rows])
    return True


def _exp_normalize_rows(y: np.ndarray, source) -> None:
    """``y`` (2-D) holds each row minus a shift at least its maximum: exponentiate, then
    scale each row by the reciprocal of its sum (the sums are one product with a column
    of ones; numpy's reduction over short rows is slow).  A row whose sum falls under
    ``ROW_SUM_FLOOR`` (its own maximum far below the shift) would lose precision to
    underflow: those rows are redone exactly from ``source(rows)``, a fresh array of
    the input rows."""
    np.exp(y, out=y)
    sums = np.empty((y.shape[0], 1), y.dtype)
    gemm(y, constant_column(y.shape[1], 1, y.dtype), sums)
    sums = sums.reshape(-1)
    low = np.flatnonzero(sums < ROW_SUM_FLOOR)
    if low.size:
        rows = source(low)
        softmax_exact(rows, rows, 1)
        y[low] = rows
        sums[low] = 1
    np.reciprocal(sums, out=sums)
    np.multiply(y, sums[:, None], out=y)


def softmax_add(a: np.ndarray, b: np.ndarray, y: np.ndarray, axis: int) -> None:
    """softmax(a + b) along ``axis`` (``fused_add``, see the fuse-add-softmax pass).

    The shift is folded into the smaller operand: y = a + (b - max(a) - max(b)) is
    the one pass that writes ``y``, and every exponential is at most 1."""
    if a.size < b.size:
        a, b = b, a
    n = y.shape[-1] if y.ndim else 1
    if y.ndim and axis == y.ndim - 1 and y.size >= SMALL and y.dtype == np.float32 and a.shape == y.shape \
            and a.dtype == y.dtype and b.dtype == y.dtype and a.flags.c_contiguous \
            and y.flags.c_contiguous and y.size:
        shift = a.max() + b.max()
        if np.isfinite(shift):
            np.add(a, np.subtract(b, shift), out=y)
            a2 = a.reshape(-1, n)
            _exp_normalize_rows(y.reshape(-1, n), lambda rows: a2[rows] + np.broadcast_to(
                b, y.shape).reshape(-1, n)[rows])
            return
    elif y.ndim and 0 < y.size < SMALL and y.dtype in (np.float32, np.float64):
        shift = a.max() + b.max()
        if np.isfinite(shift):
            np.add(a, np.subtract(b, shift), out=y)
            if _normalize_small(y, axis):
                return
    np.add(a, b, out=y)
    if y.ndim == 0:
        y[...] = 1
        return
    softmax_exact(y, y, axis)


def _log_softmax(x: np.ndarray, y: np.ndarray, axis: int, ws) -> None:
    if x.ndim == 0:
        y[...] = 0
        return
    np.subtract(x, np.max(x, axis=axis, keepdims=True), out=y)
    tmp = carve(workspace(ws, y.nbytes), 0, y.shape, y.dtype)
    np.exp(y, out=tmp)
    s = np.sum(tmp, axis=axis, keepdims=True)
    np.log(s, out=s)
    np.subtract(y, s, out=y)


def _ws_tiling(types: list[TensorType], attrs: dict, target: Target) -> dict:
    return {"workspace": prod(types[0].shape) * np.dtype(types[0].dtype).itemsize}


@NUMPY.kernel("Softmax", 1)
class Softmax1:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        softmax(*_views(ins[0], outs[0], attrs, True))


@NUMPY.kernel("Softmax", 13)
class Softmax13:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        if attrs.get("fused_add"):
            y = outs[0]
            softmax_add(ins[0], ins[1], y, axis_plain(attrs.get("axis", -1), max(y.ndim, 1)))
            return
        softmax(*_views(ins[0], outs[0], attrs, False))


@NUMPY.kernel("LogSoftmax", 1)
class LogSoftmax1:
    tiling = staticmethod(_ws_tiling)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _log_softmax(*_views(ins[0], outs[0], attrs, True), ws)


@NUMPY.kernel("LogSoftmax", 13)
class LogSoftmax13:
    tiling = staticmethod(_ws_tiling)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        _log_softmax(*_views(ins[0], outs[0], attrs, False), ws)

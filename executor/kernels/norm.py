"""Normalisation kernels: BatchNormalization (inference), LRN, LayerNormalization,
InstanceNormalization."""
from __future__ import annotations

import numpy as np

from aircc.ops.shapes import axis_plain, prod
from aircc.ops.targets import Target

from .epilogue import epilogue, expanded
from .numpy_backend import NUMPY
from .scratch import align, carve, constant_column, view, workspace


@NUMPY.kernel("BatchNormalization", since=1)
class BatchNormalization:
    """Inference mode: y = (x - mean) / sqrt(var + eps) * scale + B, per channel (axis 1).

    Old versions' ``spatial=0`` (per-activation statistics of shape (C, D1, ...)) is
    handled by broadcasting; training mode (``training_mode=1`` or the optional
    running-statistics outputs) is rejected.
    """

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, scale, b, mean, var = ins[:5]
        y = outs[0]
        eps = float(attrs.get("epsilon", 1e-5))
        s = (scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps))
        shift = (b - mean * s).astype(y.dtype)
        s = s.astype(y.dtype)
        if s.ndim == 1:
            bshape = (-1,) + (1,) * (x.ndim - 2)
            s, shift = s.reshape(bshape), shift.reshape(bshape)
        np.multiply(x, s, out=y)
        np.add(y, shift, out=y)
        epilogue(y, None, attrs)


@NUMPY.kernel("LRN", since=1)
class LRN:
    """Local response normalisation across channels."""

    @staticmethod
    def tiling(types, attrs: dict, target: Target) -> dict:
        return {"workspace": prod(types[0].shape) * np.dtype(types[0].dtype).itemsize}

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        size = int(attrs["size"])
        alpha, beta = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75))
        bias = float(attrs.get("bias", 1.0))
        sq = carve(workspace(ws, x.nbytes), 0, x.shape, x.dtype)
        np.square(x, out=sq)
        c = x.shape[1]
        lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
        # y[:, i] = sum of sq[:, i-lo .. i+hi] (clipped), one shifted add per offset
        y[:, :] = sq
        for d in range(1, lo + 1):
            np.add(y[:, d:], sq[:, :c - d], out=y[:, d:])
        for d in range(1, hi + 1):
            np.add(y[:, :c - d], sq[:, d:], out=y[:, :c - d])
        np.multiply(y, y.dtype.type(alpha / size), out=y)
        np.add(y, y.dtype.type(bias), out=y)
        np.power(y, y.dtype.type(-beta), out=y)
        np.multiply(y, x, out=y)


def _normalize_rows(x2: np.ndarray, y2: np.ndarray, eps: float):
    """y2 = (x2 - mean) / sqrt(var + eps) row-wise; returns (mean, inv_std) of shape (R,).

    ufunc methods straight, no temporaries: LayerNorm on a few rows is all call
    overhead."""
    n = x2.shape[1]
    mean = np.add.reduce(x2, axis=1, dtype=np.float64 if x2.dtype == np.float64 else np.float32)
    if not n:
        return mean, 1.0 / np.sqrt(mean + eps)
    mean *= 1.0 / n
    np.subtract(x2, mean[:, None], out=y2)
    inv = np.einsum("ij,ij->i", y2, y2, dtype=mean.dtype)
    inv *= 1.0 / n
    inv += eps
    np.sqrt(inv, out=inv)
    np.reciprocal(inv, out=inv)
    return mean, inv


#: Rows up to this long take their mean and variance from a GEMM with a column of 1/n
#: (numpy's reductions over short rows are slow; BLAS accumulates a thousand
#: float32 terms with error far under the tolerance of the result).
GEMM_STATS_MAX = 1024


def _normalize_rows_gemm(x2: np.ndarray, y2: np.ndarray, eps: float):
    """y2 = (x2 - mean) / sqrt(var + eps) row-wise for float32 rows of at most
    ``GEMM_STATS_MAX``; returns (mean, std) as (R, 1) columns."""
    w = constant_column(x2.shape[1], 1.0 / x2.shape[1], np.float32)
    mean = x2 @ w
    np.subtract(x2, mean, out=y2)
    std = np.square(y2) @ w
    std += np.float32(eps)
    np.sqrt(std, out=std)
    np.divide(y2, std, out=y2)
    return mean, std


def _bound_layernorm(ins, outs, attrs, ws, constant):
    """LayerNormalization (float32, Y only, rows up to ``GEMM_STATS_MAX``) bound to its
    operands: the statistics as two GEMMs with a 1/n column into the workspace, and
    nothing but the arithmetic left per run.  None for any other use."""
    x, scale = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    y = outs[0]
    if any(o is not None for o in outs[1:]) or x.dtype != np.float32 or y.dtype != np.float32 \
            or not y.flags.c_contiguous or not x.flags.c_contiguous:
        return None
    axis = axis_plain(attrs.get("axis", -1), y.ndim)
    rows, cols = prod(y.shape[:axis]), prod(y.shape[axis:])
    if not 0 < cols <= GEMM_STATS_MAX or ws is None or ws.nbytes < _layernorm_ws(rows, cols):
        return None
    y2 = y.reshape(rows, cols)
    fused = attrs.get("fused_add")
    if fused:
        src = y2                                 # x + residual, written into y first
        left, right = x, ins[3]
        if x.shape != y.shape:
            left, right = right, left
        if left.shape != y.shape:
            return None
        right = expanded(right, y.shape, constant[3])
    elif x.shape != y.shape:
        return None
    else:
        src = x.reshape(rows, cols)
    tail = y.shape[axis:]
    flat = [None if p is None else np.broadcast_to(p, tail).reshape(cols) for p in (scale, b)]
    if any(f is not None and not c and not np.shares_memory(f, p)      # a copy made now would
           for f, p, c in zip(flat, (scale, b), constant[1:3])):      # miss the next run's values
        return None
    g = expanded(flat[0], (rows, cols), constant[1])
    bb = None if b is None else expanded(flat[1], (rows, cols), constant[2])
    w = constant_column(cols, 1.0 / cols, np.float32)
    sq = carve(ws, 0, (rows, cols), np.float32)
    stats = carve(ws, align(rows * cols * 4), (2, rows, 1), np.float32)
    mean, var = stats[0], stats[1]
    eps = np.float32(attrs.get("epsilon", 1e-5))
    add, sub, mul, div, mm, square, sqrt = (np.add, np.subtract, np.multiply, np.divide, np.matmul,
                                            np.square, np.sqrt)

    def run():
        if fused:
            add(left, right, y)
        mm(src, w, mean)
        sub(src, mean, y2)
        square(y2, sq)
        mm(sq, w, var)
        add(var, eps, var)
        sqrt(var, var)
        div(y2, var, y2)
        mul(y2, g, y2)
        if bb is not None:
            add(y2, bb, y2)
    return run


def _layernorm_ws(rows: int, cols: int) -> int:
    return align(rows * cols * 4) + align(2 * rows * 4)


@NUMPY.kernel("LayerNormalization", since=17)
class LayerNormalization:
    """Normalise over axes [axis, rank); outputs Y and optionally Mean, InvStdDev."""

    @staticmethod
    def tiling(types, attrs: dict, target: Target) -> dict:
        shape = types[0].shape
        if types[0].dtype != "float32" or not types[0].is_static:
            return {}
        if attrs.get("fused_add") and len(types) > 3 and types[3] is not None and types[3].is_static:
            shape = np.broadcast_shapes(shape, types[3].shape)
        axis = axis_plain(attrs.get("axis", -1), len(shape))
        rows, cols = prod(shape[:axis]), prod(shape[axis:])
        return {"workspace": _layernorm_ws(rows, cols)} if 0 < cols <= GEMM_STATS_MAX else {}

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        return _bound_layernorm(ins, outs, attrs, ws, constant)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, scale = ins[0], ins[1]
        b = ins[2] if len(ins) > 2 else None
        y = outs[0]
        if y.dtype == np.float16:           # stash_type 1: computed in float32, rounded once
            y32 = np.empty(y.shape, np.float32)
            LayerNormalization.kernel([None if a is None else a.astype(np.float32) for a in ins],
                                      [y32, *outs[1:]], attrs, tiling, ws)
            np.copyto(y, y32, casting="unsafe")
            return
        if attrs.get("fused_add"):          # the residual Add before it (fuse-add-layernorm)
            np.add(x, ins[3], out=y)
            x = y
        axis = axis_plain(attrs.get("axis", -1), x.ndim)
        rows = prod(x.shape[:axis])
        cols = prod(x.shape[axis:])
        y2 = view(y, (rows, cols))
        eps = float(attrs.get("epsilon", 1e-5))
        if x.dtype == np.float32 and 0 < cols <= GEMM_STATS_MAX:
            mean, std = _normalize_rows_gemm(x.reshape(rows, cols), y2, eps)
            inv = None if len(outs) < 3 or outs[2] is None else 1.0 / std
        else:
            mean, inv = _normalize_rows(x.reshape(rows, cols), y2, eps)
            np.multiply(y2, inv[:, None], out=y2)
        np.multiply(y, scale, out=y)
        if b is not None:
            np.add(y, b, out=y)
        if len(outs) > 1 and outs[1] is not None:
            view(outs[1], (-1,))[...] = mean.reshape(-1)
        if len(outs) > 2 and outs[2] is not None:
            view(outs[2], (-1,))[...] = inv.reshape(-1)


@NUMPY.kernel("InstanceNormalization", since=1)
class InstanceNormalization:
    """Per (sample, channel) normalisation over the spatial dims, then scale and B (and
    ``fused_relu``)."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, scale, b = ins[:3]
        y = outs[0]
        n, c = x.shape[:2]
        l = prod(x.shape[2:])
        y3 = view(y, (n, c, l))
        _, inv = _normalize_rows(x.reshape(n * c, l), view(y, (n * c, l)),
                                 float(attrs.get("epsilon", 1e-5)))
        factor = (inv.reshape(n, c) * scale[None, :]).astype(y.dtype)
        np.multiply(y3, factor[:, :, None], out=y3)
        np.add(y3, b.reshape(1, c, 1), out=y3)
        epilogue(y, None, attrs)                 # a fused Relu

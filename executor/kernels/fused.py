"""Kernels of the ops made by fusion passes (domain ``aircc``): ElementwiseChain,
SoftmaxMatMul and ChannelShuffle (:mod:`aircc.ops.defs.fused`)."""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.fused import CHAIN_BINARY_OPS, CHAIN_UNARY_OPS
from aircc.ops.shapes import prod
from aircc.ops.targets import Target
from aircc.ops.types import TensorType

from .elementwise import erf
from .epilogue import relu
from .gemm import permuted_views
from .numpy_backend import NUMPY
from .scratch import align, carve, constant_column, workspace
from .softmax import ROW_SUM_FLOOR, SMALL, softmax, softmax_add, softmax_exact


def _sigmoid(a, y):
    np.negative(a, out=y)
    np.exp(y, out=y)
    y += 1
    np.reciprocal(y, out=y)


#: op -> fn(a, out) and op -> ufunc(a, b, out=): what an ElementwiseChain step runs.
UNARY = {"Erf": erf, "Tanh": lambda a, y: np.tanh(a, out=y), "Relu": lambda a, y: relu(a, y),
         "Exp": lambda a, y: np.exp(a, out=y), "Neg": lambda a, y: np.negative(a, out=y),
         "Abs": lambda a, y: np.abs(a, out=y), "Sqrt": lambda a, y: np.sqrt(a, out=y),
         "Sigmoid": _sigmoid}
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}

if set(UNARY) != CHAIN_UNARY_OPS or set(BINARY) != CHAIN_BINARY_OPS:
    raise RuntimeError(f"ElementwiseChain kernels for {sorted(UNARY)} / {sorted(BINARY)} do not "
                       f"match its ops {sorted(CHAIN_UNARY_OPS)} / {sorted(CHAIN_BINARY_OPS)}")


@NUMPY.kernel("ElementwiseChain", 1, "aircc")
class ElementwiseChain:
    """``steps``: [op, operand name ("" for unary ops), 1 if the running value is the right
    operand]; inputs: the chain's first input, then the other operands by name order."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        value = ins[0]
        names = attrs.get("operands") or []
        table = dict(zip(names, ins))
        for k, (name, other, right) in enumerate(attrs["steps"]):
            if name in UNARY:
                UNARY[name](value, y)
            else:
                b = table[other]
                if right:
                    BINARY[name](b, value, out=y)
                else:
                    BINARY[name](value, b, out=y)
            value = y


#: The scores are exponentiated unshifted (no pass for their maximum); when a row's
#: sum reaches this (exp overflowed, or the product could) or is NaN, they are shifted
#: by their maximum and exponentiated again.
UNSHIFTED_SUM_MAX = 1e30


#: ln 2: scores in units of log2 times this are in natural units.
LN2 = np.float32(np.log(2.0))


def softmax_matmul(s: np.ndarray, m: np.ndarray | None, v: np.ndarray, y: np.ndarray,
                   e: np.ndarray, base2: bool = False, c: np.ndarray | None = None) -> None:
    """y = softmax(s + m, last axis) @ v (see :class:`SoftmaxMatMul`); ``e`` (the shape of
    s + m, not overlapping s) is scratch for the exponentials.  ``base2``: s is in units
    of log2 (the caller scaled it by log2 e, and numpy's exp2 is twice as fast as its
    exp), the mask in natural units, and s is scratch too (converted back in place where
    a path needs natural units).  ``c`` (y's shape, contiguous; optional): scratch for
    the unnormalised product when y is a strided view (a head transpose), so that the
    normalisation is the one pass that writes y."""
    shape = e.shape
    if base2 and (e.size < SMALL or (m is not None and (m.size > s.size or s.shape != shape))):
        np.multiply(s, LN2, out=s)
        base2 = False
    if e.size < SMALL:                  # all per-call cost: Softmax's short path, then
        if m is None:                   # the product
            softmax(s, e, e.ndim - 1)
        else:
            softmax_add(s, m, e, e.ndim - 1)
        np.matmul(e, v, out=y)
        return
    if m is not None and m.size > s.size:
        s, m = m, s
    if m is not None and m.ndim >= 2 and m.shape[-2] != 1 and s.shape == shape:
        head = m[..., :1, :]            # an expanded mask, the same for every query row:
        if np.array_equal(m, np.broadcast_to(head, m.shape)):   # one row per key after all
            m = head
    refill = None                       # puts the scores (mask added) back into e
    if m is not None and (s.shape != shape or (m.ndim >= 2 and m.shape[-2] != 1)):
        if base2:
            np.multiply(s, LN2, out=s)
            base2 = False
        refill = lambda s0=s, m0=m: np.add(s0, m0, out=e)   # noqa: E731
        refill()                        # not a mask per key: add it first
        s, m = e, None
    exp = np.exp2 if base2 else np.exp
    mtop = m.max() if m is not None else 0.0
    if np.isfinite(mtop) and e.size:
        if m is None:
            w = constant_column(e.shape[-1], 1, e.dtype)
            vw = v
        else:
            w = np.exp(m - mtop)
            w = np.swapaxes(w.reshape((1,) * (2 - w.ndim) + w.shape), -1, -2)
            vw = v * w
        with np.errstate(over="ignore", invalid="ignore"):
            exp(s, out=e)
            sums = np.matmul(e, w)
        if not sums.max() < UNSHIFTED_SUM_MAX:     # overflow (or NaN): shift, once
            if refill is not None:                 # e held the scores: put them back
                refill()
            top = s.max()
            if np.isfinite(top):
                np.subtract(s, top, out=e)
                exp(e, out=e)
                sums = np.matmul(e, w)
        if sums.min() >= ROW_SUM_FLOOR and sums.max() < UNSHIFTED_SUM_MAX:
            if c is None or y.flags.c_contiguous:
                np.matmul(e, vw, out=y)
                np.divide(y, sums, out=y)
            else:               # strided y: a contiguous product, then one pass into y
                np.matmul(e, vw, out=c)
                np.reciprocal(sums, out=sums)
                np.multiply(c, sums, out=y)
            return
    # exact: each row shifted by its own maximum
    if refill is not None:
        refill()
    else:
        if base2:
            np.multiply(s, LN2, out=e)
            s = e
        if m is not None:
            np.add(s, m, out=e)
        elif s is not e:
            np.copyto(e, s)
    softmax_exact(e, e, e.ndim - 1)
    np.matmul(e, v, out=y)


@NUMPY.kernel("SoftmaxMatMul", 1, "aircc")
class SoftmaxMatMul:
    """softmax(S (+ M), last axis) @ V with the normalisation deferred to the product.

    Inputs: S, V, optionally M (the fused mask: S + M broadcast).  ``perm_b`` /
    ``perm_y`` as for MatMul.  With E = exp(S) and w = exp(M - max M), softmax(S + M)
    @ V = (E @ (w' * V)) / (E @ w') when M is one row per key (w' its transpose, so
    the mask scales V's rows, not E's columns): the scores are exponentiated once,
    unshifted (see ``UNSHIFTED_SUM_MAX``), and never normalised; the division is over
    the small result.  A mask expanded over the query rows (the same row for each:
    checked, one comparison over the mask) is taken as its first row; any other
    mask is added first.  A row whose sum underflows (its scores far below the shift)
    sends the tensor the exact way: softmax with each row's own maximum, then the
    product.  Scores under Softmax's ``SMALL`` take its short path, then the product
    (there the launch saved is the gain)."""

    @staticmethod
    def tiling(types: list[TensorType], attrs: dict, target: Target) -> dict:
        if not all(t.is_static for t in types if t is not None):
            return {}
        shape = types[0].shape if len(types) < 3 or types[2] is None else \
            np.broadcast_shapes(types[0].shape, types[2].shape)
        return {"workspace": align(prod(shape) * np.dtype(types[0].dtype).itemsize),
                "shape": list(shape)}

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        s, m = ins[0], ins[2] if len(ins) > 2 else None
        _, v, y = permuted_views(attrs, None, ins[1], outs[0])
        shape = tuple(tiling["shape"]) if tiling else np.broadcast_shapes(
            s.shape, s.shape if m is None else m.shape)
        softmax_matmul(s, m, v, y, carve(workspace(ws, prod(shape) * s.itemsize), 0, shape, s.dtype))


def shuffle_views(x: np.ndarray, y: np.ndarray, axis: int, groups: int):
    """(source, destination) views of a channel shuffle as one 4-D copy: ``x`` as
    ``(outer, groups, C / groups, inner)`` swapped to ``y``'s ``(outer, C / groups,
    groups, inner)``."""
    axis %= x.ndim
    c = x.shape[axis]
    outer, inner = prod(x.shape[:axis]), prod(x.shape[axis + 1:])
    src = x.reshape(outer, groups, c // groups, inner).transpose(0, 2, 1, 3)
    return src, y.reshape(outer, c // groups, groups, inner)


@NUMPY.kernel("ChannelShuffle", 1, "aircc")
class ChannelShuffle:
    """Output index ``i * groups + g`` along ``axis`` reads input ``g * (C / groups) + i``."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        src, dst = shuffle_views(ins[0], outs[0], int(attrs.get("axis", 1)),
                                 int(attrs.get("groups", 1)))
        np.copyto(dst, src)

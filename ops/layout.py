"""Activation layouts: ops that run *channels-last*.

ONNX lays activations out channels-first, ``(N, C, H, W)``.  Convolutions run faster
on ``(N, H, W, C)`` (NHWC), so a kernel backend may ask the compiler to plan regions
of the graph channels-last (pass ``plan-layouts``).  Inside a region every value is
stored NHWC: its IR type has the *physical* shape ``(N, H, W, C)``, so the memory
planner sizes it as it lies; a spatial node (a Conv, a pool, a normalisation) carries
the attribute ``channels_last = 1``; elementwise ops need nothing (the same numbers
in the same order on every operand); a Concat's axis is moved.

Two things follow for everyone else:

- **shapes**: a ``channels_last`` node's shape rule is its op's ordinary rule seen
  through the permutation (:func:`infer`);
- **kernels**: a backend kernel that does not run channels-last itself
  (``KernelImpl.channels_last`` false) is run on channels-first copies of its
  activations (:func:`adapt_kernel`): right, if slower, so any backend can run any
  channels-last node.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

import numpy as np

from .backend import KernelImpl
from .registry import InferContext, OpDef
from .types import TensorType

CHANNELS_LAST = "channels_last"

#: Ops that may run channels-last, and which of their inputs are activations (stored
#: NHWC; the others, weights and per-channel vectors, keep their own layout).
SPATIAL_INPUTS: dict[str, tuple[int, ...]] = {
    "Conv": (0, 3),               # X, and the residual ``fused_add`` reads
    "ConvTranspose": (0,),
    "MaxPool": (0,), "AveragePool": (0,), "LpPool": (0,),
    "GlobalAveragePool": (0,), "GlobalMaxPool": (0,),
    "BatchNormalization": (0,), "InstanceNormalization": (0,),
    "Resize": (0,),               # its scales / sizes stay in channels-first order
}


def last_perm(rank: int) -> list[int]:
    """The axes of a channels-first value in channels-last order: ``[0, 2, ..., 1]``."""
    return [0, *range(2, rank), 1]


def first_perm(rank: int) -> list[int]:
    """The inverse of :func:`last_perm`: ``[0, rank - 1, 1, ..., rank - 2]``."""
    return [0, rank - 1, *range(1, rank - 1)]


def to_last(shape: tuple) -> tuple:
    """``(N, C, *S)`` -> ``(N, *S, C)``."""
    return (shape[0], *shape[2:], shape[1])


def to_first(shape: tuple) -> tuple:
    """``(N, *S, C)`` -> ``(N, C, *S)``."""
    return (shape[0], shape[-1], *shape[1:-1])


def last_axis(axis: int, rank: int) -> int:
    """Where channels-first ``axis`` lies once the value is channels-last."""
    axis = axis % rank
    return rank - 1 if axis == 1 else axis - 1 if axis > 1 else 0


def is_channels_last(attrs: dict) -> bool:
    return bool(attrs.get(CHANNELS_LAST))


def infer(definition: OpDef, ctx: InferContext) -> list[TensorType]:
    """``definition``'s shape rule for this node, channels-last or not."""
    if not ctx.attrs.get(CHANNELS_LAST):
        return definition.infer(ctx)
    spatial = SPATIAL_INPUTS.get(ctx.op, ())
    types = [_first(t) if j in spatial else t for j, t in enumerate(ctx.types)]
    attrs = {k: v for k, v in ctx.attrs.items() if k != CHANNELS_LAST}
    out = definition.infer(InferContext(types, attrs, ctx.values, ctx.node, ctx.op,
                                        ctx.num_outputs))
    return [_last(t) for t in out]


def _first(t: Optional[TensorType]) -> Optional[TensorType]:
    if t is None or t.shape is None or len(t.shape) < 3:
        return t
    return TensorType(t.dtype, to_first(t.shape))


def _last(t: Optional[TensorType]) -> Optional[TensorType]:
    if t is None or t.shape is None or len(t.shape) < 3:
        return t
    return TensorType(t.dtype, to_last(t.shape))


def adapt_kernel(impl: KernelImpl, attrs: dict) -> KernelImpl:
    """``impl`` for a node with these ``attrs``: as it is, unless the node runs
    channels-last and the kernel does not (then through channels-first copies)."""
    if not attrs.get(CHANNELS_LAST) or impl.channels_last:
        return impl
    return replace(impl, kernel=_first_kernel(impl.op, impl.kernel),
                   tiling=_first_tiling(impl.op, impl.tiling), prepare=None, channels_last=True)


def _first_tiling(op: str, tiling: Optional[Callable]) -> Optional[Callable]:
    if tiling is None:
        return None
    spatial = SPATIAL_INPUTS.get(op, ())

    def tile(types, attrs, target):
        plain = {k: v for k, v in attrs.items() if k != CHANNELS_LAST}
        return tiling([_first(t) if j in spatial else t for j, t in enumerate(types)], plain, target)
    return tile


def _first_kernel(op: str, kernel: Callable) -> Callable:
    spatial = SPATIAL_INPUTS.get(op, ())

    def run(ins, outs, attrs, tiling, ws):
        plain = {k: v for k, v in attrs.items() if k != CHANNELS_LAST}
        first = [np.ascontiguousarray(np.moveaxis(x, -1, 1)) if j in spatial and x is not None
                 and x.ndim >= 3 else x for j, x in enumerate(ins)]
        tmp = [None if y is None else np.empty(to_first(y.shape) if y.ndim >= 3 else y.shape,
                                               y.dtype) for y in outs]
        kernel(first, tmp, plain, tiling, ws)
        for y, t in zip(outs, tmp):
            if y is not None:
                np.copyto(y, np.moveaxis(t, 1, -1) if y.ndim >= 3 else t)
    return run

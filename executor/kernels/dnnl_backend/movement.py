"""Data movement on oneDNN: Transpose and ChannelShuffle, each one reorder.

A transpose is a copy between two layouts of the same numbers: the source seen with the
output's dims (its strides permuted), the output dense.  Axes that stay neighbours in
the same order are merged first (an NCHW -> NHWC reorder of ``(1, 64, 56, 56)`` is the
2-D ``(64, 3136) -> (3136, 64)``), which is the case oneDNN's JIT reorders are fastest
at.  A reorder oneDNN would run on its reference kernel, or a small tensor (where
numpy's one copy is as fast as the call), stays with numpy.  A ChannelShuffle is the
transpose of its input seen as ``(outer, groups, C / groups, inner)``.
"""
from __future__ import annotations

import numpy as np

from aircc.executor.kernels.dnnl.attr import Attr
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.memory import MemoryDesc
from aircc.executor.kernels.dnnl.ops import reorder
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc

from aircc.ops import TensorType
from aircc.ops.shapes import prod

from . import DNNL
from .common import NotForDnnl, bind, cached_pd, dnnl_or_twin, storage

#: Element types whose transposes run on oneDNN (its reorders move any of its types).
DTYPES = ("float32", "int32", "int8", "uint8", "float16")
#: Below this many elements numpy's one copy is as fast as a oneDNN call.
SMALL = 4096


def merged_axes(shape: tuple[int, ...], perm: list[int]) -> tuple[tuple[int, ...], list[int]]:
    """``(shape, perm)`` with axes of size 1 dropped and input axes that stay adjacent and
    in order in ``perm`` merged: the same copy over the fewest dims."""
    keep = [a for a in range(len(shape)) if shape[a] != 1]
    perm = [p for p in perm if shape[p] != 1]
    rank_of = {a: i for i, a in enumerate(keep)}
    runs: list[list[int]] = []                    # runs of input axes, in output order
    for p in perm:
        if runs and rank_of[p] == rank_of[runs[-1][-1]] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    by_input = sorted(runs, key=lambda r: r[0])
    dims = tuple(int(np.prod([shape[a] for a in r])) for r in by_input)
    return dims, [by_input.index(r) for r in runs]


def _dense_strides(dims: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for d in reversed(dims):
        strides.append(step)
        step *= d
    return strides[::-1]


def plan_transpose(x: TensorType, perm: list[int]) -> PrimitiveDesc:
    """The reorder that writes ``x`` transposed by ``perm`` densely."""
    if x.dtype not in DTYPES:
        raise NotForDnnl(f"{x.dtype} data")
    if x.numel < SMALL:
        raise NotForDnnl(f"{x.numel} elements: numpy's one copy is as fast")
    dims, order = merged_axes(tuple(int(d) for d in x.shape), perm)
    if len(dims) < 2:
        raise NotForDnnl("a transpose that moves no element")
    in_strides = _dense_strides(dims)
    out_dims = tuple(dims[p] for p in order)

    def make():
        src = MemoryDesc.from_strides(out_dims, x.dtype, [in_strides[p] for p in order])
        dst = MemoryDesc.from_tag(out_dims, x.dtype, "abcdef"[:len(out_dims)])
        return reorder(src, dst, attr=Attr((), scratchpad="user"))
    return cached_pd(("Transpose", x.dtype, tuple(x.shape), tuple(perm)), make,
                     8.0 * x.numel)


def bind_copy(pd: PrimitiveDesc, ins, outs, ws):
    x, y = ins[0], outs[0]
    if not (x.flags.c_contiguous and y.flags.c_contiguous):
        raise NotForDnnl("a strided operand")
    return bind(pd, {Arg.src: storage(x, pd.arg_md(Arg.src)),
                     Arg.dst: storage(y, pd.arg_md(Arg.dst))}, ws)


@DNNL.kernel("Transpose", 1)
@dnnl_or_twin("Transpose", 1)
class Transpose:
    @staticmethod
    def plan(types: list, attrs: dict) -> PrimitiveDesc:
        rank = len(types[0].shape)
        return plan_transpose(types[0], [int(p) % rank for p in
                                         attrs.get("perm", range(rank - 1, -1, -1))])

    @staticmethod
    def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
        return bind_copy(pd, ins, outs, ws)


@DNNL.kernel("ChannelShuffle", 1, "aircc")
@dnnl_or_twin("ChannelShuffle", 1, "aircc")
class ChannelShuffle:
    @staticmethod
    def plan(types: list, attrs: dict) -> PrimitiveDesc:
        x = types[0]
        axis = int(attrs.get("axis", 1)) % len(x.shape)
        groups = int(attrs.get("groups", 1))
        c = int(x.shape[axis])
        outer, inner = prod(x.shape[:axis]), prod(x.shape[axis + 1:])
        return plan_transpose(TensorType(x.dtype, (outer, groups, c // groups, inner)),
                              [0, 2, 1, 3])

    @staticmethod
    def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
        return bind_copy(pd, ins, outs, ws)

"""Matrix products on oneDNN: MatMul (batched, broadcast, read and written through the
head permutations ``perm_a`` / ``perm_b`` / ``perm_y`` as strided views) and Gemm.

The epilogue the compiler fused (``fused_scale``, ``fused_add``, ``fused_relu``) runs as
post-ops in that order (where the operands hold NaN or an infinity, a Relu and activation
that keep them: :mod:`.nan`).  A constant weight matrix (one for the whole batch) that does not
lie row by row, such as a transposed Linear weight (``Gemm`` with ``transB``, as torch
exports them), is reordered once, when the task is bound, into the layout the
implementation packs it in (the primitive ``packed``, made beside the plain one; the
tiling's workspace covers both; one layout per weight shape whatever the rows, so one
packed copy per weight, in the model's prepared device memory).  Read as it lies, it is
repacked by every call: 357 against 32 us for a [1, 1024] x [1024, 1000] product on 2
threads.  A row-major weight is read as it lies (packing it would gain 1.1-3x on a
batch of one, for a second copy of the weights in device memory), and so is one that
changes between runs.
"""
from __future__ import annotations

import functools

import numpy as np

from aircc.errors import DeviceOutOfMemoryError
from aircc.executor.kernels.dnnl.attr import Attr, Binary, Eltwise
from aircc.executor.kernels.dnnl.enums import Arg, post_op_arg
from aircc.executor.kernels.dnnl.library import DnnlError, using_threads
from aircc.executor.kernels.dnnl.memory import Memory, MemoryDesc, md_of
from aircc.executor.kernels.dnnl.ops import matmul
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.executor.kernels.gemm import permuted_views
from aircc.ops import TensorType
from aircc.ops.precision import COMPUTE_DTYPE

from . import DNNL
from .common import (BF16, NotForDnnl, activation_after, activation_post_op, bf16_source, bind,
                     cached_pd, convert_to_bf16, dnnl_or_twin, reordered_constant, storage,
                     then, unfaithful)
from .nan import guarded, keeps_nan_always, norm, relu_ops

FLOATS = ("float32",)


def _shell(t) -> np.ndarray:
    """A dense array of ``t``'s shape and dtype without its bytes (strides only)."""
    dt = np.dtype(t.dtype)
    shape = tuple(int(d) for d in t.shape)
    strides, step = [], dt.itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return np.lib.stride_tricks.as_strided(np.zeros(1, dt), shape, tuple(reversed(strides)))


def _padded(md: MemoryDesc, rank: int) -> MemoryDesc:
    """``md`` with leading dims of 1 up to ``rank`` (oneDNN's operands share one rank)."""
    extra = rank - len(md.dims)
    if extra <= 0:
        return md
    strides = md.strides or ()
    lead = (strides[0] * md.dims[0]) if strides else 1
    return MemoryDesc.from_strides((1,) * extra + md.dims, md.dtype,
                                   (max(lead, 1),) * extra + tuple(strides))


def _views(a: np.ndarray, b: np.ndarray, y: np.ndarray, attrs: dict):
    a, b, y = permuted_views(attrs, a, b, y)
    if a.ndim < 2 or b.ndim < 2:
        raise NotForDnnl("a 1-D operand")
    return a, b, y


def _plan(a: np.ndarray, b: np.ndarray, y: np.ndarray, addend, attrs: dict,
          key: tuple, keep_nan: bool = False) -> PrimitiveDesc:
    if a.dtype.name not in FLOATS or b.dtype != a.dtype:
        raise NotForDnnl(f"{a.dtype} @ {b.dtype}")
    rank = y.ndim
    src, wei, dst = (_padded(md_of(v), rank) for v in (a, b, y))
    bf16 = attrs.get(COMPUTE_DTYPE) == "bfloat16"
    keep_nan = keep_nan or keeps_nan_always(y.size, attrs)
    if bf16:        # the activation converted into a dense copy, the weights as it packs them
        src = _padded(md_of(_shell(TensorType("bfloat16", a.shape))), rank)
        wei = MemoryDesc.from_tag((1,) * (rank - b.ndim) + b.shape, BF16, "any")
    ops = []
    if "fused_scale" in attrs:
        ops.append(Eltwise("linear", float(attrs["fused_scale"]), 0.0))
    if addend is not None:
        if not y.flags.c_contiguous:      # oneDNN 3.2 crashes (SIGSEGV) on this
            raise NotForDnnl("a binary post-op with a strided destination")
        if addend.ndim > rank or addend.dtype != y.dtype or any(
                d not in (1, n) for d, n in zip(addend.shape[::-1], y.shape[::-1])):
            raise NotForDnnl(f"an addend of shape {addend.shape} for {y.shape}")
        ops.append(Binary("add", _padded(md_of(addend), rank)))
    if attrs.get("fused_relu"):
        ops += relu_ops(keep_nan)
    if attrs.get("fused_relu") or unfaithful(attrs):
        key += (keep_nan,)
    ops += activation_post_op(attrs, keep_nan)
    work = 2.0 * y.size * a.shape[-1]
    pd = cached_pd(key, lambda: matmul(src, wei, dst, attr=Attr(ops, scratchpad="user")), work)
    if bf16:
        pd.packed = None
        convert_to_bf16(pd, _padded(md_of(a), rank))
        return pd
    if not hasattr(pd, "packed"):
        pd.packed, layout = None, _packed_layout(tuple(wei.dims), np.dtype(wei.dtype).str)
        if layout is not None and layout != wei:
            try:
                packed = cached_pd(key + ("packed",), lambda: matmul(
                    src, layout, dst, attr=Attr(ops, scratchpad="user")), work)
            except DnnlError:              # no implementation takes it for this product
                packed = None
            if packed is not None and not packed.is_reference:
                pd.packed = packed
                pd.workspace = max(pd.scratchpad_size, packed.scratchpad_size)
    return pd


#: The rows of the product that picks a weight matrix's packed layout (see
#: :func:`_packed_layout`).
LAYOUT_ROWS = 64


@functools.lru_cache(maxsize=256)
def _packed_layout(dims: tuple, dtype: str) -> MemoryDesc | None:
    """The layout oneDNN packs a [..., K, N] weight matrix in (one for the whole batch:
    leading dims of 1), picked once per shape from a product of ``LAYOUT_ROWS`` rows and
    used for products of any number of rows, so that a dynamic model keeps one packed
    copy of each weight, not one per input shape; None for batched weights."""
    if any(d != 1 for d in dims[:-2]):
        return None
    k, n = dims[-2], dims[-1]
    lead = (1,) * (len(dims) - 2)
    try:
        with using_threads(1):
            probe = matmul(MemoryDesc.from_tag(lead + (LAYOUT_ROWS, k), dtype),
                           MemoryDesc.from_tag(dims, dtype, "any"),
                           MemoryDesc.from_tag(lead + (LAYOUT_ROWS, n), dtype))
    except DnnlError:
        return None
    return None if probe.is_reference else probe.weights_md()


def _weights(pd: PrimitiveDesc, b: np.ndarray, constant: bool, prepared):
    """(the primitive to run, Memory of its weights): the packed one with ``b`` reordered
    once into prepared device memory when ``b`` is constant and does not lie row by row
    (a transposed Linear weight), else ``pd`` reading it as it lies.  A device without
    room for the packed copy reads it as it lies too."""
    packed = getattr(pd, "packed", None)
    plain = pd.weights_md()
    if getattr(pd, "to_bf16", None) is not None:     # bfloat16: converted once, as it packs them
        if not constant:
            raise NotForDnnl("bfloat16 weights that change between runs")
        as_lies = _padded(md_of(b), len(plain.dims))
        return pd, reordered_constant(storage_view(b, as_lies), plain, b, prepared)
    if not constant or packed is None or b.flags.c_contiguous:
        return pd, storage_view(b, plain)
    try:
        return packed, reordered_constant(storage_view(b, plain), packed.weights_md(), b, prepared)
    except DeviceOutOfMemoryError:
        return pd, storage_view(b, plain)


def _key(kind: str, views: tuple, attrs: dict) -> tuple:
    return (kind, tuple(None if v is None else (v.dtype.str, v.shape, v.strides) for v in views),
            repr(sorted((k, v) for k, v in attrs.items() if k != "weight_layout")))


@DNNL.kernel("MatMul", 1)
@dnnl_or_twin("MatMul", 1)
class MatMul:
    FUSED = ("fused_scale", "fused_add", "fused_relu", "fused_activation")

    @staticmethod
    def plan(types: list, attrs: dict, keep_nan: bool = False) -> PrimitiveDesc:
        """The primitive; ``keep_nan``: its epilogue one that keeps NaN (:mod:`.nan`)."""
        a, b, _ = permuted_views(attrs, _shell(types[0]), _shell(types[1]), _shell(types[0]))
        if a.ndim < 2 or b.ndim < 2:
            raise NotForDnnl("a 1-D operand")
        logical = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
        perm_y = attrs.get("perm_y")
        stored = tuple(logical[i] for i in perm_y) if perm_y else logical
        a, b, y = _views(_shell(types[0]), _shell(types[1]),
                         _shell(TensorType(types[0].dtype, stored)), attrs)
        addend = _shell(types[2]) if len(types) > 2 and types[2] is not None else None
        return _plan(a, b, y, addend, attrs, _key("matmul", (a, b, y, addend), attrs), keep_nan)

    @staticmethod
    def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
        """``pd`` bound to the operands; with a fused Relu or an :func:`~.common.unfaithful`
        activation, the twin that keeps NaN runs instead when the operands could make one
        (:func:`~.nan.relu_guard`)."""
        return guarded(_bound, MatMul.plan, pd, ins, outs, attrs, ws, constant, prepared,
                       product_bound(ins, constant, attrs))


def product_bound(ins: list, constant: list, attrs: dict):
    """A call bounding every entry of (a @ b) * scale + addend in magnitude by |a| |b| |scale|
    + |addend| (2-norms), the constants' part worked out once."""
    a, b = ins[0], ins[1]
    addend = ins[2] if len(ins) > 2 else None
    scale = abs(float(attrs.get("fused_scale", 1.0)))
    b_norm = norm(b) if constant[1] else None
    c_norm = norm(addend) if addend is not None and constant[2] else None

    def bound() -> float:
        total = norm(a) * (norm(b) if b_norm is None else b_norm) * scale
        if addend is not None:
            total += norm(addend) if c_norm is None else c_norm
        return total
    return bound


def _bound(pd, ins, outs, attrs, ws, constant, prepared, keep_nan=False):
    a, b, y = _views(ins[0], ins[1], outs[0], attrs)
    addend = ins[2] if len(ins) > 2 and ins[2] is not None else None
    pd, weights = _weights(pd, b, constant[1], prepared)
    to_bf16, src, ws = _source(pd, a, ws)
    args = {Arg.src: src, Arg.weights: weights, Arg.dst: storage_view(y, pd.dst_md())}
    if addend is not None:
        args[post_op_arg(1 if "fused_scale" in attrs else 0)] = storage_view(
            addend, pd.arg_md(post_op_arg(1 if "fused_scale" in attrs else 0)))
    return then(to_bf16, bind(pd, args, ws), activation_after(attrs, outs, keep_nan))


def _source(pd, a: np.ndarray, ws):
    """:func:`~.common.bf16_source` of ``a`` as it lies."""
    converts = getattr(pd, "to_bf16", None)
    return bf16_source(pd, storage_view(a, (converts or pd).src_md()), ws)


def storage_view(view: np.ndarray, md: MemoryDesc) -> Memory:
    """Memory of ``md`` at the view's first element (its strides are the descriptor's)."""
    return Memory(md, view.ctypes.data, view)


@DNNL.kernel("Gemm", 1)
@dnnl_or_twin("Gemm", 1)
class Gemm:
    """alpha * A' @ B' + C (beta 1, C broadcast), C as a binary post-op."""

    @staticmethod
    def plan(types: list, attrs: dict) -> PrimitiveDesc:
        a, b = _gemm_views(_shell(types[0]), _shell(types[1]), attrs)
        y = _shell(TensorType(types[0].dtype, (a.shape[0], b.shape[1])))
        c = _shell(types[2]) if len(types) > 2 and types[2] is not None else None
        return _gemm_plan(a, b, y, c, attrs)

    @staticmethod
    def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
        a, b = _gemm_views(ins[0], ins[1], attrs)
        c = ins[2] if len(ins) > 2 and ins[2] is not None else None
        pd, weights = _weights(pd, b, constant[1], prepared)
        to_bf16, src, ws = _source(pd, a, ws)
        args = {Arg.src: src, Arg.weights: weights, Arg.dst: storage(outs[0], pd.dst_md())}
        if c is not None:
            index = 1 if float(attrs.get("alpha", 1.0)) != 1.0 else 0
            args[post_op_arg(index)] = storage_view(c, pd.arg_md(post_op_arg(index)))
        return then(to_bf16, bind(pd, args, ws))


def _gemm_views(a: np.ndarray, b: np.ndarray, attrs: dict):
    if a.ndim != 2 or b.ndim != 2:
        raise NotForDnnl("Gemm operands that are not matrices")
    return (a.T if attrs.get("transA") else a), (b.T if attrs.get("transB") else b)


def _gemm_plan(a, b, y, c, attrs) -> PrimitiveDesc:
    if float(attrs.get("beta", 1.0)) != 1.0 and c is not None:
        raise NotForDnnl("beta other than 1")
    scaled = dict(attrs)
    alpha = float(attrs.get("alpha", 1.0))
    if alpha != 1.0:
        scaled["fused_scale"] = alpha
    if c is not None and c.ndim < 2:
        c = c.reshape((1,) * (2 - c.ndim) + c.shape)
    return _plan(a, b, y, c, scaled, _key("gemm", (a, b, y, c), attrs))

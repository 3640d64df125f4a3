"""Convolutions on oneDNN: Conv (any groups, dilations, pads) and ConvTranspose.

The activations are as the graph lays them out (channels-last in a region the compiler
planned so, else ONNX's); the weights are ONNX's in the file and reordered once, when
the task is bound, into the layout the implementation wants (blocked for the AVX-512
kernels), kept in device memory with the model.  The bias, a residual (``fused_add``)
and the activation (``fused_relu``, ``fused_activation``) run as the primitive's post-ops,
on its output while it is in cache; where the operands hold NaN or an infinity, ones that
keep them (:mod:`.nan`).
"""
from __future__ import annotations

import numpy as np

from aircc.executor.kernels.dnnl.attr import Attr, Binary, Sum
from aircc.executor.kernels.dnnl.enums import Arg, post_op_arg
from aircc.executor.kernels.dnnl.memory import MemoryDesc
from aircc.executor.kernels.dnnl.ops import conv_weights_dims, convolution, deconvolution
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.ops import TensorType
from aircc.ops.precision import BF16_IO, COMPUTE_DTYPE, OUTPUT_DTYPE
from aircc.ops.defs.conv import OIHW, window_params
from aircc.ops.defs.spatial import conv_transpose_geometry
from aircc.ops.layout import is_channels_last
from aircc.ops.shapes import window_geometry

from . import DNNL, winograd
from .common import (BF16, NotForDnnl, act, activation_after, activation_post_op, bf16_source,
                     bind, cached_pd, convert_to_bf16, dnnl_or_twin, logical_md,
                     reordered_constant, storage, then, type_md)
from .nan import guarded, keeps_nan_always, norm, relu_ops

FLOATS = ("float32",)
SPATIAL_RANKS = (1, 2, 3)


def onnx_weights_md(shape: tuple, dtype, groups: int, transposed: bool) -> MemoryDesc:
    """ONNX's weights as they lie, seen with oneDNN's dims ``(G?, O/G, I/G, *k)``: a Conv's
    are ``(O, I/G, *k)``, a ConvTranspose's ``(I, O/G, *k)``."""
    k = 1
    for d in shape[2:]:
        k *= int(d)
    spatial = [1] * len(shape[2:])
    for i in range(len(spatial) - 2, -1, -1):
        spatial[i] = spatial[i + 1] * int(shape[3 + i])
    if transposed:
        i_all, o_g = int(shape[0]), int(shape[1])
        i_g = i_all // groups
        dims, strides = [o_g, i_g], [k, o_g * k]
    else:
        o_all, i_g = int(shape[0]), int(shape[1])
        o_g = o_all // groups
        dims, strides = [o_g, i_g], [i_g * k, k]
    if groups > 1:
        dims, strides = [groups, *dims], [o_g * i_g * k, *strides]
    return MemoryDesc.from_strides([*dims, *(int(d) for d in shape[2:])], dtype,
                                   [*strides, *spatial])


def post_ops(attrs: dict, residual: MemoryDesc | None, channels_last: bool,
             keep_nan: bool = False) -> list:
    """The fused epilogue as post-ops: + residual (of descriptor ``residual``), then Relu
    (:func:`~.common.relu_ops`).  Channels-first, the residual is copied into the output
    first and summed there (a binary post-op on NCHW runs oneDNN's reference kernel)."""
    ops = []
    if residual is not None:
        ops.append(Binary("add", residual) if channels_last else Sum())
    if attrs.get("fused_relu"):
        ops += relu_ops(keep_nan)
    return ops + activation_post_op(attrs, keep_nan)


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= int(v)
    return n


def _key(kind: str, types: list, attrs: dict) -> tuple:
    shapes = tuple(None if t is None else (t.dtype, tuple(t.shape)) for t in types)
    return (kind, shapes, repr(sorted(attrs.items())))


@DNNL.kernel("Conv", 1, channels_last=True)
@winograd.offered
@dnnl_or_twin("Conv", 1)
class Conv:
    """oneDNN convolution (direct), weights reordered at bind time, epilogue as post-ops;
    3x3 stride-1 convs of the shapes where it pays run in the Winograd mode instead
    (:mod:`.winograd`)."""

    FUSED = ("fused_add", "fused_relu", "fused_activation")

    @staticmethod
    def plan(types: list, attrs: dict, keep_nan: bool = False) -> PrimitiveDesc:
        """The primitive; ``keep_nan``: its epilogue one that keeps NaN (:mod:`.nan`).  In
        bfloat16 (``compute_dtype``): the activation and the weights bfloat16, the output
        and the epilogue float32, and ``pd.to_bf16`` the reorder that converts the
        activation into the head of the workspace (:func:`~.common.bf16_source`)."""
        x, w = types[0], types[1]
        bf16 = attrs.get(COMPUTE_DTYPE) == "bfloat16"
        if x.dtype not in (BF16_IO if bf16 else FLOATS) or \
                attrs.get("weight_layout", OIHW) != OIHW:
            raise NotForDnnl(f"{x.dtype} data or weight layout {attrs.get('weight_layout')}")
        cl = is_channels_last(attrs)
        xs = (x.shape[0], x.shape[-1], *x.shape[1:-1]) if cl else tuple(x.shape)
        if len(xs) - 2 not in SPATIAL_RANKS:
            raise NotForDnnl(f"{len(xs) - 2}-D convolution")
        nsp, kernel, strides, dilations, pads, auto_pad = window_params(xs, w.shape, attrs)
        out, pb, pe = window_geometry(xs[2:], kernel, strides, dilations, pads, auto_pad)
        g = int(attrs.get("group", 1))
        o = int(w.shape[0])
        keep_nan = keep_nan or keeps_nan_always(
            xs[0] * o * _prod(out), attrs, any(t is not None and t.dtype == "bfloat16"
                                               for t in (types[0], *types[3:4])))
        compute = BF16 if bf16 else np.dtype(x.dtype)
        written = attrs.get(OUTPUT_DTYPE, "float32") if bf16 else x.dtype

        def make():
            src = logical_md(compute, x.shape, cl)
            dst_shape = (xs[0], *out, o) if cl else (xs[0], o, *out)
            dst = type_md(TensorType(written, dst_shape), cl)
            wmd = MemoryDesc.from_tag(conv_weights_dims(o, xs[1], kernel, g), compute, "any")
            bias = MemoryDesc.from_tag((o,), types[2].dtype, "a") \
                if len(types) > 2 and types[2] else None
            residual = type_md(TensorType(types[3].dtype, dst_shape), cl) \
                if len(types) > 3 and types[3] is not None else None
            attr = Attr(post_ops(attrs, residual, cl, keep_nan), scratchpad="user")
            return convolution(src, wmd, dst, bias, strides=strides, pads_begin=pb, pads_end=pe,
                               dilations=dilations, attr=attr)
        work = 2.0 * xs[0] * _prod(out) * o * (xs[1] // g) * _prod(kernel)
        pd = cached_pd(_key("conv", types, attrs) + (keep_nan,), make, work)
        if bf16 and x.dtype == "float32":
            convert_to_bf16(pd, type_md(x, cl))
        return pd

    @staticmethod
    def bind_to(pd: PrimitiveDesc, ins, outs, attrs, ws, constant, prepared):
        """``pd`` bound to the operands; with a fused Relu or an :func:`~.common.unfaithful`
        activation, the twin that keeps NaN runs instead when the operands could make one
        (:func:`~.nan.relu_guard`)."""
        chained = any(a is not None and a.dtype == BF16 for a in (ins[0], *ins[3:4]))
        return guarded(_bound, Conv.plan, pd, ins, outs, attrs, ws, constant, prepared,
                       None if chained else operand_bound(ins, constant))


def operand_bound(ins: list, constant: list):
    """A call bounding every output of Conv(x, w, b) + residual in magnitude by |x| |w| +
    max |b| + |residual| (2-norms), the constants' part worked out once."""
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    r = ins[3] if len(ins) > 3 else None
    w_norm = norm(w) if constant[1] else None
    b_max = None if b is None or not constant[2] else float(np.max(np.abs(b)))

    def bound() -> float:
        total = norm(x) * (norm(w) if w_norm is None else w_norm)
        if b is not None:
            total += float(np.max(np.abs(b))) if b_max is None else b_max
        return total if r is None else total + norm(r)
    return bound


def _bound(pd: PrimitiveDesc, ins, outs, attrs, ws, constant, prepared, keep_nan=False):
    x, w, y = ins[0], ins[1], outs[0]
    cl = is_channels_last(attrs)
    plain = onnx_weights_md(w.shape, w.dtype, int(attrs.get("group", 1)), transposed=False)
    weights = _weights(pd, w, plain, constant[1], prepared)
    to_bf16, src, ws = bf16_source(pd, act(x, cl), ws)
    args = {Arg.src: src, Arg.weights: weights, Arg.dst: act(y, cl)}
    if len(ins) > 2 and ins[2] is not None:
        args[Arg.bias] = ins[2]
    residual = ins[3] if len(ins) > 3 else None
    if residual is not None and cl:
        args[post_op_arg(0)] = act(residual, cl)
    bound = then(to_bf16, bind(pd, args, ws), activation_after(attrs, outs, keep_nan))
    if residual is None or cl:
        return bound

    def summed(copy=np.copyto):
        copy(y, residual)
        bound()
    return summed


def _weights(pd: PrimitiveDesc, w: np.ndarray, plain: MemoryDesc, constant: bool, prepared):
    """The weights as the implementation wants them: reordered once into device memory
    when they are constant, else read as they lie (then the implementation must take
    them plain)."""
    want = pd.weights_md()
    if want == plain or not constant:
        if want != plain:
            raise NotForDnnl("weights that change between runs in a blocked layout")
        return storage(w, plain)
    return reordered_constant(storage(w, plain), want, w, prepared)


@DNNL.kernel("ConvTranspose", 1, channels_last=True)
@dnnl_or_twin("ConvTranspose", 1)
class ConvTranspose:
    """oneDNN deconvolution; ONNX's (I, O/G, *k) weights reordered at bind time."""

    @staticmethod
    def plan(types: list, attrs: dict) -> PrimitiveDesc:
        x, w = types[0], types[1]
        if x.dtype not in FLOATS:
            raise NotForDnnl(f"{x.dtype} data")
        cl = is_channels_last(attrs)
        xs = (x.shape[0], x.shape[-1], *x.shape[1:-1]) if cl else tuple(x.shape)
        nsp = len(xs) - 2
        if nsp not in SPATIAL_RANKS:
            raise NotForDnnl(f"{nsp}-D transposed convolution")
        g = int(attrs.get("group", 1))
        kernel = list(attrs.get("kernel_shape") or w.shape[2:])
        out, pb, _ = conv_transpose_geometry(xs[2:], kernel, attrs)
        o = int(w.shape[1]) * g
        strides = list(attrs.get("strides") or [1] * nsp)
        dilations = list(attrs.get("dilations") or [1] * nsp)
        # oneDNN's output size has no output_padding term: it goes into the end pads
        pe = [(xs[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - pb[i] - out[i]
              for i in range(nsp)]

        def make():
            src = type_md(x, cl)
            dst = type_md(TensorType(x.dtype, (xs[0], *out, o) if cl else (xs[0], o, *out)), cl)
            wmd = MemoryDesc.from_tag(conv_weights_dims(o, xs[1], kernel, g), x.dtype, "any")
            bias = MemoryDesc.from_tag((o,), x.dtype, "a") if len(types) > 2 and types[2] else None
            return deconvolution(src, wmd, dst, bias, strides=strides, pads_begin=pb,
                                 pads_end=pe, dilations=dilations,
                                 attr=Attr((), scratchpad="user"))
        work = 2.0 * xs[0] * _prod(xs[2:]) * xs[1] * (o // g) * _prod(kernel)
        return cached_pd(_key("deconv", types, attrs), make, work)

    @staticmethod
    def bind_to(pd: PrimitiveDesc, ins, outs, attrs, ws, constant, prepared):
        x, w, y = ins[0], ins[1], outs[0]
        plain = onnx_weights_md(w.shape, w.dtype, int(attrs.get("group", 1)), transposed=True)
        cl = is_channels_last(attrs)
        args = {Arg.src: act(x, cl), Arg.weights: _weights(pd, w, plain, constant[1], prepared),
                Arg.dst: act(y, cl)}
        if len(ins) > 2 and ins[2] is not None:
            args[Arg.bias] = ins[2]
        return bind(pd, args, ws)

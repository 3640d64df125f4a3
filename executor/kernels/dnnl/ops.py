"""Primitive-descriptor constructors, one per oneDNN primitive the backend uses.

Each takes memory descriptors (``FormatTag.any`` where the primitive may choose the
layout, then query the :class:`PrimitiveDesc`), the primitive's parameters, and
``attr`` (an :class:`Attr`, a list of post-ops, or None), and returns the primitive
descriptor, forward inference.  Spatial parameters (kernel, strides, pads, dilations)
list the spatial dims only; dilations are ONNX's (1 = dense), not oneDNN's (0 = dense).
An implementation oneDNN lacks raises :class:`DnnlUnimplemented`.
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence
from enum import IntEnum
from typing import Union

from .attr import Attr, PostOp, as_attr, binary_alg, eltwise_alg
from .enums import AlgKind, Arg, NormFlags, PropKind, RnnDirection
from .library import engine
from .memory import MemoryDesc, dims_array
from .primitive import PrimitiveDesc

AttrLike = Union[Attr, Sequence[PostOp], None]
INFERENCE = PropKind.forward_inference


def _h(md: MemoryDesc | None):
    return md.handle if md is not None else None


def _describe(kind: str, *mds: MemoryDesc | None, **params) -> str:
    parts = [repr(md)[len("MemoryDesc("):-1] if md is not None else "-" for md in mds]
    extra = ", ".join(f"{k}={v}" for k, v in params.items() if v is not None)
    return f"{kind} {' | '.join(parts)}" + (f" ({extra})" if extra else "")


def _spatial(values: Sequence[int] | None, n: int, default: int, name: str) -> list[int]:
    values = [default] * n if values is None else [int(v) for v in values]
    if len(values) != n:
        raise ValueError(f"{name} {values}: {n} spatial dims expected")
    return values


def _dilations(dilations: Sequence[int] | None, n: int) -> list[int]:
    """ONNX dilations (1 = dense) -> oneDNN's (0 = dense)."""
    return [d - 1 for d in _spatial(dilations, n, 1, "dilations")]


def conv_weights_dims(out_channels: int, in_channels: int, kernel: Sequence[int],
                      groups: int = 1) -> tuple[int, ...]:
    """Dims of a convolution's weights: ``(O, I, *k)``, grouped ``(G, O/G, I/G, *k)``
    (ONNX's ``(O, I/G, *k)`` weights are that in tags ``oihw`` / ``goihw``)."""
    if groups == 1:
        return (out_channels, in_channels, *kernel)
    if out_channels % groups or in_channels % groups:
        raise ValueError(f"{groups} groups do not divide {out_channels} output and "
                         f"{in_channels} input channels")
    return (groups, out_channels // groups, in_channels // groups, *kernel)


def _conv(kind: str, algs: dict, src: MemoryDesc, weights: MemoryDesc, dst: MemoryDesc,
          bias: MemoryDesc | None, strides, pads_begin, pads_end, dilations, alg: str,
          attr: AttrLike) -> PrimitiveDesc:
    n = len(src.dims) - 2
    strides = _spatial(strides, n, 1, "strides")
    pads_begin = _spatial(pads_begin, n, 0, "pads_begin")
    pads_end = _spatial(pads_end, n, 0, "pads_end")
    dil = _dilations(dilations, n)
    if alg not in algs:
        raise ValueError(f"{kind} algorithm {alg!r}: one of {', '.join(algs)}")
    a = as_attr(attr)
    what = _describe(kind, src, weights, bias, dst, alg=alg, strides=strides,
                     pads=(pads_begin, pads_end), dilations=dilations, post_ops=a.post_ops or None)
    return PrimitiveDesc.create(
        f"dnnl_{kind}_forward_primitive_desc_create",
        (engine(), INFERENCE, algs[alg], src.handle, weights.handle, _h(bias), dst.handle,
         dims_array(strides), dims_array(dil), dims_array(pads_begin), dims_array(pads_end),
         a.handle), what, a)


def convolution(src: MemoryDesc, weights: MemoryDesc, dst: MemoryDesc,
                bias: MemoryDesc | None = None, *, strides: Sequence[int] | None = None,
                pads_begin: Sequence[int] | None = None, pads_end: Sequence[int] | None = None,
                dilations: Sequence[int] | None = None, alg: str = "direct",
                attr: AttrLike = None) -> PrimitiveDesc:
    """Convolution (``alg`` ``direct``, ``winograd`` or ``auto``; oneDNN 3.2 has no f32
    Winograd on AVX-512 CPUs); grouped when the weights have the extra leading groups dim
    (:func:`conv_weights_dims`).  Give the weights as ``any`` and reorder them into
    ``weights_md()``: plain weights with NHWC data get the reference kernel, and so does
    a full-size binary post-op on NCHW data; NCHW runs im2col + GEMM, slower than NHWC."""
    algs = {"direct": AlgKind.convolution_direct, "winograd": AlgKind.convolution_winograd,
            "auto": AlgKind.convolution_auto}
    return _conv("convolution", algs, src, weights, dst, bias, strides, pads_begin, pads_end,
                 dilations, alg, attr)


def deconvolution(src: MemoryDesc, weights: MemoryDesc, dst: MemoryDesc,
                  bias: MemoryDesc | None = None, *, strides: Sequence[int] | None = None,
                  pads_begin: Sequence[int] | None = None, pads_end: Sequence[int] | None = None,
                  dilations: Sequence[int] | None = None,
                  attr: AttrLike = None) -> PrimitiveDesc:
    """Deconvolution (ONNX ConvTranspose).  Weights dims are ``(O, I, *k)`` (grouped
    ``(G, O/G, I/G, *k)``); ONNX's ``(I, O/G, *k)`` weights are that in tag ``iohw``
    (grouped ``giohw``).  ``output_padding`` goes into ``dst``'s dims and ``pads_end``."""
    algs = {"direct": AlgKind.deconvolution_direct}
    return _conv("deconvolution", algs, src, weights, dst, bias, strides, pads_begin, pads_end,
                 dilations, "direct", attr)


def matmul(src: MemoryDesc, weights: MemoryDesc, dst: MemoryDesc,
           bias: MemoryDesc | None = None, *, attr: AttrLike = None) -> PrimitiveDesc:
    """``dst[..., M, N] = src[..., M, K] @ weights[..., K, N] (+ bias)``, all three of
    one rank (pad with leading 1s): batch dims of size 1 broadcast; strided descriptors
    take transposed or per-head views; bias dims broadcast to dst's (``(1, .., 1, N)``)."""
    a = as_attr(attr)
    what = _describe("matmul", src, weights, bias, dst, post_ops=a.post_ops or None)
    return PrimitiveDesc.create("dnnl_matmul_primitive_desc_create",
                                (engine(), src.handle, weights.handle, _h(bias), dst.handle,
                                 a.handle), what, a)


def inner_product(src: MemoryDesc, weights: MemoryDesc, dst: MemoryDesc,
                  bias: MemoryDesc | None = None, *, attr: AttrLike = None) -> PrimitiveDesc:
    """``dst[N, O] = src[N, C, ...] . weights[O, C, ...] (+ bias[O])`` (Gemm with a
    transposed B, a fully connected layer)."""
    a = as_attr(attr)
    what = _describe("inner_product", src, weights, bias, dst, post_ops=a.post_ops or None)
    return PrimitiveDesc.create("dnnl_inner_product_forward_primitive_desc_create",
                                (engine(), INFERENCE, src.handle, weights.handle, _h(bias),
                                 dst.handle, a.handle), what, a)


POOLING = {"max": AlgKind.pooling_max, "avg_include": AlgKind.pooling_avg_include_padding,
           "avg_exclude": AlgKind.pooling_avg_exclude_padding}


def pooling(src: MemoryDesc, dst: MemoryDesc, alg: str, *, kernel: Sequence[int],
            strides: Sequence[int] | None = None, pads_begin: Sequence[int] | None = None,
            pads_end: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
            attr: AttrLike = None) -> PrimitiveDesc:
    """Pooling, ``alg`` ``max``, ``avg_include`` (padding counts in the average) or
    ``avg_exclude``.  ONNX's ceil_mode: grow ``pads_end`` until dst's dims fit.
    Dilated pooling gets the reference kernel."""
    if alg not in POOLING:
        raise ValueError(f"pooling algorithm {alg!r}: one of {', '.join(POOLING)}")
    n = len(src.dims) - 2
    kernel = _spatial(kernel, n, 1, "kernel")
    strides = _spatial(strides, n, 1, "strides")
    pads_begin = _spatial(pads_begin, n, 0, "pads_begin")
    pads_end = _spatial(pads_end, n, 0, "pads_end")
    a = as_attr(attr)
    what = _describe("pooling", src, dst, alg=alg, kernel=kernel, strides=strides,
                     pads=(pads_begin, pads_end), dilations=dilations)
    return PrimitiveDesc.create(
        "dnnl_pooling_forward_primitive_desc_create",
        (engine(), INFERENCE, POOLING[alg], src.handle, dst.handle, dims_array(strides),
         dims_array(kernel), dims_array(_dilations(dilations, n)), dims_array(pads_begin),
         dims_array(pads_end), a.handle), what, a)


def softmax(src: MemoryDesc, dst: MemoryDesc, axis: int, *, log: bool = False,
            attr: AttrLike = None) -> PrimitiveDesc:
    """Softmax (``log``: LogSoftmax) along ``axis`` (negative counts from the end).  Only
    an axis of stride 1 (the last of NCHW, C of NHWC) gets a JIT kernel; any other gets
    the reference kernel."""
    axis = axis + len(src.dims) if axis < 0 else axis
    a = as_attr(attr)
    what = _describe("log_softmax" if log else "softmax", src, dst, axis=axis)
    alg = AlgKind.softmax_log if log else AlgKind.softmax_accurate
    return PrimitiveDesc.create("dnnl_softmax_forward_primitive_desc_create",
                                (engine(), INFERENCE, alg, src.handle, dst.handle, axis,
                                 a.handle), what, a)


def layer_norm(src: MemoryDesc, dst: MemoryDesc, *, epsilon: float, scale: bool = True,
               shift: bool = True, attr: AttrLike = None) -> PrimitiveDesc:
    """Layer normalization over the last dim (reshape ``src``/``dst`` to normalize over
    several; a last dim not of stride 1 gets the reference kernel), statistics computed;
    ``scale``/``shift``, f32 of the last dim's size, bound as ``Arg.scale`` / ``Arg.shift``."""
    flags = (NormFlags.use_scale if scale else 0) | (NormFlags.use_shift if shift else 0)
    a = as_attr(attr)
    what = _describe("layer_norm", src, dst, epsilon=epsilon, flags=flags)
    return PrimitiveDesc.create("dnnl_layer_normalization_forward_primitive_desc_create",
                                (engine(), INFERENCE, src.handle, dst.handle, None,
                                 float(epsilon), int(flags), a.handle), what, a)


def batch_norm(src: MemoryDesc, dst: MemoryDesc, *, epsilon: float, scale: bool = True,
               shift: bool = True, relu: bool = False, global_stats: bool = True,
               attr: AttrLike = None) -> PrimitiveDesc:
    """Batch normalization with the given statistics (``Arg.mean``, ``Arg.variance``,
    f32 of C), or (``global_stats=False``) with the statistics of ``src`` itself, computed
    per channel over the batch and spatial dims; ``Arg.scale`` / ``Arg.shift``; ``relu``
    fuses a ReLU."""
    flags = (NormFlags.use_global_stats if global_stats else 0) \
        | (NormFlags.use_scale if scale else 0) \
        | (NormFlags.use_shift if shift else 0) | (NormFlags.fuse_norm_relu if relu else 0)
    a = as_attr(attr)
    what = _describe("batch_norm", src, dst, epsilon=epsilon, flags=flags)
    return PrimitiveDesc.create("dnnl_batch_normalization_forward_primitive_desc_create",
                                (engine(), INFERENCE, src.handle, dst.handle, float(epsilon),
                                 int(flags), a.handle), what, a)


def eltwise(src: MemoryDesc, dst: MemoryDesc, alg: str, alpha: float = 0.0, beta: float = 0.0,
            *, attr: AttrLike = None) -> PrimitiveDesc:
    """Elementwise ``alg`` (a name of :data:`~.attr.ELTWISE`) with its alpha and beta."""
    a = as_attr(attr)
    what = _describe("eltwise", src, dst, alg=alg, alpha=alpha, beta=beta)
    return PrimitiveDesc.create("dnnl_eltwise_forward_primitive_desc_create",
                                (engine(), INFERENCE, eltwise_alg(alg), src.handle, dst.handle,
                                 float(alpha), float(beta), a.handle), what, a)


def binary(src0: MemoryDesc, src1: MemoryDesc, dst: MemoryDesc, alg: str, *,
           attr: AttrLike = None) -> PrimitiveDesc:
    """``dst = src0 (alg) src1``, ``alg`` a name of :data:`~.attr.BINARY`; src1's dims
    of size 1 broadcast (same rank as src0: pad its shape with leading 1s)."""
    a = as_attr(attr)
    what = _describe("binary", src0, src1, dst, alg=alg)
    return PrimitiveDesc.create("dnnl_binary_primitive_desc_create",
                                (engine(), binary_alg(alg), src0.handle, src1.handle,
                                 dst.handle, a.handle), what, a)


def reorder(src: MemoryDesc, dst: MemoryDesc, *, attr: AttrLike = None) -> PrimitiveDesc:
    """Copy between any two layouts (and types) of the same dims: weights into a
    primitive's preferred layout, NCHW <-> NHWC."""
    a = as_attr(attr)
    eng = engine()
    return PrimitiveDesc.create("dnnl_reorder_primitive_desc_create",
                                (src.handle, eng, dst.handle, eng, a.handle),
                                _describe("reorder", src, dst), a)


RESAMPLING = {"nearest": AlgKind.resampling_nearest, "linear": AlgKind.resampling_linear}


def resampling(src: MemoryDesc, dst: MemoryDesc, alg: str, *,
               attr: AttrLike = None) -> PrimitiveDesc:
    """Resize of the spatial dims, ``nearest`` or ``linear``, half-pixel centres, with
    the scale of each dim dst / src: an ONNX Resize whose output size was rounded
    (5 * 1.5 -> 7) maps coordinates by its own scale and differs."""
    if alg not in RESAMPLING:
        raise ValueError(f"resampling algorithm {alg!r}: one of {', '.join(RESAMPLING)}")
    a = as_attr(attr)
    return PrimitiveDesc.create("dnnl_resampling_forward_primitive_desc_create",
                                (engine(), INFERENCE, RESAMPLING[alg], None, src.handle,
                                 dst.handle, a.handle),
                                _describe("resampling", src, dst, alg=alg), a)


def concat(srcs: Sequence[MemoryDesc], axis: int, dst: MemoryDesc | None = None, *,
           attr: AttrLike = None) -> PrimitiveDesc:
    """Concatenation along ``axis``; inputs bound as ``Arg.multiple_src + i``; ``dst``
    None lets oneDNN choose its layout."""
    axis = axis + len(srcs[0].dims) if axis < 0 else axis
    handles = (ctypes.c_void_p * len(srcs))(*[md.handle.value for md in srcs])
    a = as_attr(attr)
    return PrimitiveDesc.create("dnnl_concat_primitive_desc_create",
                                (engine(), _h(dst), len(srcs), axis, handles, a.handle),
                                _describe("concat", *srcs, dst, axis=axis), a)


def sum_n(srcs: Sequence[MemoryDesc], scales: Sequence[float] | None = None,
         dst: MemoryDesc | None = None, *, attr: AttrLike = None) -> PrimitiveDesc:
    """``dst = sum(scale_i * src_i)`` (ONNX Sum; inputs as ``Arg.multiple_src + i``)."""
    scales = [1.0] * len(srcs) if scales is None else list(scales)
    handles = (ctypes.c_void_p * len(srcs))(*[md.handle.value for md in srcs])
    a = as_attr(attr)
    return PrimitiveDesc.create("dnnl_sum_primitive_desc_create",
                                (engine(), _h(dst), len(srcs),
                                 (ctypes.c_float * len(srcs))(*scales), handles, a.handle),
                                _describe("sum", *srcs, dst, scales=scales), a)


REDUCTION = {name[len("reduction_"):]: alg for name, alg in AlgKind.__members__.items()
             if name.startswith("reduction_")}


def reduction(src: MemoryDesc, dst: MemoryDesc, alg: str, *, p: float = 0.0,
              eps: float = 0.0, attr: AttrLike = None) -> PrimitiveDesc:
    """Reduce the dims where ``dst`` has 1 (``alg``: max, min, sum, mul, mean, norm_lp_*)."""
    if alg not in REDUCTION:
        raise ValueError(f"reduction algorithm {alg!r}: one of {', '.join(REDUCTION)}")
    a = as_attr(attr)
    return PrimitiveDesc.create("dnnl_reduction_primitive_desc_create",
                                (engine(), REDUCTION[alg], src.handle, dst.handle, float(p),
                                 float(eps), a.handle),
                                _describe("reduction", src, dst, alg=alg), a)


# ------------------------------------------------------------------ recurrent layers
RNN_DIRECTIONS = {"forward": RnnDirection.unidirectional_left2right,
                  "reverse": RnnDirection.unidirectional_right2left,
                  "bidirectional": RnnDirection.bidirectional_concat}
"""ONNX's ``direction`` -> oneDNN's: a bidirectional layer's outputs are concatenated
(``dst_layer`` channels ``[forward | reverse]``), not summed."""


class RnnArg(IntEnum):
    """The RNN primitives' execution arguments by oneDNN's names for them
    (``DNNL_ARG_SRC_LAYER`` is ``DNNL_ARG_SRC_0``...)."""

    src_layer = Arg.src_0
    src_iter = Arg.src_1
    src_iter_c = Arg.src_2
    weights_layer = Arg.weights_0
    weights_iter = Arg.weights_1
    weights_peephole = Arg.weights_2
    weights_projection = Arg.weights_3
    dst_layer = Arg.dst_0
    dst_iter = Arg.dst_1
    dst_iter_c = Arg.dst_2

_RNN_DOC = """

    Dims (L layers, always 1 here; D directions; T steps; N batch; C input channels; H
    hidden; G gates): ``src_layer`` (T, N, C), ``src_iter`` (L, D, N, H), ``weights_layer``
    (L, D, C, G, H), ``weights_iter`` (L, D, H, G, H), ``bias`` (L, D, G, H), ``dst_layer``
    (T, N, D * H) for a bidirectional (concatenated) layer, else (T, N, H), ``dst_iter``
    (L, D, N, H); all dense (oneDNN's ``tnc``, ``ldnc``, ``ldigo``, ``ldgo``: tags ``abc``,
    ``abcd``...), or the layers batch first (``ntc``) and the states strided.  Give the
    weights as ``any`` (inference packs them) and reorder into ``arg_md`` of
    :attr:`RnnArg.weights_layer` / ``weights_iter``.  A state or ``dst_iter`` may be None:
    oneDNN starts from zeros, does not write the last state; oneDNN 3.2 refuses a None
    bias on CPUs (unimplemented).  ``direction``: ``forward``, ``reverse`` or ``bidirectional``
    (:data:`RNN_DIRECTIONS`); a reverse layer's ``dst_layer`` step t is the state made
    from input t, as ONNX's."""


def _rnn_direction(direction: str) -> RnnDirection:
    if direction not in RNN_DIRECTIONS:
        raise ValueError(f"RNN direction {direction!r}: one of {', '.join(RNN_DIRECTIONS)}")
    return RNN_DIRECTIONS[direction]


def lstm(src_layer: MemoryDesc, src_iter: MemoryDesc | None, src_iter_c: MemoryDesc | None,
         weights_layer: MemoryDesc, weights_iter: MemoryDesc, bias: MemoryDesc | None,
         dst_layer: MemoryDesc, dst_iter: MemoryDesc | None, dst_iter_c: MemoryDesc | None, *,
         direction: str = "forward", weights_peephole: MemoryDesc | None = None,
         weights_projection: MemoryDesc | None = None, attr: AttrLike = None) -> PrimitiveDesc:
    """LSTM layer, gates in oneDNN's order **i, f, c~, o** (ONNX stacks i, o, f, c):
    ``c_t = f * c_{t-1} + i * c~``, ``h_t = o * tanh(c_t)``, sigmoid gates and tanh
    candidate, ``bias`` the sum of ONNX's Wb and Rb.  ``src_iter`` and ``src_iter_c``
    come together or not at all, and so do ``dst_iter`` and ``dst_iter_c``;
    ``weights_peephole`` (L, D, 3, H), dense, gates i, f, o, adds ``P * c_{t-1}`` to i
    and f and ``P * c_t`` to o; ``weights_projection`` (L, D, H, P)."""
    a = as_attr(attr)
    what = _describe("lstm", src_layer, src_iter, src_iter_c, weights_layer, weights_iter,
                     weights_peephole, weights_projection, bias, dst_layer, dst_iter,
                     dst_iter_c, direction=direction)
    return PrimitiveDesc.create(
        "dnnl_lstm_forward_primitive_desc_create",
        (engine(), INFERENCE, _rnn_direction(direction), src_layer.handle, _h(src_iter),
         _h(src_iter_c), weights_layer.handle, weights_iter.handle, _h(weights_peephole),
         _h(weights_projection), _h(bias), dst_layer.handle, _h(dst_iter), _h(dst_iter_c), 0,
         a.handle), what, a)


def gru(src_layer: MemoryDesc, src_iter: MemoryDesc | None, weights_layer: MemoryDesc,
        weights_iter: MemoryDesc, bias: MemoryDesc | None, dst_layer: MemoryDesc,
        dst_iter: MemoryDesc | None, *, direction: str = "forward",
        linear_before_reset: bool = False, attr: AttrLike = None) -> PrimitiveDesc:
    """GRU layer, gates u, r, o (ONNX's z, r, h in the same order):
    ``h_t = u * h_{t-1} + (1 - u) * o``.  ``linear_before_reset`` False (``vanilla_gru``):
    ``o = tanh(W_o x + U_o (r * h_{t-1}) + b_o)``, G 3 bias rows (ONNX's Wb + Rb);
    True (``lbr_gru``, ONNX's linear_before_reset=1, what PyTorch exports):
    ``o = tanh(W_o x + b_o + r * (U_o h_{t-1} + b'_o))``, a bias of G + 1 = 4 rows
    ``[u, r, o, o']``: Wb + Rb for u and r, then ONNX's Wb_h and Rb_h."""
    kind = "lbr_gru" if linear_before_reset else "gru"
    a = as_attr(attr)
    what = _describe(kind, src_layer, src_iter, weights_layer, weights_iter, bias, dst_layer,
                     dst_iter, direction=direction)
    return PrimitiveDesc.create(
        f"dnnl_{kind}_forward_primitive_desc_create",
        (engine(), INFERENCE, _rnn_direction(direction), src_layer.handle, _h(src_iter),
         weights_layer.handle, weights_iter.handle, _h(bias), dst_layer.handle, _h(dst_iter),
         0, a.handle), what, a)


def vanilla_rnn(src_layer: MemoryDesc, src_iter: MemoryDesc | None, weights_layer: MemoryDesc,
                weights_iter: MemoryDesc, bias: MemoryDesc | None, dst_layer: MemoryDesc,
                dst_iter: MemoryDesc | None, *, activation: str = "tanh", alpha: float = 0.0,
                direction: str = "forward", attr: AttrLike = None) -> PrimitiveDesc:
    """Simple RNN layer, ``h_t = act(W x_t + U h_{t-1} + b)``, G 1; ``activation``
    ``tanh``, ``logistic`` or ``relu`` (``alpha`` its negative slope)."""
    if activation not in ("tanh", "logistic", "relu"):
        raise ValueError(f"RNN activation {activation!r}: tanh, logistic or relu")
    a = as_attr(attr)
    what = _describe("vanilla_rnn", src_layer, src_iter, weights_layer, weights_iter, bias,
                     dst_layer, dst_iter, direction=direction, activation=activation)
    return PrimitiveDesc.create(
        "dnnl_vanilla_rnn_forward_primitive_desc_create",
        (engine(), INFERENCE, eltwise_alg(activation), _rnn_direction(direction),
         src_layer.handle, _h(src_iter), weights_layer.handle, weights_iter.handle, _h(bias),
         dst_layer.handle, _h(dst_iter), 0, float(alpha), 0.0, a.handle), what, a)


for _f in (lstm, gru, vanilla_rnn):
    _f.__doc__ += _RNN_DOC

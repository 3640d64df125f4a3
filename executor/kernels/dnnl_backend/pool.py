"""Pooling and normalisation on oneDNN: MaxPool, AveragePool, the global pools,
BatchNormalization (inference, a fused Relu), LayerNormalization over the last axis,
Softmax and LogSoftmax."""
from __future__ import annotations

import numpy as np

from aircc.executor.kernels.dnnl.attr import Attr
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.ops import batch_norm, layer_norm, pooling, softmax
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.ops import TensorType
from aircc.ops.layout import is_channels_last
from aircc.ops.shapes import window_attrs, window_geometry

from . import DNNL
from .common import NotForDnnl, act, bind, cached_pd, dnnl_or_twin, then, twin_prepare, type_md
from .nan import nan_channels, nan_rows, nan_twin, norm_relu

USER = "user"


def _key(kind: str, types: list, attrs: dict) -> tuple:
    return (kind, tuple(None if t is None else (t.dtype, tuple(t.shape)) for t in types),
            repr(sorted(attrs.items())))


def _float32(t: TensorType) -> None:
    if t.dtype != "float32":
        raise NotForDnnl(f"{t.dtype} data")


def _first_dims(t: TensorType, cl: bool) -> tuple:
    s = tuple(t.shape)
    return (s[0], s[-1], *s[1:-1]) if cl else s


def _pool_pd(kind: str, types: list, attrs: dict, alg: str, kernel, strides, pb, pe,
             dilations, out_sp) -> PrimitiveDesc:
    x = types[0]
    cl = is_channels_last(attrs)
    xs = _first_dims(x, cl)

    work = float(x.numel) * max(1, len(out_sp))

    def make():
        dst = (xs[0], *out_sp, xs[1]) if cl else (xs[0], xs[1], *out_sp)
        return pooling(type_md(x, cl), type_md(TensorType(x.dtype, dst), cl), alg,
                       kernel=kernel, strides=strides, pads_begin=pb, pads_end=pe,
                       dilations=dilations, attr=Attr((), scratchpad=USER))
    return cached_pd(_key(kind, types, attrs), make, 8.0 * work)


def _window(types: list, attrs: dict, op: str) -> PrimitiveDesc:
    x = types[0]
    _float32(x)
    cl = is_channels_last(attrs)
    xs = _first_dims(x, cl)
    nsp = len(xs) - 2
    kernel = list(attrs["kernel_shape"])
    strides, dilations, pads, auto_pad = window_attrs(attrs, nsp, kernel)
    ceil = bool(attrs.get("ceil_mode", 0))
    out, pb, pe = window_geometry(xs[2:], kernel, strides, dilations, pads, auto_pad, ceil)
    reach = [(out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - xs[2 + i] - pb[i]
             for i in range(nsp)]
    if op == "MaxPool":
        alg = "max"
    else:
        if any(d != 1 for d in dilations):
            raise NotForDnnl("a dilated AveragePool")
        include = bool(attrs.get("count_include_pad", 0))
        if include and reach != pe:
            raise NotForDnnl("count_include_pad with ceil_mode windows past the pads")
        alg = "avg_include" if include else "avg_exclude"
    return _pool_pd(op, types, attrs, alg, kernel, strides, pb, reach, dilations, out)


@DNNL.kernel("MaxPool", 1, channels_last=True)
@dnnl_or_twin("MaxPool", 1)
class MaxPool:
    @staticmethod
    def plan(types: list, attrs: dict) -> PrimitiveDesc:
        if int(attrs.get("storage_order", 0)):
            raise NotForDnnl("storage_order 1")
        return _window(types, attrs, "MaxPool")

    @staticmethod
    def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
        """oneDNN's max pool, or numpy's where the input holds NaN (:func:`~.nan.nan_twin`)."""
        run = _bind_pool(pd, ins, outs, attrs, ws, constant, prepared)
        return nan_twin(run, ins[0], lambda: twin_prepare(
            "MaxPool", 1, "", ins, outs, attrs, {}, ws, constant, prepared))


def _bind_pool(pd, ins, outs, attrs, ws, constant, prepared):
    cl = is_channels_last(attrs)
    return bind(pd, {Arg.src: act(ins[0], cl), Arg.dst: act(outs[0], cl)}, ws)


@DNNL.kernel("AveragePool", 1, channels_last=True)
@dnnl_or_twin("AveragePool", 1)
class AveragePool:
    @staticmethod
    def plan(types: list, attrs: dict) -> PrimitiveDesc:
        return _window(types, attrs, "AveragePool")

    bind_to = staticmethod(_bind_pool)


def _global(op: str, alg: str):
    @DNNL.kernel(op, 1, channels_last=True)
    @dnnl_or_twin(op, 1)
    class Global:
        @staticmethod
        def plan(types: list, attrs: dict) -> PrimitiveDesc:
            x = types[0]
            _float32(x)
            sp = list(_first_dims(x, is_channels_last(attrs))[2:])
            n = len(sp)
            return _pool_pd(op, types, attrs, alg, sp, [1] * n, [0] * n, [0] * n, [1] * n,
                            [1] * n)

        @staticmethod
        def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
            run = _bind_pool(pd, ins, outs, attrs, ws, constant, prepared)
            return then(run, nan_channels(ins[0], outs[0], is_channels_last(attrs))
                        if alg == "max" else None)
    Global.__name__ = Global.__qualname__ = op
    return Global


GlobalAveragePool = _global("GlobalAveragePool", "avg_exclude")
GlobalMaxPool = _global("GlobalMaxPool", "max")


@DNNL.kernel("BatchNormalization", 1, channels_last=True)
@dnnl_or_twin("BatchNormalization", 1)
class BatchNormalization:
    """Inference with the given statistics; ``fused_relu`` in the same pass (oneDNN's
    ``fuse_norm_relu``, which takes NaN to 0: where an operand could make one, the batch
    norm without it runs, then numpy's Relu, :func:`~.common.relu_guard`)."""

    FUSED = ("fused_relu",)

    @staticmethod
    def plan(types: list, attrs: dict, keep_nan: bool = False) -> PrimitiveDesc:
        x = types[0]
        _float32(x)
        if any(t is not None and t.dtype != "float32" for t in types[1:5]) or len(types) < 5 \
                or attrs.get("training_mode"):
            raise NotForDnnl("statistics not float32, or training mode")
        cl = is_channels_last(attrs)
        relu = bool(attrs.get("fused_relu")) and not keep_nan

        def make():
            return batch_norm(type_md(x, cl), type_md(x, cl), epsilon=attrs.get("epsilon", 1e-5),
                              relu=relu, attr=Attr((), scratchpad=USER))
        return cached_pd(_key("bnorm", types, attrs) + (relu,), make, 8.0 * x.numel)

    @staticmethod
    def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
        def bound(pd):
            x, scale, shift, mean, var = ins[:5]
            cl = is_channels_last(attrs)
            return bind(pd, {Arg.src: act(x, cl), Arg.scale: scale, Arg.shift: shift,
                             Arg.mean: mean, Arg.variance: var, Arg.dst: act(outs[0], cl)}, ws)
        return norm_relu(BatchNormalization, bound, pd, ins, attrs, outs, 5)


@DNNL.kernel("LayerNormalization", 17)
@dnnl_or_twin("LayerNormalization", 17)
class LayerNormalization:
    """Normalisation over the last axis (others are left to numpy), of X, or of X plus the
    residual ``fused_add`` brings (added into Y first, normalised in place); the Mean and
    InvStdDev outputs are not made here."""

    FUSED = ("fused_add",)

    @staticmethod
    def plan(types: list, attrs: dict) -> PrimitiveDesc:
        x = _summed(types, attrs, 3)
        _float32(x)
        axis = int(attrs.get("axis", -1))
        if axis not in (-1, len(x.shape) - 1) or int(attrs.get("stash_type", 1)) != 1:
            raise NotForDnnl(f"normalisation from axis {axis}")
        d = x.shape[-1]
        for t in types[1:3]:
            if t is not None and (t.dtype != "float32" or tuple(t.shape) not in ((d,),)):
                raise NotForDnnl(f"scale or bias of shape {t.shape}")

        def make():          # with a shift always (zeros when the node has no bias)
            return layer_norm(type_md(x), type_md(x), epsilon=attrs.get("epsilon", 1e-5),
                              attr=Attr((), scratchpad=USER))
        return cached_pd(_key("lnorm", types, attrs), make, 8.0 * x.numel)

    @staticmethod
    def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
        if len(outs) > 1 and any(y is not None for y in outs[1:]):
            raise NotForDnnl("the Mean / InvStdDev outputs")
        y = outs[0]
        src = _add_into(ins[0], ins[3], y) if attrs.get("fused_add") else None
        shift = ins[2] if len(ins) > 2 and ins[2] is not None else np.zeros_like(ins[1])
        args = {Arg.src: act(y if src else ins[0]), Arg.scale: ins[1], Arg.shift: shift,
                Arg.dst: act(y)}
        return then(src, bind(pd, args, ws))


def _summed(types: list, attrs: dict, index: int) -> TensorType:
    """The type of X, or of X plus the operand ``fused_add`` brings at ``index``."""
    x = types[0]
    if attrs.get("fused_add"):
        other = types[index]
        if other is None or other.dtype != x.dtype:
            raise NotForDnnl("a fused residual of another type")
        return TensorType(x.dtype, tuple(np.broadcast_shapes(tuple(x.shape), tuple(other.shape))))
    return x


def _add_into(x: np.ndarray, other: np.ndarray, y: np.ndarray):
    """A call writing x + other into y (the fused residual), or None."""
    return lambda add=np.add: add(x, other, out=y)


def _softmax(op: str, since: int, log: bool):
    @DNNL.kernel(op, since)
    @dnnl_or_twin(op, since)
    class Softmax:
        FUSED = ("fused_add",)

        @staticmethod
        def plan(types: list, attrs: dict) -> PrimitiveDesc:
            x = _summed(types, attrs, 1)
            _float32(x)
            rank = len(x.shape)
            axis = int(attrs.get("axis", -1 if since >= 13 else 1))
            if since < 13 and axis % rank != rank - 1:
                raise NotForDnnl("a coerced 2-D softmax over several axes")

            def make():
                return softmax(type_md(x), type_md(x), axis % rank, log=log,
                               attr=Attr((), scratchpad=USER))
            return cached_pd(_key(op, types, attrs), make, 8.0 * x.numel)

        @staticmethod
        def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
            y = outs[0]
            src = _add_into(ins[0], ins[1], y) if attrs.get("fused_add") else None
            run = bind(pd, {Arg.src: act(y if src else ins[0]), Arg.dst: act(y)}, ws)
            return then(src, run, nan_rows(y, int(attrs.get("axis", -1 if since >= 13 else 1))))
    Softmax.__name__ = Softmax.__qualname__ = f"{op}{since}"
    return Softmax


for _op, _log in (("Softmax", False), ("LogSoftmax", True)):
    for _since in (1, 11, 13):
        _softmax(_op, _since, _log)

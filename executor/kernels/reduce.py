"""Reductions (Reduce* with axes as attribute or, from ReduceSum-13 / others-18, as an
optional input) and ArgMax/ArgMin."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import axis_plain, ints, norm_axes, norm_axis, vector_len
from aircc.executor.kernels.registry import InferContext, op


def _reduced_shape(ctx: InferContext, shape, axes: Optional[list[int]], keep: bool) -> tuple:
    """Shape after reducing ``axes`` (None = all)."""
    rank = len(shape)
    red = set(range(rank)) if axes is None else set(norm_axes(ctx, axes, rank))
    if keep:
        return tuple(1 if i in red else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in red)


def _infer_attr_axes(ctx: InferContext) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    axes = ctx.attrs.get("axes")
    keep = bool(ctx.attrs.get("keepdims", 1))
    return [TensorType(xt.dtype, _reduced_shape(ctx, xs, list(axes) if axes else None, keep))]


def _infer_input_axes(ctx: InferContext) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    keep = bool(ctx.attrs.get("keepdims", 1))
    noop = bool(ctx.attrs.get("noop_with_empty_axes", 0))
    if ctx.has_input(1):
        v = ctx.value(1)
        if v is None:
            n = vector_len(ctx, 1)
            if n == 0:
                v = np.zeros(0, np.int64)
            else:
                # which axes are reduced is only known at run time
                if keep:
                    return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs))))]
                if n is None:
                    return [TensorType(xt.dtype, None)]
                return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs) - n)))]
        axes = ints(v)
    else:
        axes = []
    if not axes:
        return [TensorType(xt.dtype, tuple(xs) if noop else _reduced_shape(ctx, xs, None, keep))]
    return [TensorType(xt.dtype, _reduced_shape(ctx, xs, axes, keep))]


def _axes(x: np.ndarray, axes) -> Optional[tuple]:
    return None if axes is None else tuple(axis_plain(a, x.ndim) for a in axes)


def _identity(x: np.ndarray, largest: bool):
    """The identity of max (largest=False) or min over x's dtype: what an empty reduction gives."""
    if x.dtype == np.bool_:
        return bool(largest)
    if x.dtype.kind == "f":
        return np.inf if largest else -np.inf
    info = np.iinfo(x.dtype)
    return info.max if largest else info.min


def _lse(x, axes, keep, y):
    if x.size == 0:
        y[...] = -np.inf
        return
    m = np.max(x, axis=axes, keepdims=True)
    np.copyto(m, 0, where=~np.isfinite(m))
    s = np.sum(np.exp(x - m), axis=axes, keepdims=True)
    np.log(s, out=s)
    s += m
    np.copyto(y, s.reshape(y.shape))


#: name -> fn(x, axes (tuple or None), keepdims, out)
REDUCERS: dict[str, Callable] = {
    "ReduceSum": lambda x, a, k, y: np.sum(x, axis=a, keepdims=k, out=y),
    "ReduceMean": lambda x, a, k, y: np.mean(x, axis=a, keepdims=k, out=y),
    "ReduceMax": lambda x, a, k, y: np.max(x, axis=a, keepdims=k, out=y,
                                           initial=_identity(x, False)),
    "ReduceMin": lambda x, a, k, y: np.min(x, axis=a, keepdims=k, out=y,
                                           initial=_identity(x, True)),
    "ReduceProd": lambda x, a, k, y: np.prod(x, axis=a, keepdims=k, out=y),
    "ReduceL1": lambda x, a, k, y: np.sum(np.abs(x), axis=a, keepdims=k, out=y),
    "ReduceL2": lambda x, a, k, y: np.sqrt(np.sum(np.square(x), axis=a, keepdims=k, out=y),
                                           out=y),
    "ReduceSumSquare": lambda x, a, k, y: np.sum(np.square(x), axis=a, keepdims=k, out=y),
    "ReduceLogSum": lambda x, a, k, y: np.log(np.sum(x, axis=a, keepdims=k, out=y), out=y),
    "ReduceLogSumExp": _lse,
}

#: Version from which the axes are an input instead of an attribute.
AXES_INPUT_SINCE = {name: (13 if name == "ReduceSum" else 18) for name in REDUCERS}


def _register(name: str, fn: Callable) -> None:
    def kernel_attr(ins, outs, attrs, tiling, ws):
        x = ins[0]
        axes = attrs.get("axes")
        fn(x, _axes(x, axes) if axes else None, bool(attrs.get("keepdims", 1)), outs[0])

    def kernel_input(ins, outs, attrs, tiling, ws):
        x = ins[0]
        axes = ints(ins[1]) if len(ins) > 1 and ins[1] is not None else []
        if not axes and attrs.get("noop_with_empty_axes", 0):
            np.copyto(outs[0], x)
            return
        fn(x, _axes(x, axes) if axes else None, bool(attrs.get("keepdims", 1)), outs[0])

    doc = f"{name} over ``axes`` (all when empty)."
    op(name, since=1)(type(name + "1", (), {"infer": staticmethod(_infer_attr_axes),
                                           "kernel": staticmethod(kernel_attr),
                                           "__doc__": doc}))
    op(name, since=AXES_INPUT_SINCE[name], value_inputs=(1,))(
        type(name + str(AXES_INPUT_SINCE[name]), (),
             {"infer": staticmethod(_infer_input_axes), "kernel": staticmethod(kernel_input),
              "__doc__": doc}))


for _name, _fn in REDUCERS.items():
    _register(_name, _fn)


def _infer_arg(ctx: InferContext) -> list[TensorType]:
    xs = ctx.input_shape(0)
    axis = norm_axis(ctx, ctx.attrs.get("axis", 0), max(len(xs), 1))
    keep = bool(ctx.attrs.get("keepdims", 1))
    return [TensorType("int64", _reduced_shape(ctx, xs, [axis], keep))]


def _arg_kernel(fn: Callable) -> Callable:
    def kernel(ins, outs, attrs, tiling, ws):
        x, y = ins[0], outs[0]
        axis = axis_plain(attrs.get("axis", 0), x.ndim)
        keep = bool(attrs.get("keepdims", 1))
        if attrs.get("select_last_index", 0):
            fn(np.flip(x, axis=axis), axis=axis, keepdims=keep, out=y)
            np.subtract(x.shape[axis] - 1, y, out=y)
        else:
            fn(x, axis=axis, keepdims=keep, out=y)

    return kernel


@op("ArgMax", since=1)
class ArgMax:
    """Index of the (first, or last with select_last_index) maximum along ``axis``."""

    infer = staticmethod(_infer_arg)
    kernel = staticmethod(_arg_kernel(np.argmax))


@op("ArgMin", since=1)
class ArgMin:
    """Index of the (first, or last with select_last_index) minimum along ``axis``."""

    infer = staticmethod(_infer_arg)
    kernel = staticmethod(_arg_kernel(np.argmin))

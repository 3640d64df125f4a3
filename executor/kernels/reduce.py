"""Reduction kernels: Reduce* (axes as an attribute, or as an optional input from the
version :data:`aircc.ops.defs.reduce.AXES_INPUT_SINCE` gives) and ArgMax / ArgMin."""
from __future__ import annotations

from typing import Callable, Optional

import ml_dtypes
import numpy as np

from aircc.ops.defs.reduce import AXES_INPUT_SINCE, REDUCE_OPS
from aircc.ops.shapes import axis_plain, ints

from .numpy_backend import NUMPY


def _axes(x: np.ndarray, axes) -> Optional[tuple]:
    return None if axes is None else tuple(axis_plain(a, x.ndim) for a in axes)


def _identity(x: np.ndarray, largest: bool):
    """The identity of max (largest=False) or min over x's dtype: what an empty reduction gives."""
    if x.dtype == np.bool_:
        return bool(largest)
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        return np.inf if largest else -np.inf
    # integers, and ml_dtypes' narrow types (int4, float8 without an infinity)
    info = (ml_dtypes.iinfo if "int" in x.dtype.name else ml_dtypes.finfo)(x.dtype)
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
                                           out=y, casting="unsafe"),      # integers: truncated
    "ReduceSumSquare": lambda x, a, k, y: np.sum(np.square(x), axis=a, keepdims=k, out=y),
    "ReduceLogSum": lambda x, a, k, y: np.log(np.sum(x, axis=a, keepdims=k, out=y), out=y),
    "ReduceLogSumExp": _lse,
}

if set(REDUCERS) != set(REDUCE_OPS):
    raise RuntimeError(f"reduction kernels {sorted(REDUCERS)} do not match the defined "
                       f"reductions {sorted(REDUCE_OPS)}")


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
    NUMPY.kernel(name, 1)(type(name + "1", (), {"kernel": staticmethod(kernel_attr),
                                                "__doc__": doc}))
    since = AXES_INPUT_SINCE[name]
    NUMPY.kernel(name, since)(type(name + str(since), (), {"kernel": staticmethod(kernel_input),
                                                           "__doc__": doc}))


for _name, _fn in REDUCERS.items():
    _register(_name, _fn)


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


@NUMPY.kernel("ArgMax", 1)
class ArgMax:
    """Index of the (first, or last with select_last_index) maximum along ``axis``."""

    kernel = staticmethod(_arg_kernel(np.argmax))


@NUMPY.kernel("ArgMin", 1)
class ArgMin:
    """Index of the (first, or last with select_last_index) minimum along ``axis``."""

    kernel = staticmethod(_arg_kernel(np.argmin))

"""What a kernel does after its main product: Relu against shared zeros, the fused
scale, residual Add and Relu of Conv and MatMul, bound once for a static task."""
from __future__ import annotations

from typing import Optional

import numpy as np

from aircc.ops.shapes import prod

from .scratch import zeros

#: Tensors below this many elements take numpy's scalar Relu (the zeros view costs more).
RELU_ZEROS_MIN = 4096


def relu_zero(x: np.ndarray):
    """The zero to compare ``x`` with in a Relu: numpy's maximum runs its SIMD loop only
    when both operands are arrays of the full shape, against a scalar a scalar loop 3x
    slower (238 against 75 us for 800k float32 here), so a :func:`zeros` view, except for
    small or non-float tensors."""
    if x.size < RELU_ZEROS_MIN or x.dtype.kind != "f":
        return 0
    return zeros(x.shape, x.dtype)


def relu(x: np.ndarray, out: np.ndarray) -> None:
    """out = max(x, 0), NaN kept (see :func:`relu_zero`)."""
    np.maximum(x, relu_zero(x), out=out)


def epilogue(y: np.ndarray, extra: Optional[np.ndarray], attrs: dict) -> None:
    """Fused work after a Conv/MatMul wrote ``y``: + ``extra`` (fused_add), then Relu."""
    if attrs.get("fused_add"):
        np.add(y, extra, out=y)
    if attrs.get("fused_relu"):
        relu(y, y)


#: A constant operand of at most this many elements, once broadcast to the result, is
#: kept expanded by a bound kernel: a same-shape ufunc skips numpy's broadcasting
#: iterator (0.3 instead of 0.85 us per call on 16 x 64).
EXPANDED_MAX = 16384


def expanded(a: np.ndarray, shape: tuple, is_constant: bool) -> np.ndarray:
    """``a`` broadcast to ``shape`` as a small array of its own when it is a constant (a
    weight: its values never change), else ``a`` as is."""
    if is_constant and a.shape != tuple(shape) and prod(shape) <= EXPANDED_MAX:
        return np.ascontiguousarray(np.broadcast_to(a, shape))
    return a


def bound_epilogue(product, y_full: np.ndarray, y: np.ndarray, extra: Optional[np.ndarray],
                   extra_constant: bool, attrs: dict):
    """``product()`` (which writes ``y``, a view of ``y_full``) followed by the fused
    scale, Add and Relu of ``attrs``, as one call with the operands worked out once."""
    scale = y.dtype.type(attrs["fused_scale"]) if "fused_scale" in attrs else None
    with_relu = bool(attrs.get("fused_relu"))
    target = y
    if attrs.get("fused_add"):
        if extra is None:
            return None
        if extra.shape == y_full.shape and y.shape != y_full.shape:
            extra = extra.reshape(y.shape) if extra.flags.c_contiguous else extra
            target = y if extra.shape == y.shape else y_full
        elif extra.ndim > 1 and y.shape != y_full.shape:
            target = y_full
        extra = expanded(extra, target.shape, extra_constant)
    else:
        extra = None
    mul, add, maximum = np.multiply, np.add, np.maximum
    zero = relu_zero(y)
    if scale is None and not with_relu:
        if extra is None:
            return product

        def run():
            product()
            add(target, extra, target)
        return run

    def run():
        product()
        if scale is not None:
            mul(y, scale, y)
        if extra is not None:
            add(target, extra, target)
        if with_relu:
            maximum(y, zero, out=y)
    return run

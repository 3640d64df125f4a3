"""Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.

The windowed pools follow the ONNX sliding-window rules (pads, strides,
dilations, ceil_mode, auto_pad) of :func:`aircc.ops.shapes.window_geometry`;
the global pools reduce every spatial dim to 1.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import check_window_attrs, window_attrs, window_out_dims
from aircc.ops.types import TensorType


def _window_pool(ctx: InferContext) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    if len(xs) < 3:
        ctx.fail(f"input must have rank >= 3, got {xs}")
    nsp = len(xs) - 2
    kernel = ctx.attrs.get("kernel_shape")
    if not kernel:
        ctx.fail("attribute kernel_shape is required")
    strides, dilations, pads, auto_pad = window_attrs(ctx.attrs, nsp, kernel)
    check_window_attrs(ctx, nsp, kernel, strides, dilations, pads)
    ceil_mode = bool(ctx.attrs.get("ceil_mode", 0))
    out_sp = window_out_dims(ctx, xs[2:], kernel, strides, dilations, pads, auto_pad, ceil_mode)
    return [TensorType(xt.dtype, (xs[0], xs[1], *out_sp))]


@define("MaxPool", since=1)
def max_pool(ctx: InferContext) -> list[TensorType]:
    """Max over sliding windows (pads, strides, dilations, ceil_mode, auto_pad)."""
    if ctx.num_outputs > 1:
        ctx.unsupported("the optional Indices output of MaxPool is not supported")
    if int(ctx.attrs.get("storage_order", 0)) not in (0, 1):
        ctx.fail("storage_order must be 0 or 1")
    return _window_pool(ctx)


@define("AveragePool", since=1)
def average_pool(ctx: InferContext) -> list[TensorType]:
    """Mean over sliding windows; ``count_include_pad`` decides the divisor at the borders."""
    if ctx.num_outputs != 1:
        ctx.fail("AveragePool has exactly one output")
    return _window_pool(ctx)


def _global_pool(ctx: InferContext) -> list[TensorType]:
    """Mean (GlobalAveragePool) or max (GlobalMaxPool) over all spatial dims, kept as 1s."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    if len(xs) < 3:
        ctx.fail(f"input must have rank >= 3, got {xs}")
    return [TensorType(xt.dtype, (xs[0], xs[1]) + (1,) * (len(xs) - 2))]


for _name in ("GlobalAveragePool", "GlobalMaxPool"):
    define(_name, since=1)(_global_pool)

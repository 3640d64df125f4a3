"""Quantized windows: QLinearConv, ConvInteger, and onnxruntime's QLinearAveragePool and
QLinearGlobalAveragePool (``com.microsoft``).

The convolutions follow Conv's sliding-window rules (pads, strides, dilations, groups,
auto_pad), pad with the input's zero point, accumulate exactly, and requantize as onnx's
reference does (per tensor or per output channel).  The pools dequantize, average and
quantize again as onnxruntime does; ``channels_last`` 1 puts the channels last.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import check_window_attrs, is_int, window_attrs, window_out_dims
from aircc.ops.types import TensorType

from .conv import window_params
from .quant_gemm import int8_operand
from .quant_linear import INT8_TYPES, MS_DOMAIN, scalar_param, zero_point_type


def _conv_shape(ctx: InferContext, x_at: int, w_at: int) -> tuple:
    """The output shape of a convolution of input ``x_at`` by weights ``w_at``."""
    xs, ws = ctx.input_shape(x_at), ctx.input_shape(w_at)
    if len(xs) < 3 or len(ws) != len(xs):
        ctx.fail(f"x {list(xs)} and w {list(ws)} must have the same rank >= 3")
    nsp, kernel, strides, dilations, pads, auto_pad = window_params(xs, ws, ctx.attrs)
    check_window_attrs(ctx, nsp, kernel, strides, dilations, pads)
    if not all(is_int(k) for k in kernel):
        ctx.fail("the kernel shape must be known")
    g = int(ctx.attrs.get("group", 1))
    if is_int(xs[1]) and is_int(ws[1]) and xs[1] != ws[1] * g:
        ctx.fail(f"x has {xs[1]} channels but w {list(ws)} with group={g} expects {ws[1] * g}")
    if is_int(ws[0]) and ws[0] % g:
        ctx.fail(f"{ws[0]} output channels are not divisible by group={g}")
    out_sp = window_out_dims(ctx, xs[2:], kernel, strides, dilations, pads, auto_pad)
    return (xs[0], ws[0], *out_sp)


def _channel_param(ctx: InferContext, i: int, m, what: str) -> None:
    """Input ``i`` (optional) is per tensor or per output channel (``[M]``)."""
    if not ctx.has_input(i) or ctx.input_type(i).shape is None:
        return
    s = ctx.input_type(i).shape
    if len(s) > 1 or (len(s) == 1 and is_int(s[0]) and is_int(m) and s[0] not in (1, m)):
        ctx.fail(f"{what} of shape {list(s)} is neither per tensor nor per output channel ({m})")


@define("QLinearConv", 10, engine="cube")
def qlinear_conv(ctx: InferContext) -> list[TensorType]:
    """y = saturate(round(conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp),
    w per tensor or per output channel, B int32."""
    int8_operand(ctx, 0, "x")
    int8_operand(ctx, 3, "w")
    int8_operand(ctx, 7, "y_zero_point")
    zero_point_type(ctx, 2, ctx.input_type(0).dtype, "x_zero_point")
    zero_point_type(ctx, 5, ctx.input_type(3).dtype, "w_zero_point")
    for i, what in ((1, "x_scale"), (2, "x_zero_point"), (6, "y_scale"), (7, "y_zero_point")):
        scalar_param(ctx, i, what, ("float32",) if i in (1, 6) else None)
    shape = _conv_shape(ctx, 0, 3)
    _channel_param(ctx, 4, shape[1], "w_scale")
    _channel_param(ctx, 5, shape[1], "w_zero_point")
    if ctx.has_input(8):
        b = ctx.input_type(8)
        if b.dtype != "int32" or (b.shape is not None and len(b.shape) != 1):
            ctx.fail(f"B must be a 1-D int32 tensor, got {b.dtype} {b.shape}")
    return [TensorType(ctx.input_type(7).dtype, shape)]


@define("ConvInteger", 10, engine="cube")
def conv_integer(ctx: InferContext) -> list[TensorType]:
    """int32 conv(x - x_zero_point, w - w_zero_point), w's zero point per tensor or channel."""
    int8_operand(ctx, 0, "x")
    int8_operand(ctx, 1, "w")
    zero_point_type(ctx, 2, ctx.input_type(0).dtype, "x_zero_point")
    zero_point_type(ctx, 3, ctx.input_type(1).dtype, "w_zero_point")
    scalar_param(ctx, 2, "x_zero_point")
    shape = _conv_shape(ctx, 0, 1)
    _channel_param(ctx, 3, shape[1], "w_zero_point")
    return [TensorType("int32", shape)]


def _pool_input(ctx: InferContext) -> tuple:
    """Input 0's shape (channels first), checked with its per-tensor parameters."""
    x = ctx.input_type(0)
    if x.dtype not in INT8_TYPES:
        ctx.fail(f"X must be int8 or uint8, got {x.dtype}")
    for i, what in ((1, "x_scale"), (2, "x_zero_point"), (3, "y_scale"), (4, "y_zero_point")):
        scalar_param(ctx, i, what, ("float32",) if i in (1, 3) else (x.dtype,))
    xs = ctx.input_shape(0)
    if len(xs) < 3:
        ctx.fail(f"X must have rank >= 3, got {list(xs)}")
    if int(ctx.attrs.get("channels_last", 0)):
        xs = (xs[0], xs[-1], *xs[1:-1])
    return xs


def _channels_out(ctx: InferContext, shape: tuple) -> tuple:
    """``shape`` (channels first) in the node's layout."""
    if int(ctx.attrs.get("channels_last", 0)):
        return (shape[0], *shape[2:], shape[1])
    return shape


@define("QLinearAveragePool", 1, MS_DOMAIN)
def qlinear_average_pool(ctx: InferContext) -> list[TensorType]:
    """quantize(AveragePool(dequantize(X))) with pads, strides, ceil_mode, auto_pad and
    count_include_pad, as onnxruntime computes it (float32 sums in window order)."""
    xs = _pool_input(ctx)
    nsp = len(xs) - 2
    kernel = ctx.attrs.get("kernel_shape")
    if not kernel:
        ctx.fail("attribute kernel_shape is required")
    strides, dilations, pads, auto_pad = window_attrs(ctx.attrs, nsp, kernel)
    check_window_attrs(ctx, nsp, kernel, strides, dilations, pads)
    if nsp > 3:
        ctx.fail(f"onnxruntime pools 1 to 3 spatial dims, not {nsp}")
    out = window_out_dims(ctx, xs[2:], kernel, strides, dilations, pads, auto_pad,
                          bool(ctx.attrs.get("ceil_mode", 0)))
    return [TensorType(ctx.input_type(0).dtype, _channels_out(ctx, (xs[0], xs[1], *out)))]


@define("QLinearGlobalAveragePool", 1, MS_DOMAIN)
def qlinear_global_average_pool(ctx: InferContext) -> list[TensorType]:
    """quantize(mean of dequantize(X) over every spatial position), per channel."""
    xs = _pool_input(ctx)
    return [TensorType(ctx.input_type(0).dtype,
                       _channels_out(ctx, (xs[0], xs[1]) + (1,) * (len(xs) - 2)))]

"""Conv: N-D convolution, and the weight layouts its ``weight_layout`` attribute names.

A Conv's weights come in ONNX's layout (M, C/group, kH, kW), ``OIHW``; the
compiler's ``pack-weights`` pass may store constant 2-D weights packed per kernel
tap, (kH, kW, M, C/group), ``HWOI``, when the kernel backend wants them so.  The
shape rule reads either.
"""
from __future__ import annotations

from typing import Sequence

from aircc.ops.epilogues import check_activation
from aircc.ops.precision import BF16_IO, COMPUTE_DTYPE, OUTPUT_DTYPE
from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import check_window_attrs, is_int, window_attrs, window_out_dims
from aircc.ops.types import Dim, TensorType

#: ``weight_layout`` of ONNX's weights: (M, C/group, kH, kW) (the default).
OIHW = "OIHW"
#: ``weight_layout`` of weights packed per tap: (kH, kW, M, C/group).
HWOI = "HWOI"
WEIGHT_LAYOUTS = (OIHW, HWOI)


def logical_weight_shape(ws: Sequence[Dim], attrs: dict) -> tuple:
    """The ONNX (M, C/group, kH, kW) shape of a Conv weight of shape ``ws`` in either layout."""
    if attrs.get("weight_layout", OIHW) == HWOI and len(ws) == 4:
        return (ws[2], ws[3], ws[0], ws[1])
    return tuple(ws)


def window_params(x_shape: Sequence[Dim], w_shape: Sequence[Dim], attrs: dict) -> tuple:
    """(spatial rank, kernel, strides, dilations, pads, auto_pad) of a Conv whose input
    has ``x_shape`` and whose weight has the ONNX-layout shape ``w_shape``."""
    nsp = len(x_shape) - 2
    kernel = list(attrs.get("kernel_shape") or w_shape[2:])
    strides, dilations, pads, auto_pad = window_attrs(attrs, nsp, kernel)
    return nsp, kernel, strides, dilations, pads, auto_pad


@define("Conv", 1, engine="cube")
def conv(ctx: InferContext) -> list[TensorType]:
    """N-D convolution with groups, dilations, strides, pads / auto_pad and optional bias."""
    check_activation(ctx)
    xt, wt = ctx.input_type(0), ctx.input_type(1)
    xs, ws = ctx.input_shape(0), ctx.input_shape(1)
    layout = ctx.attrs.get("weight_layout", OIHW)
    if layout not in WEIGHT_LAYOUTS or (layout == HWOI and len(ws) != 4):
        ctx.fail(f"weight_layout '{layout}' is not supported for W {ws}")
    ws = logical_weight_shape(ws, ctx.attrs)
    if len(xs) < 3 or len(ws) != len(xs):
        ctx.fail(f"X {xs} and W {ws} must have the same rank >= 3")
    nsp, kernel, strides, dilations, pads, auto_pad = window_params(xs, ws, ctx.attrs)
    check_window_attrs(ctx, nsp, kernel, strides, dilations, pads)
    if not all(is_int(k) for k in kernel):
        ctx.fail("kernel shape must be known")
    g = int(ctx.attrs.get("group", 1))
    if is_int(xs[1]) and is_int(ws[1]) and xs[1] != ws[1] * g:
        ctx.fail(f"X has {xs[1]} channels but W {ws} with group={g} expects {ws[1] * g}")
    if is_int(ws[0]) and ws[0] % g:
        ctx.fail(f"{ws[0]} output channels are not divisible by group={g}")
    if ctx.has_input(2):
        bs = ctx.input_shape(2)
        if len(bs) != 1 or (is_int(bs[0]) and is_int(ws[0]) and bs[0] != ws[0]):
            ctx.fail(f"bias shape {bs} does not match {ws[0]} output channels")
    dtype = xt.dtype
    if ctx.attrs.get(COMPUTE_DTYPE) == "bfloat16":      # a bfloat16 kernel (mix-precision)
        if xt.dtype not in BF16_IO or wt.dtype != "float32":
            ctx.fail(f"a bfloat16 convolution takes float32 or bfloat16 X and float32 W, got "
                     f"{xt.dtype} and {wt.dtype}")
        dtype = ctx.attrs.get(OUTPUT_DTYPE, "float32")
        if dtype not in BF16_IO:
            ctx.fail(f"output_dtype {dtype!r} is not one of {', '.join(BF16_IO)}")
    elif xt.dtype != wt.dtype:
        ctx.fail(f"X is {xt.dtype} but W is {wt.dtype}")
    out_sp = window_out_dims(ctx, xs[2:], kernel, strides, dilations, pads, auto_pad)
    return [TensorType(dtype, (xs[0], ws[0], *out_sp))]

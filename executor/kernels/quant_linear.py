"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (and the com.microsoft Q/DQ).

The arithmetic is onnx's reference's, with numpy's own type promotion (a float16 x is
divided in float16, an int32 x in float64), except that a quotient out of the int32
range saturates instead of wrapping: onnxruntime saturates too.  The com.microsoft
versions divide in float32 whatever x is, as onnxruntime does.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from aircc.ops.defs.quant_linear import (FLOAT8_TYPES, INTEGER_RANGES, MS_DOMAIN,
                                         SUBBYTE_FLOATS, VERSIONS)
from aircc.ops.shapes import axis_plain
from aircc.ops.types import onnx_to_np

from .numpy_backend import NUMPY
from .quant_arith import clamp


def param_view(p: Optional[np.ndarray], x_shape: tuple, axis: int,
               block: int = 0) -> Optional[np.ndarray]:
    """A scale or zero point (per tensor, per ``axis`` or per block of ``block``) as an
    array that broadcasts against x; None stays None."""
    if p is None or p.ndim == 0:
        return p
    if not block:
        if p.size == 1:
            return p.reshape(())
        shape = [1] * len(x_shape)
        shape[axis] = p.size
        return p.reshape(shape)
    full = np.repeat(p, block, axis=axis)
    return full[(slice(None),) * axis + (slice(0, x_shape[axis]),)]


def _layout(x: np.ndarray, attrs: dict) -> tuple[int, int]:
    axis = axis_plain(int(attrs.get("axis", 1)), x.ndim) if x.ndim else 0
    return axis, int(attrs.get("block_size", 0) or 0)


def round_to(q: np.ndarray, zp, out: np.ndarray) -> None:
    """``out = saturate(round_half_even(q) + zp)`` for an integer ``out``; ``q`` (a float
    array of the quotients) is overwritten."""
    lo, hi = INTEGER_RANGES[out.dtype.name]
    np.rint(q, out=q)
    if q.dtype.itemsize < 4:              # float16 / bfloat16: exact integers, widened
        q = q.astype(np.float32)
    if zp is not None:
        q += zp.astype(q.dtype)
    clamp(q, lo, hi)
    np.copyto(out, q, casting="unsafe")


def quantize(x: np.ndarray, scale: np.ndarray, zp: Optional[np.ndarray], out: np.ndarray,
             axis: int = 1, block: int = 0, saturate: bool = True,
             precision: Optional[np.dtype] = None) -> None:
    """``out = saturate(round_half_even(x / scale) + zp)`` into ``out``'s type; float8
    types round to nearest (clamped when ``saturate``), float4 / float6 likewise."""
    s = param_view(scale, x.shape, axis, block)
    z = param_view(zp, x.shape, axis, block)
    q = (x.astype(precision) / s.astype(precision)) if precision is not None else x / s
    q = np.asarray(q)
    name = out.dtype.name
    if name in INTEGER_RANGES:
        round_to(q if q.dtype.kind == "f" else q.astype(np.float64), z, out)
    elif name in FLOAT8_TYPES:
        from onnx.numpy_helper import saturate_cast     # float8 models only: not on every load
        np.copyto(out, saturate_cast(q, out.dtype) if saturate else q.astype(out.dtype))
    elif name in SUBBYTE_FLOATS:
        np.copyto(out, (q + z if z is not None else q).astype(out.dtype))
    else:
        raise ValueError(f"QuantizeLinear cannot produce {name}")


def dequantize(x: np.ndarray, scale: np.ndarray, zp: Optional[np.ndarray], out: np.ndarray,
               axis: int = 1, block: int = 0) -> None:
    """``out = (x - zp) * scale`` (float8 and float4 x: their zero point is 0)."""
    s = param_view(scale, x.shape, axis, block)
    z = param_view(zp, x.shape, axis, block)
    if z is not None and x.dtype.itemsize == 1 and x.dtype.kind in "iu" \
            and out.dtype == np.float32 and s.dtype == np.float32:
        np.subtract(x, z, out=out, dtype=np.float32)       # exact: small integers
        np.multiply(out, s, out=out)
        return
    dx = x.astype(np.float32)
    if z is not None and x.dtype.name not in FLOAT8_TYPES + SUBBYTE_FLOATS:
        dx = dx - z
    np.copyto(out, dx * s, casting="unsafe")


class QuantizeLinear:
    """y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor, axis or block."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, scale = ins[0], ins[1]
        zp = ins[2] if len(ins) > 2 else None
        axis, block = _layout(x, attrs)
        precision = attrs.get("precision", 0)
        quantize(x, scale, zp, outs[0], axis, block, bool(attrs.get("saturate", 1)),
                 np.dtype(onnx_to_np(precision)) if precision else None)


class DequantizeLinear:
    """y = (x - x_zero_point) * x_scale, per tensor, axis or block."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        axis, block = _layout(x, attrs)
        dequantize(x, ins[1], ins[2] if len(ins) > 2 else None, outs[0], axis, block)


for _v in VERSIONS:
    NUMPY.kernel("QuantizeLinear", _v)(QuantizeLinear)
    NUMPY.kernel("DequantizeLinear", _v)(DequantizeLinear)
NUMPY.kernel("DequantizeLinear", 1, MS_DOMAIN)(DequantizeLinear)


@NUMPY.kernel("QuantizeLinear", 1, MS_DOMAIN)
class MsQuantizeLinear:
    """onnxruntime's QuantizeLinear: a float16 x is divided in float32."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        axis, _ = _layout(x, attrs)
        quantize(x.astype(np.float32, copy=False), ins[1].astype(np.float32, copy=False),
                 ins[2] if len(ins) > 2 else None, outs[0], axis)


def dynamic_params(x: np.ndarray, onnxruntime: bool = True) -> tuple[np.float32, np.uint8]:
    """The uint8 scale and zero point mapping [min(x, 0), max(x, 0)] onto [0, 255], in
    float32 as onnx and onnxruntime compute them; an all-zero x gets scale 1 from
    onnxruntime's contrib kernels, 1 / 255 from onnx's DynamicQuantizeLinear."""
    f32 = np.float32
    hi = f32(max(0.0, float(x.max()))) if x.size else f32(0)
    lo = f32(min(0.0, float(x.min()))) if x.size else f32(0)
    if hi == lo:
        scale = f32(1.0) if onnxruntime else f32(1.0) / f32(255)
    else:
        scale = f32(hi - lo) / f32(255)
    zp = np.rint(np.clip(f32(0) - lo / scale, f32(0), f32(255)))
    return f32(scale), np.uint8(zp)


@NUMPY.kernel("DynamicQuantizeLinear", 11)
class DynamicQuantizeLinear:
    """uint8 y with the scale and zero point that map [min(x, 0), max(x, 0)] onto [0, 255]."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x = ins[0]
        scale, zp = dynamic_params(x, onnxruntime=False)
        round_to(np.divide(x, scale, dtype=np.float32), np.asarray(zp), outs[0])
        if len(outs) > 1 and outs[1] is not None:
            outs[1][...] = scale
        if len(outs) > 2 and outs[2] is not None:
            outs[2][...] = zp

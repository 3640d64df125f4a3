"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the
``com.microsoft`` QuantizeLinear / DequantizeLinear onnxruntime's quantizers write for
16-bit and 4-bit types.

``y = saturate(round_half_even(x / scale) + zero_point)`` and ``x = (y - zero_point) *
scale``, per tensor (a scalar or one-element scale), per ``axis`` (a 1-D scale) or, from
opset 21, per block of ``block_size`` along ``axis`` (a scale of x's rank).  The
quantized type is the zero point's, else ``output_dtype`` (opset 21), else uint8; the
float8 types round to nearest (``saturate`` clamps to their largest finite value), the
float4 / float6 ones likewise.  Every type onnx defines for these versions has a numpy
dtype (through ml_dtypes), so the native kernels cover them all.

The helpers here (:func:`quant_param`, :func:`scalar_param`, ...) are the one reading of
scales and zero points the other quantized ops' shape rules share.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, ShapeRule, define
from aircc.ops.shapes import is_int, norm_axis
from aircc.ops.types import TensorType, onnx_to_np

from .contrib_common import MS_DOMAIN

#: The 8-bit types onnxruntime's integer kernels take.
INT8_TYPES = ("int8", "uint8")
INTEGER_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
                  "int16": (-32768, 32767), "uint4": (0, 15), "int4": (-8, 7),
                  "uint2": (0, 3), "int2": (-2, 1), "int32": (-(2 ** 31), 2 ** 31 - 1)}
FLOAT8_TYPES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
SUBBYTE_FLOATS = ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn")
FLOAT_TYPES = ("float32", "float16", "bfloat16")

#: Per default-domain version: the quantized types, the float types of x (Q) / of the
#: scale (DQ), whether the scale may differ from x (Q) and the extra scale type.
_INT_8 = ("int8", "uint8")
_V21 = _INT_8 + ("int16", "uint16", "int4", "uint4") + FLOAT8_TYPES
QUANT_TYPES = {10: _INT_8, 13: _INT_8, 19: _INT_8 + FLOAT8_TYPES, 21: _V21,
               23: _V21 + ("float4_e2m1fn",), 24: _V21 + ("float4_e2m1fn",),
               25: _V21 + ("float4_e2m1fn", "int2", "uint2"),
               28: _V21 + ("float4_e2m1fn", "int2", "uint2", "float6_e2m3fn", "float6_e3m2fn")}
VERSIONS = tuple(QUANT_TYPES)
#: onnxruntime's com.microsoft versions of both ops.
MS_QUANT_TYPES = ("int8", "uint8", "int16", "uint16", "int4", "uint4")


def scalar_param(ctx: InferContext, i: int, what: str, dtypes=None) -> None:
    """Input ``i`` (optional) is a per-tensor parameter: a scalar or a one-element vector."""
    if not ctx.has_input(i):
        return
    t = ctx.input_type(i)
    if dtypes is not None and t.dtype not in dtypes:
        ctx.fail(f"{what} must be {' or '.join(dtypes)}, got {t.dtype}")
    if t.shape is not None and (len(t.shape) > 1 or (len(t.shape) == 1 and is_int(t.shape[0])
                                                      and t.shape[0] != 1)):
        ctx.unsupported(f"{what} of shape {list(t.shape)}: only a per-tensor {what} is supported")


def zero_point_type(ctx: InferContext, i: int, like: str, what: str) -> None:
    """Input ``i`` (optional) is a zero point of dtype ``like``."""
    if ctx.has_input(i) and ctx.input_type(i).dtype != like:
        ctx.fail(f"{what} is {ctx.input_type(i).dtype}, expected {like}")


def quant_param(ctx: InferContext, i: int, x_shape: tuple, axis: int, block_size: int,
                what: str) -> None:
    """Input ``i`` (optional) fits x: per tensor, per ``axis`` or per block."""
    if not ctx.has_input(i) or ctx.input_type(i).shape is None:
        return
    s = ctx.input_type(i).shape
    if block_size:
        if len(s) != len(x_shape):
            ctx.fail(f"blocked {what} {list(s)} must have the rank of x {list(x_shape)}")
        for k, (d, x) in enumerate(zip(s, x_shape)):
            want = -(-x // block_size) if k == axis and is_int(x) else x
            if is_int(d) and is_int(want) and d != want:
                ctx.fail(f"blocked {what} {list(s)} does not fit x {list(x_shape)} with "
                         f"block_size {block_size} on axis {axis}")
        return
    if len(s) == 0 or (len(s) == 1 and s[0] == 1):
        return
    if len(s) != 1:
        ctx.fail(f"{what} must be a scalar or 1-D, got shape {list(s)}")
    if not x_shape:
        ctx.fail(f"a per-axis {what} needs an x of rank >= 1")
    if is_int(s[0]) and is_int(x_shape[axis]) and s[0] != x_shape[axis]:
        ctx.fail(f"{what} has {s[0]} values for axis {axis} of size {x_shape[axis]}")


def _layout(ctx: InferContext, version: int) -> tuple[tuple, int, int]:
    """(x shape, normalised axis, block size) of a Q/DQ node, checked."""
    xs = ctx.input_shape(0)
    block = int(ctx.attrs.get("block_size", 0) or 0) if version >= 21 else 0
    if block < 0:
        ctx.fail(f"block_size must be >= 0, got {block}")
    axis = int(ctx.attrs.get("axis", 1)) if version >= 13 else 1
    per_tensor = ctx.input_type(1).shape in ((), (1,)) and not block
    axis = norm_axis(ctx, axis, len(xs)) if xs and not per_tensor else 0
    if version == 10 and ctx.input_type(1).shape not in (None, (), (1,)):
        ctx.fail(f"opset 10 takes a per-tensor scale, got shape {list(ctx.input_type(1).shape)}")
    return xs, axis, block


def _quantize_rule(version: int, domain: str = "") -> ShapeRule:
    allowed = QUANT_TYPES[version] if not domain else MS_QUANT_TYPES

    def infer(ctx: InferContext) -> list[TensorType]:
        x, scale = ctx.input_type(0), ctx.input_type(1)
        ok_x = ("float32", "int32") if version < 19 else FLOAT_TYPES + ("int32",)
        if domain:
            ok_x = ("float32", "float16")
        if x.dtype not in ok_x:
            ctx.fail(f"x must be {' or '.join(ok_x)}, got {x.dtype}")
        ok_scale = ((x.dtype,) if domain else ("float32",) if version < 19
                    else (x.dtype,) if version < 23 else FLOAT_TYPES + ("int32", "float8_e8m0fnu"))
        if scale.dtype not in ok_scale:
            ctx.fail(f"y_scale must be {' or '.join(ok_scale)}, got {scale.dtype}")
        out = ctx.input_type(2).dtype if ctx.has_input(2) else None
        attr = ctx.attrs.get("output_dtype", 0) if version >= 21 else 0
        if attr:
            want = onnx_to_np(attr)
            if out is not None and out != want:
                ctx.fail(f"output_dtype {want} differs from the zero point's type {out}")
            out = want
        out = out or "uint8"
        if out not in allowed:
            ctx.fail(f"cannot quantize to {out} (opset {version} takes {', '.join(allowed)})")
        xs, axis, block = _layout(ctx, version if not domain else 13)
        quant_param(ctx, 1, xs, axis, block, "y_scale")
        quant_param(ctx, 2, xs, axis, block, "y_zero_point")
        if int(ctx.attrs.get("saturate", 1)) not in (0, 1):
            ctx.fail("saturate must be 0 or 1")
        return [TensorType(out, xs)]

    infer.__doc__ = ("y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor, "
                     "per axis" + (" or per block" if version >= 21 else "")
                     + "; the type is the zero point's" + (", else output_dtype" if version >= 21
                                                            else "") + ", else uint8")
    return infer


def _dequantize_rule(version: int, domain: str = "") -> ShapeRule:
    allowed = (QUANT_TYPES[version] if not domain else MS_QUANT_TYPES) + ("int32",)

    def infer(ctx: InferContext) -> list[TensorType]:
        x, scale = ctx.input_type(0), ctx.input_type(1)
        if x.dtype not in allowed:
            ctx.fail(f"x must be one of {', '.join(allowed)}, got {x.dtype}")
        ok_scale = (("float32", "float16") if domain else ("float32",) if version < 19
                    else FLOAT_TYPES + (("float8_e8m0fnu",) if version >= 24 else ()))
        if scale.dtype not in ok_scale:
            ctx.fail(f"x_scale must be {' or '.join(ok_scale)}, got {scale.dtype}")
        zero_point_type(ctx, 2, x.dtype, "x_zero_point")
        xs, axis, block = _layout(ctx, version if not domain else 13)
        quant_param(ctx, 1, xs, axis, block, "x_scale")
        quant_param(ctx, 2, xs, axis, block, "x_zero_point")
        out = scale.dtype
        if version >= 23 and ctx.attrs.get("output_dtype", 0):
            out = onnx_to_np(ctx.attrs["output_dtype"])
        if out not in FLOAT_TYPES:
            ctx.fail(f"the output must be {', '.join(FLOAT_TYPES)}, got {out} (an "
                     f"{scale.dtype} x_scale needs output_dtype)")
        return [TensorType(out, xs)]

    infer.__doc__ = ("y = (x - x_zero_point) * x_scale, per tensor, per axis"
                     + (" or per block" if version >= 21 else "") + "; int32 x too (a bias)")
    return infer


for _v in VERSIONS:
    define("QuantizeLinear", _v)(_quantize_rule(_v))
    define("DequantizeLinear", _v)(_dequantize_rule(_v))
define("QuantizeLinear", 1, MS_DOMAIN)(_quantize_rule(13, MS_DOMAIN))
define("DequantizeLinear", 1, MS_DOMAIN)(_dequantize_rule(13, MS_DOMAIN))


@define("DynamicQuantizeLinear", 11)
def dynamic_quantize_linear(ctx: InferContext) -> list[TensorType]:
    """uint8 y with the scale and zero point that map [min(x, 0), max(x, 0)] onto [0, 255]."""
    x = ctx.input_type(0)
    if x.dtype != "float32":
        ctx.fail(f"x must be float32, got {x.dtype}")
    return [TensorType("uint8", ctx.input_shape(0)), TensorType("float32", ()),
            TensorType("uint8", ())][:max(ctx.num_outputs, 1)]

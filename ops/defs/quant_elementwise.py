"""onnxruntime's quantized elementwise ops (``com.microsoft``): QLinearAdd, QLinearMul,
QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearWhere and QLinearSoftmax.

Each is ``quantize(f(dequantize(inputs)))`` with per-tensor scales and zero points, and
computes as onnxruntime's CPU kernels do, so the integers agree: Add and Mul in float32
(Add with fused multiply-adds, as its AVX2 kernel), the unary ops, Concat and Where
through a 256-entry table of the requantized values, Softmax through a table of
``exp`` scaled to its largest input.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import broadcast_shapes, is_int, norm_axis
from aircc.ops.types import TensorType

from .quant_linear import INT8_TYPES, MS_DOMAIN, scalar_param, zero_point_type


def int8_input(ctx: InferContext, i: int, what: str) -> str:
    dtype = ctx.input_type(i).dtype
    if dtype not in INT8_TYPES:
        ctx.fail(f"{what} must be int8 or uint8, got {dtype}")
    return dtype


def _params(ctx: InferContext, dtype: str, scales: tuple, zero_points: tuple) -> None:
    for i in scales:
        scalar_param(ctx, i, f"input {i} (a scale)", ("float32",))
    for i in zero_points:
        scalar_param(ctx, i, f"input {i} (a zero point)")
        zero_point_type(ctx, i, dtype, f"input {i} (a zero point)")


def _binary(ctx: InferContext) -> list[TensorType]:
    dtype = int8_input(ctx, 0, "A")
    if int8_input(ctx, 3, "B") != dtype:
        ctx.fail(f"A and B differ in type: {dtype} and {ctx.input_type(3).dtype}")
    _params(ctx, dtype, (1, 4, 6), (2, 5, 7))
    return [TensorType(dtype, broadcast_shapes(ctx, ctx.input_shape(0), ctx.input_shape(3)))]


@define("QLinearAdd", 1, MS_DOMAIN)
def qlinear_add(ctx: InferContext) -> list[TensorType]:
    """C = quantize(dequantize(A) + dequantize(B)), broadcast."""
    return _binary(ctx)


@define("QLinearMul", 1, MS_DOMAIN)
def qlinear_mul(ctx: InferContext) -> list[TensorType]:
    """C = quantize(dequantize(A) * dequantize(B)), broadcast."""
    return _binary(ctx)


def _unary(ctx: InferContext) -> list[TensorType]:
    dtype = int8_input(ctx, 0, "X")
    _params(ctx, dtype, (1, 3), (2, 4))
    return [TensorType(dtype, ctx.input_shape(0))]


@define("QLinearSigmoid", 1, MS_DOMAIN)
def qlinear_sigmoid(ctx: InferContext) -> list[TensorType]:
    """Y = quantize(sigmoid(dequantize(X)))."""
    return _unary(ctx)


@define("QLinearLeakyRelu", 1, MS_DOMAIN)
def qlinear_leaky_relu(ctx: InferContext) -> list[TensorType]:
    """Y = quantize(v if v >= 0 else alpha * v), v = dequantize(X) (alpha 0.01)."""
    return _unary(ctx)


@define("QLinearConcat", 1, MS_DOMAIN)
def qlinear_concat(ctx: InferContext) -> list[TensorType]:
    """Y = quantize(concat(dequantize(X_i))) along ``axis``; inputs (Y_scale, Y_zero_point,
    then X, X_scale, X_zero_point per tensor)."""
    if ctx.num_inputs < 5 or (ctx.num_inputs - 2) % 3:
        ctx.fail("inputs must be Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) each")
    dtype = int8_input(ctx, 1, "Y_zero_point")
    _params(ctx, dtype, (0,), (1,))
    shapes = []
    for i in range(2, ctx.num_inputs, 3):
        if int8_input(ctx, i, f"input {i}") != dtype:
            ctx.fail(f"input {i} is {ctx.input_type(i).dtype}, Y is {dtype}")
        _params(ctx, dtype, (i + 1,), (i + 2,))
        shapes.append(ctx.input_shape(i))
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        ctx.fail(f"inputs differ in rank: {[list(s) for s in shapes]}")
    axis = norm_axis(ctx, int(ctx.attrs.get("axis", 0)), rank)
    out = list(shapes[0])
    for s in shapes[1:]:
        for k, (a, b) in enumerate(zip(out, s)):
            if k == axis:
                out[k] = a + b if is_int(a) and is_int(b) else ctx.sym(k)
            elif is_int(a) and is_int(b) and a != b:
                ctx.fail(f"inputs differ in dim {k}: {[list(x) for x in shapes]}")
    return [TensorType(dtype, tuple(out))]


@define("QLinearWhere", 1, MS_DOMAIN)
def qlinear_where(ctx: InferContext) -> list[TensorType]:
    """Z = quantize(where(condition, dequantize(X), dequantize(Y))), broadcast."""
    if ctx.input_type(0).dtype != "bool":
        ctx.fail(f"condition must be bool, got {ctx.input_type(0).dtype}")
    dtype = int8_input(ctx, 1, "X")
    if int8_input(ctx, 4, "Y") != dtype:
        ctx.fail(f"X and Y differ in type: {dtype} and {ctx.input_type(4).dtype}")
    _params(ctx, dtype, (2, 5, 7), (3, 6, 8))
    shape = broadcast_shapes(ctx, ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(4))
    return [TensorType(dtype, shape)]


@define("QLinearSoftmax", 1, MS_DOMAIN)
def qlinear_softmax(ctx: InferContext) -> list[TensorType]:
    """Y = quantize(softmax(dequantize(X))) along ``axis`` (``opset`` < 13: over every dim
    from ``axis`` on), through onnxruntime's exp table; X's zero point cancels out."""
    dtype = int8_input(ctx, 0, "X")
    if "opset" not in ctx.attrs:
        ctx.fail("attribute opset is required")
    _params(ctx, dtype, (1, 3), (2, 4))
    xs = ctx.input_shape(0)
    default = 1 if int(ctx.attrs["opset"]) < 13 else -1
    norm_axis(ctx, int(ctx.attrs.get("axis", default)), len(xs))
    return [TensorType(dtype, xs)]

"""Quantized matrix products: QLinearMatMul, MatMulInteger, and onnxruntime's QGemm,
DynamicQuantizeMatMul, MatMulIntegerToFloat and MatMulNBits (``com.microsoft``).

The integer products are exact (int32 accumulation of the zero-point-shifted operands);
QLinearMatMul requantizes as onnx's reference does (the int32 product times
``a_scale * b_scale / y_scale`` in float64, rounded half to even), the com.microsoft
ops as onnxruntime does (in float32).  B's scale and zero point may be per column.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import broadcast_shapes, is_int
from aircc.ops.types import TensorType

from .quant_linear import INT8_TYPES, MS_DOMAIN, scalar_param, zero_point_type

SCALE_TYPES = ("float32", "float16", "bfloat16")


def matmul_shape(ctx: InferContext, a: tuple, b: tuple) -> tuple:
    """numpy.matmul's result shape of operands of shapes ``a`` and ``b``."""
    if not a or not b:
        ctx.fail("matrix product operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if is_int(a2[-1]) and is_int(b2[-2]) and a2[-1] != b2[-2]:
        ctx.fail(f"inner dims of {list(a)} and {list(b)} differ")
    batch = broadcast_shapes(ctx, a2[:-2], b2[:-2])
    return tuple(batch) + (() if len(a) == 1 else (a2[-2],)) + (() if len(b) == 1 else (b2[-1],))


def int8_operand(ctx: InferContext, i: int, what: str) -> str:
    dtype = ctx.input_type(i).dtype
    if dtype not in INT8_TYPES:
        ctx.fail(f"{what} must be int8 or uint8, got {dtype}")
    return dtype


def column_param(ctx: InferContext, i: int, b_shape: tuple, what: str) -> None:
    """Input ``i`` (optional) is per tensor or per column of B (``[N]``, ``[..., 1, N]``)."""
    if not ctx.has_input(i) or ctx.input_type(i).shape is None:
        return
    s = ctx.input_type(i).shape
    if len(s) == 0 or (len(s) == 1 and s[0] == 1):
        return
    n = b_shape[-1] if len(b_shape) >= 2 else 1
    if len(s) > 1 and not (is_int(s[-2]) and s[-2] == 1):
        ctx.unsupported(f"{what} of shape {list(s)}: per tensor or per column of B only")
    if is_int(s[-1]) and is_int(n) and s[-1] != n:
        ctx.fail(f"{what} has {s[-1]} values for {n} columns of B")


@define("QLinearMatMul", 10, engine="cube")
def qlinear_matmul(ctx: InferContext) -> list[TensorType]:
    """y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)."""
    return _qlinear_matmul(ctx, ("float32",))


@define("QLinearMatMul", 21, engine="cube")
def qlinear_matmul_21(ctx: InferContext) -> list[TensorType]:
    """QLinearMatMul with float16 / bfloat16 scales too; float8 operands run on the fallback."""
    return _qlinear_matmul(ctx, SCALE_TYPES)


def _qlinear_matmul(ctx: InferContext, scale_types: tuple) -> list[TensorType]:
    for i, what in ((0, "a"), (3, "b"), (7, "y_zero_point")):
        if ctx.input_type(i).dtype.startswith("float8"):
            ctx.unsupported("float8 operands")
        int8_operand(ctx, i, what)
    zero_point_type(ctx, 2, ctx.input_type(0).dtype, "a_zero_point")
    zero_point_type(ctx, 5, ctx.input_type(3).dtype, "b_zero_point")
    for i, what in ((1, "a_scale"), (2, "a_zero_point"), (6, "y_scale"), (7, "y_zero_point")):
        scalar_param(ctx, i, what, scale_types if i in (1, 6) else None)
    b = ctx.input_shape(3)
    if ctx.input_type(4).dtype not in scale_types:
        ctx.fail(f"b_scale must be {' or '.join(scale_types)}, got {ctx.input_type(4).dtype}")
    column_param(ctx, 4, b, "b_scale")
    column_param(ctx, 5, b, "b_zero_point")
    shape = matmul_shape(ctx, ctx.input_shape(0), b)
    return [TensorType(ctx.input_type(7).dtype, shape)]


@define("MatMulInteger", 10, engine="cube")
def matmul_integer(ctx: InferContext) -> list[TensorType]:
    """int32 (A - a_zero_point) @ (B - b_zero_point), numpy.matmul's broadcasting."""
    int8_operand(ctx, 0, "A")
    int8_operand(ctx, 1, "B")
    zero_point_type(ctx, 2, ctx.input_type(0).dtype, "a_zero_point")
    zero_point_type(ctx, 3, ctx.input_type(1).dtype, "b_zero_point")
    a, b = ctx.input_shape(0), ctx.input_shape(1)
    if ctx.has_input(2) and ctx.input_type(2).shape not in (None, (), (1,)):
        ctx.unsupported("a per-row a_zero_point")
    column_param(ctx, 3, b, "b_zero_point")
    return [TensorType("int32", matmul_shape(ctx, a, b))]


@define("QGemm", 1, MS_DOMAIN, engine="cube")
def qgemm(ctx: InferContext) -> list[TensorType]:
    """Y = alpha * (A' - a_zp) @ (B' - b_zp) * a_scale * b_scale + C (int32), requantized
    to y_scale / y_zero_point, or float32 without y_scale."""
    int8_operand(ctx, 0, "A")
    int8_operand(ctx, 3, "B")
    a, b = ctx.input_shape(0), ctx.input_shape(3)
    if len(a) != 2 or len(b) != 2:
        ctx.fail(f"A {list(a)} and B {list(b)} must be 2-D")
    m, k = (a[1], a[0]) if ctx.attrs.get("transA", 0) else a
    k2, n = (b[1], b[0]) if ctx.attrs.get("transB", 0) else b
    if is_int(k) and is_int(k2) and k != k2:
        ctx.fail(f"inner dims of A {list(a)} and B {list(b)} differ")
    for i, what in ((1, "a_scale"), (2, "a_zero_point"), (7, "y_scale"), (8, "y_zero_point")):
        scalar_param(ctx, i, what)
    zero_point_type(ctx, 2, ctx.input_type(0).dtype, "a_zero_point")
    zero_point_type(ctx, 5, ctx.input_type(3).dtype, "b_zero_point")
    column_param(ctx, 4, (k2, n), "b_scale")
    column_param(ctx, 5, (k2, n), "b_zero_point")
    if ctx.has_input(6):
        c = ctx.input_type(6)
        if c.dtype != "int32" or (c.shape is not None and len(c.shape) > 2):
            ctx.fail(f"C must be an int32 tensor of rank <= 2, got {c.dtype} {c.shape}")
    if ctx.has_input(8) and not ctx.has_input(7):
        ctx.fail("y_zero_point needs y_scale")
    out = ctx.input_type(8).dtype if ctx.has_input(8) else "float32"
    if ctx.has_input(7) and not ctx.has_input(8):
        ctx.unsupported("y_scale without y_zero_point")
    return [TensorType(out, (m, n))]


@define("DynamicQuantizeMatMul", 1, MS_DOMAIN, engine="cube")
def dynamic_quantize_matmul(ctx: InferContext) -> list[TensorType]:
    """float32 A quantized to uint8 over its whole range (as DynamicQuantizeLinear), times
    the quantized B, scaled by a_scale * b_scale, + bias."""
    if ctx.input_type(0).dtype != "float32":
        ctx.fail(f"A must be float32, got {ctx.input_type(0).dtype}")
    b = ctx.input_shape(1)
    int8_operand(ctx, 1, "B")
    zero_point_type(ctx, 3, ctx.input_type(1).dtype, "b_zero_point")
    column_param(ctx, 2, b, "b_scale")
    column_param(ctx, 3, b, "b_zero_point")
    return [TensorType("float32", matmul_shape(ctx, ctx.input_shape(0), b))]


@define("MatMulIntegerToFloat", 1, MS_DOMAIN, engine="cube")
def matmul_integer_to_float(ctx: InferContext) -> list[TensorType]:
    """(A - a_zp) @ (B - b_zp) * a_scale * b_scale + bias, in a_scale's float type."""
    int8_operand(ctx, 0, "A")
    int8_operand(ctx, 1, "B")
    a, b = ctx.input_shape(0), ctx.input_shape(1)
    out = ctx.input_type(2).dtype
    if out not in ("float32", "float16"):
        ctx.fail(f"a_scale must be float32 or float16, got {out}")
    scalar_param(ctx, 2, "a_scale")
    scalar_param(ctx, 4, "a_zero_point")
    zero_point_type(ctx, 4, ctx.input_type(0).dtype, "a_zero_point")
    zero_point_type(ctx, 5, ctx.input_type(1).dtype, "b_zero_point")
    column_param(ctx, 3, b, "b_scale")
    column_param(ctx, 5, b, "b_zero_point")
    return [TensorType(out, matmul_shape(ctx, a, b))]


#: Bit widths whose values pack whole into bytes (the native kernel unpacks these).
NBITS = (2, 4, 8)


@define("MatMulNBits", 1, MS_DOMAIN, engine="cube")
def matmul_nbits(ctx: InferContext) -> list[TensorType]:
    """Y = A @ dequantize(B)^T + bias, B [N, K] quantized to ``bits`` per block of
    ``block_size`` along K (scales and zero points per block)."""
    a = ctx.input_type(0)
    if a.dtype not in ("float32", "float16"):
        ctx.fail(f"A must be float32 or float16, got {a.dtype}")
    bits, k, n = int(ctx.attrs.get("bits", 4)), ctx.attrs.get("K"), ctx.attrs.get("N")
    block = int(ctx.attrs.get("block_size", 0))
    if k is None or n is None or block < 16 or block & (block - 1):
        ctx.fail("attributes K and N are required, block_size a power of 2 >= 16")
    if bits not in NBITS:
        ctx.unsupported(f"bits={bits}: the native kernel unpacks {NBITS} bits")
    if int(ctx.attrs.get("weight_prepacked", 0)):
        ctx.unsupported("prepacked weights")
    if ctx.input_type(1).dtype != "uint8":
        ctx.fail(f"B must be uint8, got {ctx.input_type(1).dtype}")
    blocks = -(-int(k) // block)
    bs = ctx.input_type(1).shape
    if bs is not None and is_int(bs[0]) and tuple(bs) != (n, blocks, block * bits // 8):
        ctx.fail(f"B {list(bs)} is not [N, k_blocks, blob] = {[n, blocks, block * bits // 8]}")
    xs = ctx.input_shape(0)
    if not xs or (is_int(xs[-1]) and xs[-1] != k):
        ctx.fail(f"A {list(xs)} must end in K = {k}")
    return [TensorType(a.dtype, (*xs[:-1], int(n)))]

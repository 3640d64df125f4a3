"""Kernel tests, default-domain quantization ops: QuantizeLinear, DequantizeLinear (every
opset onnx defines), DynamicQuantizeLinear, QLinearMatMul, MatMulInteger, QLinearConv and
ConvInteger, against onnx's ReferenceEvaluator (onnxruntime for DequantizeLinear 10 and
13, which the reference lacks), integer outputs bit-exact."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from aircc.errors import ShapeInferenceError, UnsupportedVariantError
from aircc.ops import kernel_backend
from kernel_harness import RNG, T, check, infer, rand, run_ours

f32 = np.float32
Q_VERSIONS = (10, 13, 19, 21, 23, 24, 25, 28)


def q(*shape, dtype=np.uint8) -> np.ndarray:
    """Random values over all of an integer type's range."""
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)


def a(value, dtype=f32) -> np.ndarray:
    return np.asarray(value, dtype)


def dq_engine(opset: int) -> str:
    return "onnx" if opset >= 19 else "ort"


# ------------------------------------------------------------------ QuantizeLinear
@pytest.mark.parametrize("opset", Q_VERSIONS)
@pytest.mark.parametrize("zp_type", [np.uint8, np.int8, None])
def test_quantize_per_tensor_every_version(opset, zp_type):
    x = rand(2, 3, 5, lo=-3, hi=3)
    x.flat[:4] = [1000.0, -1000.0, 0.025, -0.075]            # saturation, ties to even
    zp = [] if zp_type is None else [a(3 if zp_type == np.uint8 else -3, zp_type)]
    check("QuantizeLinear", [x, a(0.05)] + zp, opset=opset)


@pytest.mark.parametrize("zp_type", [np.uint8, np.int8])
@pytest.mark.parametrize("opset", [13, 21])
def test_quantize_of_nan_and_infinities_is_onnxruntimes(opset, zp_type):
    """NaN quantizes to the type's low bound as onnxruntime's MLAS has it (ONNX leaves it
    undefined; a quantized BERT whose masked scores got an infinite scale reaches its
    softmax's QDQ with NaN); infinities saturate to the bound they pass (onnxruntime's
    vector path wraps values past int32 to the low bound, its scalar path saturates)."""
    x = np.array([[np.nan, 1000.0, -1000.0, 0.4], [-0.4, np.nan, 3.0, -3.0]], np.float32)
    check("QuantizeLinear", [x, a(0.05), a(5, zp_type)], opset=opset, engine="ort")
    lo, hi = np.iinfo(zp_type).min, np.iinfo(zp_type).max
    x = np.array([np.inf, -np.inf, 1e30, -1e30, np.nan], np.float32)
    got = run_ours("QuantizeLinear", [x, a(0.05), a(5, zp_type)], opset=opset)[1][0]
    np.testing.assert_array_equal(got, np.array([hi, lo, hi, lo, lo], zp_type))


@pytest.mark.parametrize("opset", Q_VERSIONS[1:])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_and_dequantize_per_axis(opset, axis):
    x = rand(3, 4, 5, lo=-2, hi=2)
    n = x.shape[axis]
    scale, zp = RNG.uniform(0.01, 0.05, n).astype(f32), q(n, dtype=np.int8)
    check("QuantizeLinear", [x, scale, zp], {"axis": axis}, opset=opset)
    check("DequantizeLinear", [q(3, 4, 5, dtype=np.int8), scale, zp], {"axis": axis},
          opset=opset, engine=dq_engine(opset))


@pytest.mark.parametrize("opset", [21, 23, 24, 25, 28])
@pytest.mark.parametrize("block,shape,axis", [(2, (4, 6), 1), (4, (6, 10), 1), (3, (7, 4), 0)])
def test_quantize_and_dequantize_blocked(opset, block, shape, axis):
    """Per block of ``block_size`` along ``axis``, the last block possibly shorter."""
    x = rand(*shape, lo=-2, hi=2)
    s = list(shape)
    s[axis] = -(-shape[axis] // block)
    scale, zp = RNG.uniform(0.01, 0.05, s).astype(f32), q(*s, dtype=np.int8)
    attrs = {"axis": axis, "block_size": block}
    check("QuantizeLinear", [x, scale, zp], attrs, opset=opset)
    check("DequantizeLinear", [q(*shape, dtype=np.int8), scale, zp], attrs, opset=opset)


@pytest.mark.parametrize("dtype", ["int16", "uint16", "int4", "uint4", "int2", "uint2"])
def test_quantize_and_dequantize_wide_and_narrow_integers(dtype):
    opset = 25 if dtype.endswith("2") else 21
    dt = np.dtype(dtype)
    x = rand(3, 8, lo=-4, hi=4)
    scale = a(0.001 if "16" in dtype else 0.3)
    zp = np.asarray(1, dt)
    check("QuantizeLinear", [x, scale, zp], opset=opset)
    lo, hi = (-2, 1) if dtype == "int2" else (0, 3) if dtype == "uint2" else \
        (int(ml_dtypes.iinfo(dt).min), int(ml_dtypes.iinfo(dt).max))
    codes = RNG.integers(lo, hi + 1, size=(3, 8)).astype(dt)
    check("DequantizeLinear", [codes, scale, zp], opset=opset)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                   "float8_e5m2fnuz"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_quantize_and_dequantize_float8(dtype, saturate):
    x = rand(4, 6, lo=-3, hi=3)
    if saturate:
        x.flat[:2] = [1e6, -1e6]                 # past the type's range: clamped to its max
    zp = np.zeros((), np.dtype(dtype))
    scale = a(0.01 if saturate else 0.05)       # unsaturated: no value past the type's range
    check("QuantizeLinear", [x, scale, zp], {"saturate": saturate}, opset=19)
    codes = rand(4, 6, lo=-3, hi=3).astype(np.dtype(dtype))
    check("DequantizeLinear", [codes, a(0.5), zp], opset=19)


@pytest.mark.parametrize("dtype,opset", [("float4_e2m1fn", 23), ("float6_e2m3fn", 28),
                                         ("float6_e3m2fn", 28)])
def test_quantize_and_dequantize_sub_byte_floats(dtype, opset):
    from onnx import helper
    attrs = {"output_dtype": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}
    check("QuantizeLinear", [rand(3, 5, lo=-4, hi=4), a(0.5)], attrs, opset=opset)
    codes = rand(3, 5, lo=-3, hi=3).astype(np.dtype(dtype))
    check("DequantizeLinear", [codes, a(0.25)], opset=opset)


@pytest.mark.parametrize("opset", [19, 21, 23])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_quantize_and_dequantize_half_precision(opset, dtype):
    """A float16 x is divided in float16, as onnx's reference does; DequantizeLinear gives
    the scale's type."""
    x = rand(4, 5, lo=-2, hi=2).astype(dtype)
    check("QuantizeLinear", [x, a(0.02, dtype), a(5, np.uint8)], opset=opset)
    check("DequantizeLinear", [q(4, 5), a(0.02, dtype), a(5, np.uint8)], opset=opset,
          rtol=1e-2, atol=1e-2)


def test_quantize_output_dtype_precision_and_int32_input():
    from onnx import TensorProto
    x = rand(3, 4, lo=-1, hi=1)
    check("QuantizeLinear", [x, a(0.01)], {"output_dtype": TensorProto.INT8}, opset=21)
    check("QuantizeLinear", [x.astype(np.float16), a(0.01)],
          {"precision": TensorProto.FLOAT}, opset=23)
    check("QuantizeLinear", [RNG.integers(-300, 300, (3, 4)).astype(np.int32), a(1.5),
                             a(0, np.int8)], opset=13)


@pytest.mark.parametrize("opset", Q_VERSIONS)
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_dequantize_every_version(opset, dtype):
    """int32 with a zero point of 0 is how the quantizers store a bias."""
    x = q(2, 3, 4, dtype=dtype) if dtype != np.int32 else \
        RNG.integers(-70000, 70000, (2, 3, 4)).astype(np.int32)
    zp = a(0 if dtype == np.int32 else 7, dtype)
    check("DequantizeLinear", [x, a(0.003), zp], opset=opset, engine=dq_engine(opset))
    check("DequantizeLinear", [x, a(0.003)], opset=opset, engine=dq_engine(opset))


def test_dequantize_output_dtype_and_power_of_two_scales():
    from onnx import TensorProto
    check("DequantizeLinear", [q(3, 4), a(0.1), a(2, np.uint8)],
          {"output_dtype": TensorProto.FLOAT16}, opset=23, rtol=1e-3, atol=1e-3)
    e8m0 = a(0.25, ml_dtypes.float8_e8m0fnu)
    check("DequantizeLinear", [q(3, 4, dtype=np.int8), e8m0], {"output_dtype": TensorProto.FLOAT},
          opset=24)
    check("QuantizeLinear", [rand(3, 4), e8m0, a(0, np.int8)], opset=24)
    with pytest.raises(ShapeInferenceError, match="needs output_dtype"):
        infer("DequantizeLinear", [T((3,), "int8"), T((), "float8_e8m0fnu")], opset=24)


@pytest.mark.parametrize("values", [(-3.0, 5.0), (0.5, 7.0), (-9.0, -0.25), (0.0, 0.0),
                                    (-1e-3, 1e-3)])
def test_dynamic_quantize_linear(values):
    x = RNG.uniform(*values, size=(5, 7)).astype(f32) if values[0] != values[1] \
        else np.zeros((5, 7), f32)
    check("DynamicQuantizeLinear", [x], opset=11, n_out=3)


def test_quantize_shape_rules_refuse_what_does_not_fit():
    with pytest.raises(ShapeInferenceError, match="cannot quantize to int16"):
        infer("QuantizeLinear", [T((2, 3)), T((), "float32"), T((), "int16")], opset=13)
    with pytest.raises(ShapeInferenceError, match="3 values for axis 1"):
        infer("QuantizeLinear", [T((2, 4)), T((3,))], {"axis": 1}, opset=13)
    with pytest.raises(ShapeInferenceError, match="blocked y_scale"):
        infer("QuantizeLinear", [T((4, 6)), T((4, 2))], {"axis": 1, "block_size": 2}, opset=21)
    with pytest.raises(ShapeInferenceError, match="x_zero_point is int8, expected uint8"):
        infer("DequantizeLinear", [T((2,), "uint8"), T(()), T((), "int8")], opset=13)
    (t,) = infer("QuantizeLinear", [T(("B", 3)), T(())], opset=13)
    assert t == T(("B", 3), "uint8")


# ------------------------------------------------------------------ matrix products
INT8_PAIRS = [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)]
MATMUL_SHAPES = [((4, 300), (300, 6)), ((2, 3, 20), (20, 7)), ((2, 3, 20), (2, 20, 7)),
                 ((2, 1, 3, 8), (4, 8, 5)), ((20,), (20, 7)), ((3, 20), (20,))]


@pytest.mark.parametrize("opset", [10, 21])
@pytest.mark.parametrize("at,bt", INT8_PAIRS)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_qlinear_matmul(opset, at, bt, sa, sb):
    yt = at
    check("QLinearMatMul", [q(*sa, dtype=at), a(0.02), a(3, at), q(*sb, dtype=bt), a(0.01),
                            a(2, bt), a(0.3), a(5, yt)], opset=opset)


@pytest.mark.parametrize("at,bt", INT8_PAIRS)
def test_qlinear_matmul_per_column_and_half_scales(at, bt):
    n = 6
    b_scale = RNG.uniform(0.005, 0.02, n).astype(f32)
    check("QLinearMatMul", [q(4, 300, dtype=at), a(0.02), a(3, at), q(300, n, dtype=bt),
                            b_scale, q(n, dtype=bt), a(0.3), a(5, at)], opset=21)
    check("QLinearMatMul", [q(4, 30, dtype=at), a(0.02, np.float16), a(3, at),
                            q(30, n, dtype=bt), b_scale.astype(np.float16), a(1, bt),
                            a(0.3, np.float16), a(5, at)], opset=21)


@pytest.mark.parametrize("at,bt", INT8_PAIRS)
def test_matmul_integer(at, bt):
    check("MatMulInteger", [q(4, 300, dtype=at), q(300, 6, dtype=bt), a(3, at), a(2, bt)], opset=10)
    check("MatMulInteger", [q(2, 4, 30, dtype=at), q(30, 6, dtype=bt)], opset=10)
    check("MatMulInteger", [q(5, 30, dtype=at), q(30, 6, dtype=bt), a(9, at), q(6, dtype=bt)],
          opset=10)


@pytest.mark.parametrize("at,bt", INT8_PAIRS)
def test_integer_products_are_exact_past_float32(at, bt):
    """K * |a - a_zp| * |b - b_zp| far past 2**24: the float32 product is summed in chunks."""
    ai, bi = np.iinfo(at), np.iinfo(bt)
    x = np.full((3, 5000), ai.max, at)
    w = np.full((5000, 4), bi.min, bt)
    x[1, ::2], w[::3, 1] = ai.min, bi.max
    (out,) = check("MatMulInteger", [x, w, a(ai.min, at), a(bi.max, bt)], opset=10)
    assert np.abs(out.astype(np.int64)).max() > 2 ** 24
    check("QLinearMatMul", [x, a(0.02), a(ai.min, at), w, a(0.01), a(bi.max, bt), a(500.0),
                            a(0, at)], opset=21)


def test_exact_matmul_chunks_agree_with_int64():
    from aircc.executor.kernels.quant_arith import exact_matmul, k_chunk
    a8 = RNG.integers(-255, 256, (7, 3000)).astype(f32)
    b8 = RNG.integers(-255, 256, (3000, 5)).astype(f32)
    assert k_chunk(3000, 255, 255) < 3000
    got = exact_matmul(a8, b8, 255, 255)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, a8.astype(np.int64) @ b8.astype(np.int64))
    small = exact_matmul(a8[:, :100], b8[:100], 255, 255)
    assert small.dtype == np.float32
    np.testing.assert_array_equal(small, a8[:, :100].astype(np.int64) @ b8[:100].astype(np.int64))


def test_matmul_shape_rules():
    (t,) = infer("QLinearMatMul", [T(("B", 3, 8), "uint8"), T(()), T((), "uint8"),
                                   T((8, 5), "int8"), T(()), T((), "int8"), T(()),
                                   T((), "int8")], opset=10)
    assert t == T(("B", 3, 5), "int8")
    with pytest.raises(ShapeInferenceError, match="inner dims"):
        infer("MatMulInteger", [T((3, 4), "uint8"), T((5, 6), "int8")], opset=10)
    with pytest.raises(ShapeInferenceError, match="int8 or uint8"):
        infer("MatMulInteger", [T((3, 4), "int16"), T((4, 6), "int8")], opset=10)
    with pytest.raises(UnsupportedVariantError, match="float8"):
        infer("QLinearMatMul", [T((2, 3), "float8_e4m3fn"), T(()), T((), "float8_e4m3fn"),
                                T((3, 2), "float8_e4m3fn"), T(()), T((), "float8_e4m3fn"),
                                T(()), T((), "float8_e4m3fn")], opset=21)


# ------------------------------------------------------------------ convolutions
CONV_CASES = [
    (dict(), (1, 3, 8, 8), (4, 3, 3, 3)),
    (dict(group=2, pads=[1, 1, 1, 1], strides=[2, 2]), (2, 4, 9, 9), (6, 2, 3, 3)),
    (dict(group=2, dilations=[2, 1], pads=[0, 1, 2, 1]), (1, 4, 9, 9), (6, 2, 3, 3)),
    (dict(group=4, pads=[1, 1, 1, 1]), (2, 4, 7, 7), (4, 1, 3, 3)),          # depthwise
    (dict(group=2, pads=[1, 1, 1, 1]), (1, 2, 6, 6), (4, 1, 3, 3)),          # multiplier 2
    (dict(auto_pad="SAME_UPPER", strides=[2, 2]), (1, 3, 7, 8), (5, 3, 2, 2)),
    (dict(auto_pad="VALID", kernel_shape=[3, 3]), (1, 3, 7, 8), (5, 3, 3, 3)),
    (dict(strides=[2]), (1, 3, 9), (2, 3, 4)),                               # 1-D
    (dict(pads=[1, 0, 1, 1, 0, 1]), (1, 2, 4, 5, 6), (3, 2, 2, 2, 3)),       # 3-D
]


@pytest.mark.parametrize("at,wt", INT8_PAIRS)
@pytest.mark.parametrize("attrs,xs,ws", CONV_CASES)
def test_qlinear_conv(at, wt, attrs, xs, ws):
    x, w, m = q(*xs, dtype=at), q(*ws, dtype=wt), ws[0]
    bias = RNG.integers(-3000, 3000, m).astype(np.int32)
    check("QLinearConv", [x, a(0.02), a(7, at), w, a(0.01), a(3, wt), a(0.05), a(9, at), bias],
          attrs, opset=10)
    if len(xs) == 4:                              # per output channel (the reference's rank)
        check("QLinearConv", [x, a(0.02), a(7, at), w, RNG.uniform(0.005, 0.02, m).astype(f32),
                              q(m, dtype=wt), a(0.05), a(9, at)], attrs, opset=10)


@pytest.mark.parametrize("at,wt", INT8_PAIRS)
@pytest.mark.parametrize("attrs,xs,ws", CONV_CASES)
def test_conv_integer(at, wt, attrs, xs, ws):
    x, w = q(*xs, dtype=at), q(*ws, dtype=wt)
    check("ConvInteger", [x, w, a(7, at), a(3, wt)], attrs, opset=10)
    check("ConvInteger", [x, w], attrs, opset=10)
    if len(xs) == 4:
        check("ConvInteger", [x, w, a(7, at), q(ws[0], dtype=wt)], attrs, opset=10)


def test_convolutions_are_exact_past_float32():
    """512 channels of 3x3 taps of extreme values: sums far past 2**24."""
    x = np.full((1, 512, 5, 5), 255, np.uint8)
    w = np.full((2, 512, 3, 3), -128, np.int8)
    (out,) = check("ConvInteger", [x, w, a(0, np.uint8), a(127, np.int8)], opset=10)
    assert np.abs(out.astype(np.int64)).max() > 2 ** 24
    check("QLinearConv", [x, a(0.02), a(0, np.uint8), w, a(0.01), a(127, np.int8), a(900.0),
                          a(0, np.uint8)], {"pads": [1, 1, 1, 1]}, opset=10)


@pytest.mark.parametrize("op", ["QLinearConv", "ConvInteger", "QLinearMatMul", "MatMulInteger"])
def test_constant_weights_bound_once_give_the_kernels_results(op):
    """``prepare`` with constant weights (shifted once, as a bound task does) computes what
    ``kernel`` computes."""
    from aircc.ops import TensorType
    from kernel_harness import TARGET
    impl = kernel_backend("numpy").impl(op, 10)
    if op in ("QLinearConv", "ConvInteger"):
        x, w = q(2, 4, 6, 6), q(6, 2, 3, 3, dtype=np.int8)
        attrs = {"group": 2, "pads": [1, 1, 1, 1]}
        out_shape = (2, 6, 6, 6)
    else:
        x, w, attrs, out_shape = q(3, 5, 40), q(40, 6, dtype=np.int8), {}, (3, 5, 6)
    if op.startswith("QLinear"):
        ins = [x, a(0.02), a(7, np.uint8), w, a(0.01), a(1, np.int8), a(0.05), a(9, np.uint8)]
        dtype, weight = np.uint8, 3
    else:
        ins, dtype, weight = [x, w, a(7, np.uint8), a(1, np.int8)], np.int32, 1
    tiling = impl.tile([TensorType.of(v) for v in ins], attrs, TARGET)
    want = np.empty(out_shape, dtype)
    impl.kernel(ins, [want], attrs, tiling, None)
    got = np.zeros(out_shape, dtype)
    constant = [i in (weight, weight + 1, weight + 2) or i > weight for i in range(len(ins))]
    run = impl.prepare(ins, [got], attrs, tiling, None, constant)
    assert run is not None
    run()
    np.testing.assert_array_equal(got, want)

"""Kernel tests, onnxruntime's quantization ops (``com.microsoft``): each through our shape
rule and kernel, and through onnxruntime (one thread) on a one-node model; integer outputs
bit-exact, float outputs to float32 rounding."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from aircc.errors import ShapeInferenceError, UnsupportedVariantError
from aircc.ops import InferContext, TensorType, kernel_backend, op_def
from kernel_harness import COVERED, RNG, attr_values, garbage
from onnx import helper

MS = "com.microsoft"
f32 = np.float32
BACKEND = kernel_backend("numpy")


def q(*shape, dtype=np.uint8) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)


def a(value, dtype=f32) -> np.ndarray:
    return np.asarray(value, dtype)


def zp(dtype, value: int = 0) -> np.ndarray:
    """A zero point: ``value`` counted from the type's middle (uint8 128, int8 0)."""
    return np.asarray(value + (128 if dtype == np.uint8 else 0), dtype)


def _node(op, inputs, attrs, n_out):
    names = [f"x{i}" if v is not None else "" for i, v in enumerate(inputs)]
    node = helper.make_node(op, names, [f"y{j}" for j in range(n_out)], name="n0", domain=MS,
                            **(attrs or {}))
    return names, node


def onnxruntime(op, inputs, attrs=None, n_out=1) -> list:
    names, node = _node(op, inputs, attrs, n_out)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for n, v in zip(names, inputs) if n]
    graph = helper.make_graph([node], "g", vi, [helper.make_empty_tensor_value_info(f"y{j}")
                                                for j in range(n_out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {n: v for n, v in zip(names, inputs) if n})


def ours(op, inputs, attrs=None, n_out=1, constant=None) -> tuple[list, list]:
    """(output types, outputs) of our shape rule and kernel (or, given which inputs are
    ``constant``, of the kernel bound by ``prepare``)."""
    _, node = _node(op, inputs, attrs, n_out)
    at = attr_values(node)
    ctx = InferContext([None if v is None else TensorType.of(v) for v in inputs], at,
                       [None] * len(inputs), node="n0", op=op, num_outputs=n_out)
    definition = op_def(op, 1, MS)
    types = definition.infer(ctx)
    impl = BACKEND.impl(op, 1, MS)
    COVERED.add((MS, definition.name, definition.since))     # the registry guard's record
    outs = [garbage(t) for t in types]
    if constant is None:
        impl.kernel(list(inputs), outs, at, {}, None)
    else:
        run = impl.prepare(list(inputs), outs, at, {}, None, constant)
        assert run is not None, "prepare left the bound use to the kernel"
        run()
    return types, outs


def check(op, inputs, attrs=None, n_out=1, rtol=1e-5, atol=1e-6, constant=None) -> list:
    want = onnxruntime(op, inputs, attrs, n_out)
    types, got = ours(op, inputs, attrs, n_out, constant)
    for t, g, w in zip(types, got, want):
        assert (t.shape, t.dtype) == (w.shape, w.dtype.name), (t, w.shape, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


INT8 = [np.uint8, np.int8]


# ------------------------------------------------------------------ elementwise
BROADCASTS = [((4, 8, 16), (4, 8, 16)), ((4, 8, 16), (16,)), ((4, 8, 16), (1,)),
              ((1,), (4, 8, 16)), ((2, 8, 1, 1), (1, 8, 5, 5)), ((8, 1), (1, 16)),
              ((3, 1, 4), (1, 5, 1)), ((), (3, 7))]


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", INT8)
@pytest.mark.parametrize("sa,sb", BROADCASTS)
def test_qlinear_add_mul(op, dtype, sa, sb):
    for scales in ((0.031, 0.017, 0.05), tuple(RNG.uniform(0.005, 0.1, 3))):
        check(op, [q(*sa, dtype=dtype), a(scales[0]), zp(dtype, -8), q(*sb, dtype=dtype),
                   a(scales[1]), zp(dtype, 5), a(scales[2]), zp(dtype)])


@pytest.mark.parametrize("dtype", INT8)
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearSigmoid"])
def test_omitted_zero_points_are_zeros(dtype, op):
    """An omitted zero point is 0 (onnxruntime's type inference refuses a model that omits
    them, so the explicit zeros are what is checked against it)."""
    x, z = q(5, 6, dtype=dtype), np.zeros((), dtype)
    full = [x, a(0.02), z, x[::-1].copy(), a(0.03), z, a(0.04), z] if op == "QLinearAdd" \
        else [x, a(0.02), z, a(1 / 256), z]
    want = check(op, full)
    _, got = ours(op, [None if v is z else v for v in full])
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("dtype", INT8)
@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {}),
                                      ("QLinearLeakyRelu", {"alpha": 0.2})])
def test_qlinear_lookup_table_ops(dtype, op, attrs):
    x = q(2, 3, 8, 8, dtype=dtype)
    check(op, [x, a(0.043), zp(dtype, -3), a(1 / 256 if op == "QLinearSigmoid" else 0.03),
               zp(dtype, -100 if op == "QLinearSigmoid" else 10)], attrs)


@pytest.mark.parametrize("dtype", INT8)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_qlinear_concat(dtype, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    shapes[1][axis] = 5
    xs = [q(*s, dtype=dtype) for s in shapes]
    y_scale, y_zp = a(0.05), zp(dtype, -8)
    inputs = [y_scale, y_zp, xs[0], a(0.043), zp(dtype, 3), xs[1], y_scale, y_zp,   # a copy
              xs[2], a(0.02), zp(dtype)]
    check("QLinearConcat", inputs, {"axis": axis})


def test_qlinear_where():
    dtype = np.uint8                 # onnxruntime indexes its int8 tables with negative values
    cond = RNG.random((3, 1, 8)) < 0.5
    check("QLinearWhere", [cond, q(3, 5, 8, dtype=dtype), a(0.043), zp(dtype, 3),
                           q(5, 1, dtype=dtype), a(0.05), zp(dtype, -1), a(0.06), zp(dtype)])


@pytest.mark.parametrize("dtype", INT8)
@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 1), (12, 1), (11, 2), (13, None)])
@pytest.mark.parametrize("x_scale", [0.02, 0.08, 0.3])
def test_qlinear_softmax(dtype, opset, axis, x_scale):
    attrs = {"opset": opset} | ({} if axis is None else {"axis": axis})
    y_zp = a(0 if dtype == np.uint8 else -128, dtype)
    check("QLinearSoftmax", [q(2, 3, 8, 40, dtype=dtype), a(x_scale), zp(dtype, 12), a(1 / 256),
                             y_zp], attrs)


# ------------------------------------------------------------------ pools
POOLS = [dict(kernel_shape=[2, 2], strides=[2, 2]), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
         dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
         dict(kernel_shape=[8, 7]),                                   # the global pool's path
         dict(kernel_shape=[3, 2], auto_pad="SAME_UPPER", strides=[2, 1]),
         dict(kernel_shape=[2, 2], channels_last=1)]


@pytest.mark.parametrize("dtype", INT8)
@pytest.mark.parametrize("attrs", POOLS)
def test_qlinear_average_pool(dtype, attrs):
    check("QLinearAveragePool", [q(2, 3, 8, 7, dtype=dtype), a(0.043), zp(dtype, -3), a(0.02),
                                 zp(dtype, -18)], attrs)


@pytest.mark.parametrize("shape,attrs", [((2, 3, 9), dict(kernel_shape=[3], pads=[1, 1])),
                                         ((1, 2, 4, 5, 6), dict(kernel_shape=[2, 2, 3]))])
def test_qlinear_average_pool_1d_and_3d(shape, attrs):
    check("QLinearAveragePool", [q(*shape), a(0.043), zp(np.uint8, 3), a(0.02), zp(np.uint8)],
          attrs)


@pytest.mark.parametrize("dtype", INT8)
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(dtype, channels_last):
    check("QLinearGlobalAveragePool", [q(2, 6, 7, 5, dtype=dtype), a(0.043), zp(dtype, -3),
                                       a(0.02), zp(dtype, 2)], {"channels_last": channels_last})


# ------------------------------------------------------------------ matrix products
@pytest.mark.parametrize("bt", INT8)
@pytest.mark.parametrize("attrs", [{}, {"transB": 1}, {"transA": 1, "alpha": 0.5}])
@pytest.mark.parametrize("out", ["quantized", "float", "per_column"])
def test_qgemm(bt, attrs, out):
    a_ = q(40, 12) if attrs.get("transA") else q(12, 40)
    b = q(24, 40, dtype=bt) if attrs.get("transB") else q(40, 24, dtype=bt)
    c = RNG.integers(-5000, 5000, 24).astype(np.int32)
    if out == "per_column":
        b_scale, b_zp = RNG.uniform(0.005, 0.02, 24).astype(f32), \
            (np.zeros(24, bt) if bt == np.int8 else q(24, dtype=bt))
        inputs = [a_, a(0.02), a(120, np.uint8), b, b_scale, b_zp, None, a(0.3), a(128, np.uint8)]
    else:
        inputs = [a_, a(0.02), a(120, np.uint8), b, a(0.01), zp(bt, 3), c]
        inputs += [a(0.3), a(128, np.uint8)] if out == "quantized" else []
    check("QGemm", inputs, attrs)
    check("QGemm", inputs, attrs, constant=[i in (3, 4, 5) for i in range(len(inputs))])


@pytest.mark.parametrize("bt", INT8)
@pytest.mark.parametrize("per_column", [False, True])
def test_dynamic_quantize_matmul(bt, per_column):
    x = RNG.standard_normal((3, 5, 40)).astype(f32)
    b_scale = RNG.uniform(0.005, 0.02, 24).astype(f32) if per_column else a(0.01)
    b_zp = np.zeros(24, bt) + (0 if bt == np.int8 else 131) if per_column else zp(bt, 3)
    inputs = [x, q(40, 24, dtype=bt), b_scale, b_zp, RNG.standard_normal(24).astype(f32)]
    check("DynamicQuantizeMatMul", inputs)
    check("DynamicQuantizeMatMul", inputs[:3])
    check("DynamicQuantizeMatMul", inputs, constant=[False, True, True, True, True])
    check("DynamicQuantizeMatMul", [np.zeros((2, 40), f32)] + inputs[1:])   # a constant A


@pytest.mark.parametrize("bt", INT8)
@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_integer_to_float(bt, per_column):
    b_scale = RNG.uniform(0.005, 0.02, 24).astype(f32) if per_column else a(0.01)
    inputs = [q(3, 5, 40), q(40, 24, dtype=bt), a(0.02), b_scale, a(120, np.uint8), zp(bt, 3),
              RNG.standard_normal(24).astype(f32)]
    check("MatMulIntegerToFloat", inputs)
    check("MatMulIntegerToFloat", inputs[:4])
    check("MatMulIntegerToFloat", inputs, constant=[False, True, False, True, False, True, True])


#: (bits, zero points): onnxruntime's CPU kernel refuses 8-bit weights with float ones.
NBITS_CASES = [(bits, z) for bits in (2, 4, 8) for z in ("none", "packed", "float")
               if (bits, z) != (8, "float")]


@pytest.mark.parametrize("bits,zero_points", NBITS_CASES)
@pytest.mark.parametrize("k,n,block", [(64, 24, 32), (80, 16, 32), (40, 8, 16)])
def test_matmul_nbits(bits, k, n, block, zero_points):
    blocks = -(-k // block)
    b = q(n, blocks, block * bits // 8)
    scales = RNG.uniform(0.01, 0.1, n * blocks).astype(f32)
    zps = {"none": None, "packed": q(n * -(-blocks * bits // 8)),
           "float": RNG.uniform(0, 2 ** bits - 1, n * blocks).astype(f32)}[zero_points]
    inputs = [RNG.standard_normal((2, 3, k)).astype(f32), b, scales, zps, None,
              RNG.standard_normal(n).astype(f32)]
    attrs = {"K": k, "N": n, "bits": bits, "block_size": block}
    check("MatMulNBits", inputs, attrs, atol=1e-5)
    check("MatMulNBits", inputs, attrs, atol=1e-5, constant=[False] + [True] * 5)


# ------------------------------------------------------------------ LSTM
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("wt", INT8)
@pytest.mark.parametrize("variant", ["plain", "peepholes_clip", "input_forget_activations"])
def test_dynamic_quantize_lstm(direction, wt, variant):
    nd, h, i, s, b = 2 if direction == "bidirectional" else 1, 6, 5, 7, 3
    x = RNG.standard_normal((s, b, i)).astype(f32)
    w, r = q(nd, i, 4 * h, dtype=wt), q(nd, h, 4 * h, dtype=wt)
    bias = (RNG.standard_normal((nd, 8 * h)) * 0.1).astype(f32)
    h0, c0 = [(RNG.standard_normal((nd, b, h)) * 0.5).astype(f32) for _ in range(2)]
    w_scale = RNG.uniform(0.002, 0.01, nd).astype(f32)
    r_scale = RNG.uniform(0.002, 0.01, (nd, 4 * h)).astype(f32)
    w_zp = np.full(nd, 0 if wt == np.int8 else 128, wt)
    r_zp = np.full((nd, 4 * h), 0 if wt == np.int8 else 127, wt)
    attrs = {"direction": direction, "hidden_size": h}
    p = None
    if variant == "peepholes_clip":
        p, attrs["clip"] = (RNG.standard_normal((nd, 3 * h)) * 0.1).astype(f32), 2.0
    elif variant == "input_forget_activations":
        attrs.update(input_forget=1, activations=["HardSigmoid", "Tanh", "Softsign"] * nd)
    inputs = [x, w, r, bias, None, h0, c0, p, w_scale, w_zp, r_scale, r_zp]
    check("DynamicQuantizeLSTM", inputs, attrs, n_out=3, rtol=1e-5, atol=1e-6)
    constant = [k not in (0, 5, 6) for k in range(12)]
    check("DynamicQuantizeLSTM", inputs, attrs, n_out=3, rtol=1e-5, atol=1e-6, constant=constant)


# ------------------------------------------------------------------ BERT
MASKS = [None, np.array([6, 3], np.int32), np.array([6, 4, 0, 1], np.int32),
         (RNG.random((2, 6)) < 0.7).astype(np.int32),
         (RNG.random((2, 6, 6)) < 0.7).astype(np.int32)]


@pytest.mark.parametrize("wt", INT8)
@pytest.mark.parametrize("mask", MASKS, ids=["none", "ends", "ends_starts", "2d", "3d"])
@pytest.mark.parametrize("attrs", [{}, {"unidirectional": 1},
                                   {"scale": 0.3, "mask_filter_value": -1000.0}])
def test_qattention(wt, mask, attrs):
    inputs = [q(2, 6, 16), q(16, 72, dtype=wt), RNG.standard_normal(72).astype(f32), a(0.02),
              a(0.01), mask, a(120, np.uint8), zp(wt, 3)]
    check("QAttention", inputs, {"num_heads": 4, **attrs}, rtol=1e-5, atol=1e-4)
    check("QAttention", inputs, {"num_heads": 4, **attrs}, rtol=1e-5, atol=1e-4,
          constant=[k in (1, 2, 3, 4, 7) for k in range(8)])


@pytest.mark.parametrize("dtype", INT8)
@pytest.mark.parametrize("segments", [True, False])
def test_qembed_layer_normalization(dtype, segments):
    b, s, vocab, h = 2, 6, 30, 16
    ids = RNG.integers(0, vocab, (b, s)).astype(np.int32)
    seg_ids = RNG.integers(0, 2, (b, s)).astype(np.int32) if segments else None
    mask = (RNG.random((b, s)) < 0.7).astype(np.int32)
    inputs = [ids, seg_ids, q(vocab, h, dtype=dtype), q(s, h, dtype=dtype),
              q(2, h, dtype=dtype) if segments else None, q(h, dtype=dtype), q(h, dtype=dtype),
              mask, a(0.01), a(0.02), a(0.03) if segments else None, a(0.005), a(0.004),
              zp(dtype), zp(dtype, -8), zp(dtype, 2) if segments else None, zp(dtype, -28),
              zp(dtype)]
    check("QEmbedLayerNormalization", inputs, n_out=2)
    check("QEmbedLayerNormalization", inputs[:7] + [None] + inputs[8:], n_out=2)


# ------------------------------------------------------------------ Q / DQ
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_microsoft_quantize_and_dequantize(dtype):
    x = RNG.standard_normal((3, 4, 5)).astype(f32)
    small = np.dtype(dtype).itemsize == 1
    scale = a(0.02 if small else 0.0002)
    check("QuantizeLinear", [x, scale, a(3, dtype)])
    check("QuantizeLinear", [x.astype(np.float16), scale.astype(np.float16), a(3, dtype)])
    check("DequantizeLinear", [q(3, 4, 5, dtype=dtype), scale, a(3, dtype)])
    per_axis = RNG.uniform(0.01, 0.03, 4).astype(f32) * (1 if small else 0.01)
    check("QuantizeLinear", [x, per_axis, np.full(4, 3, dtype)], {"axis": 1})
    check("DequantizeLinear", [q(3, 4, 5, dtype=dtype), per_axis, np.full(4, 3, dtype)],
          {"axis": 1})


def test_contrib_shape_rules_refuse_what_does_not_fit():
    def infer(op, types, attrs=None):
        ctx = InferContext(types, attrs or {}, [None] * len(types), node="n", op=op)
        return op_def(op, 1, MS).infer(ctx)

    u8, f = (lambda *s: TensorType("uint8", s)), (lambda *s: TensorType("float32", s))
    (t,) = infer("QLinearAdd", [u8("B", 1, 4), f(), u8(), u8(3, 1), f(), u8(), f(), u8()])
    assert t == TensorType("uint8", ("B", 3, 4))
    with pytest.raises(ShapeInferenceError, match="A and B differ in type"):
        infer("QLinearMul", [u8(2), f(), u8(), TensorType("int8", (2,)), f(), None, f(), u8()])
    with pytest.raises(UnsupportedVariantError, match="per-tensor"):
        infer("QLinearSigmoid", [u8(2, 3), f(3), None, f(), None])
    with pytest.raises(ShapeInferenceError, match="must end in K"):
        infer("MatMulNBits", [f(2, 30), u8(8, 1, 16), f(8)],
              {"K": 32, "N": 8, "bits": 4, "block_size": 32})
    with pytest.raises(UnsupportedVariantError, match="sequence_lens"):
        infer("DynamicQuantizeLSTM", [f(2, 1, 3), TensorType("int8", (1, 3, 8)),
                                      TensorType("int8", (1, 2, 8)), None,
                                      TensorType("int32", (1,))] + [None] * 3 +
              [f(1), TensorType("int8", (1,)), f(1), TensorType("int8", (1,))], {"hidden_size": 2})

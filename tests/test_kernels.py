"""Kernel library tests: every op checked against onnx's ReferenceEvaluator (or onnxruntime)."""
from __future__ import annotations

import math

import msgpack
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from aircc.compiler.ir.graph import TensorType
from aircc.errors import ShapeInferenceError, UnsupportedOpError
from aircc.executor.kernels import registry
from aircc.executor.kernels.registry import InferContext

RNG = np.random.default_rng(0)
COVERED: set[tuple[str, int]] = set()  # (op, since) pairs whose kernels ran


def rand(*shape, dtype=np.float32, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def ints(*shape, lo=-5, hi=6, dtype=np.int64):
    return RNG.integers(lo, hi, size=shape).astype(dtype)


def _attr_values(node: onnx.NodeProto) -> dict:
    """Attributes decoded the way the importer hands them to kernels."""
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.type == onnx.AttributeProto.TENSOR:
            v = numpy_helper.to_array(v)
        elif a.type == onnx.AttributeProto.STRING:
            v = v.decode()
        elif a.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS):
            v = list(v)
        elif a.type == onnx.AttributeProto.STRINGS:
            v = [s.decode() for s in v]
        out[a.name] = v
    return out


def _model(op_type, inputs, attrs, opset, n_out):
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(op_type, names, [f"y{j}" for j in range(n_out)], name="n0",
                            **(attrs or {}))
    vi = [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in zip(names, inputs) if n]
    outs = [helper.make_empty_tensor_value_info(f"y{j}") for j in range(n_out)]
    graph = helper.make_graph([node], "g", vi, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, node


def _reference(model, inputs, engine):
    feeds = {f"x{i}": a for i, a in enumerate(inputs) if a is not None}
    if engine == "ort":
        import onnxruntime as ort
        model = onnx.shape_inference.infer_shapes(model)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    return ReferenceEvaluator(model).run(None, feeds)


def _garbage(t: TensorType) -> np.ndarray:
    a = np.empty(t.shape, dtype=t.dtype)
    if a.dtype.kind == "f":
        a.fill(np.nan)
    elif a.dtype.kind == "b":
        a[...] = RNG.integers(0, 2, size=a.shape).astype(bool)
    else:
        a.fill(123)
    return a


def run_ours(op_type, inputs, attrs=None, opset=13, n_out=1, node=None):
    """Infer, tile and run our kernel; returns (output types, outputs)."""
    if node is None:
        _, node = _model(op_type, inputs, attrs, opset, n_out)
    at = _attr_values(node)
    spec = registry.lookup(op_type, opset)
    COVERED.add((spec.name, spec.since))
    types = [None if a is None else TensorType.of(a) for a in inputs]
    values = [a if (i in spec.value_inputs and a is not None) else None
              for i, a in enumerate(inputs)]
    ctx = InferContext(types, at, values, node="n0", op=op_type, num_outputs=n_out)
    out_types = spec.infer(ctx)
    assert len(out_types) == n_out
    tiling = spec.tiling(types, at) if spec.tiling else {}
    msgpack.packb(tiling)  # must be storable
    nws = tiling.get("workspace", 0)
    ws = np.empty(nws, np.uint8) if nws else None
    outs = [_garbage(t) for t in out_types]
    spec.kernel([None if a is None else a for a in inputs], outs, at, tiling, ws)
    return out_types, outs


def check(op_type, inputs, attrs=None, opset=13, n_out=1, engine="onnx", rtol=1e-5,
          atol=1e-6, compare=None):
    """Run ``op_type`` through our path and the reference, compare types and values."""
    model, node = _model(op_type, inputs, attrs, opset, n_out)
    expected = _reference(model, inputs, engine)
    out_types, outs = run_ours(op_type, inputs, attrs, opset, n_out, node)
    for j in range(n_out) if compare is None else compare:
        exp = np.asarray(expected[j])
        assert out_types[j].shape == exp.shape, (j, out_types[j], exp.shape)
        assert out_types[j].dtype == exp.dtype.name, (j, out_types[j], exp.dtype)
        if exp.dtype.kind in "fc":
            np.testing.assert_allclose(outs[j], exp, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(outs[j], exp)
    return outs


def infer(op_type, types, attrs=None, opset=13, values=None, n_out=1):
    spec = registry.lookup(op_type, opset)
    ctx = InferContext(types, attrs or {}, values or [None] * len(types), node="n",
                       op=op_type, num_outputs=n_out)
    return spec.infer(ctx)


def T(shape, dtype="float32"):
    return TensorType(dtype, tuple(shape))


# ====================================================================== Conv
CONV_CASES = [
    # (x shape, w shape, attrs)
    ((1, 3, 9, 9), (4, 3, 3, 3), {}),
    ((2, 3, 9, 9), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 10, 11), (5, 3, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 3]}),
    ((1, 4, 11, 11), (6, 4, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((2, 8, 7, 7), (6, 8, 1, 1), {}),                       # pointwise
    ((2, 8, 7, 7), (6, 4, 1, 1), {"group": 2}),             # grouped pointwise
    ((1, 8, 7, 7), (8, 2, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((2, 6, 9, 9), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 9, 9), (8, 1, 3, 3), {"group": 4}),             # channel multiplier 2
    ((1, 3, 10, 10), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 10, 10), (4, 3, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [3, 3]}),
    ((1, 3, 10, 10), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 3, 8, 8), (4, 3, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 8, 8), (4, 3, 1, 1), {"pads": [1, 1, 1, 1]}),
    ((2, 3, 20), (4, 3, 5), {"pads": [2, 2], "strides": [2]}),  # 1-D
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 3), {"pads": [1, 1, 1, 0, 1, 1]}),  # 3-D
    ((1, 2, 5, 5), (3, 2, 3, 3), {"kernel_shape": [3, 3], "pads": [0, 1, 0, 1]}),
    ((1, 3, 13, 12), (4, 3, 3, 3), {"dilations": [2, 2], "strides": [2, 2], "pads": [1, 2, 2, 1]}),
    ((1, 3, 13, 12), (4, 3, 5, 3), {"dilations": [1, 2], "strides": [1, 2], "pads": [2, 2, 2, 2]}),
    ((2, 4, 11, 11), (4, 1, 3, 3), {"group": 4, "dilations": [2, 2], "strides": [2, 2],
                                    "pads": [1, 1, 1, 1]}),
    ((1, 4, 11, 11), (4, 1, 5, 5), {"group": 4, "strides": [3, 3], "pads": [2, 2, 2, 2]}),
    ((1, 6, 10, 10), (6, 1, 3, 1), {"group": 6, "pads": [1, 0, 1, 0]}),
    ((1, 8, 9, 9), (4, 8, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 15, 15), (2, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ((1, 6, 8), (6, 1, 3), {"group": 6, "pads": [1, 1]}),  # 1-D depthwise
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xs,wsh,attrs", CONV_CASES)
def test_conv(xs, wsh, attrs, bias):
    inputs = [rand(*xs), rand(*wsh)]
    if bias:
        inputs.append(rand(wsh[0]))
    check("Conv", inputs, attrs, opset=11, rtol=1e-4, atol=1e-5)


def test_conv_blocks(monkeypatch):
    """The im2col block split (several row blocks) gives the same result."""
    import aircc.executor.kernels.conv as conv
    monkeypatch.setattr(conv, "BLOCK_BYTES", 4096)
    inputs = [rand(2, 5, 17, 13), rand(4, 5, 3, 3), rand(4)]
    t = conv.Conv.tiling([TensorType.of(a) for a in inputs], {"pads": [1, 1, 1, 1]})
    assert t["rows"] < t["out"][0]
    check("Conv", inputs, {"pads": [1, 1, 1, 1]}, opset=11, rtol=1e-4, atol=1e-5)


def test_separable_pools_in_channel_blocks(monkeypatch):
    """Separable pools run a block of channels at a time: several blocks (and a last,
    shorter one) give the reference result, padded or not, max and average.  A strided
    column pass combines its taps at every column in a scratch block (contiguous passes),
    then picks the outputs; the border columns, where a tap falls in the padding or would
    wrap into the next row, come out right (float and int8, odd and even widths)."""
    import aircc.executor.kernels.pool as pool
    monkeypatch.setattr(pool, "POOL_BLOCK_BYTES", 3 * 11 * 11 * 4)
    x = rand(2, 4, 11, 11)
    for op, attrs in (("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2]}),
                      ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
                      ("MaxPool", {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [0, 1, 0, 1]}),
                      ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
                      ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 1, 0, 0]})):
        t = getattr(pool, op).tiling([TensorType.of(x)], attrs)
        assert t["mode"] == "separable" and t["block"] == 3
        assert bool(t["scratch_off"]) == (attrs["strides"][1] > 1)
        check(op, [x], attrs, opset=11, rtol=1e-5, atol=1e-6)
    for xs in ((1, 2, 12, 12), (1, 2, 13, 9)):
        for pads in ([0, 0, 1, 1], [1, 1, 1, 1]):
            check("MaxPool", [ints(*xs, dtype=np.int8)], {"kernel_shape": [3, 3], "strides": [2, 2],
                  "pads": pads}, opset=12, engine="ort")


def test_unpadded_pools_on_big_planes_run_flat(monkeypatch):
    """Unpadded pools on big planes reduce whole planes (a window at every input position,
    then a strided pick): several blocks of channels (and a shorter last one), square and
    oblong windows and strides, max and average, all equal onnxruntime; padded windows
    keep the separable mode."""
    import aircc.executor.kernels.pool as pool
    monkeypatch.setattr(pool, "FLAT_MIN_PLANE", 64)
    monkeypatch.setattr(pool, "FLAT_BLOCK_BYTES", 2 * 13 * 11 * 4)
    x = rand(1, 5, 13, 11)
    for attrs in ({"kernel_shape": [3, 3], "strides": [2, 2]},
                  {"kernel_shape": [2, 3], "strides": [3, 1]},
                  {"kernel_shape": [1, 4], "strides": [1, 2]},
                  {"kernel_shape": [5, 1], "strides": [2, 3]}):
        for op in ("MaxPool", "AveragePool"):
            t = getattr(pool, op).tiling([TensorType.of(x)], attrs)
            assert t["mode"] == "flat" and t["block"] == 2
            check(op, [x], attrs, opset=11, engine="ort")
    padded = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    assert pool.MaxPool.tiling([TensorType.of(x)], padded)["mode"] == "separable"


@pytest.mark.parametrize("width, exact", [(11, False), (5, True)])
def test_wide_conv_bias_in_the_gemm_and_relu_in_the_store(monkeypatch, width, exact):
    """The im2col (``wide``) mode with one group puts the bias in the GEMM (a row of ones)
    and stores through a fused Relu; with groups, no bias, or a residual after it, the
    bias and Relu are separate passes.  A narrow output (5 wide: rows of the phase layout
    7 wide) gathers exact columns and the GEMM writes Y itself.  Every variant, in several
    row blocks, called directly and bound once with constant weights (``prepare``), equals
    the reference convolution, and the fused forms the plain one followed by Relu."""
    import aircc.executor.kernels.conv as conv
    monkeypatch.setattr(conv, "BLOCK_BYTES", 2000)
    x = rand(2, 4, 9, width)
    for group, with_bias, extra in ((1, True, False), (1, False, False), (2, True, False),
                                    (1, True, True)):
        w, b = rand(6, 4 // group, 3, 3), rand(6)
        ins = [x, w] + ([b] if with_bias else [])
        attrs = {"pads": [1, 1, 1, 1], "strides": [2, 1], "group": group}
        t = conv.Conv.tiling([TensorType.of(a) for a in ins], attrs)
        assert t["mode"] == "wide" and t["rows"] < t["out"][0] and t["exact"] == exact
        check("Conv", ins, attrs, opset=11, rtol=1e-4, atol=1e-5)
        plain = np.empty((2, 6, *t["out"]), np.float32)
        conv.Conv.kernel(ins, [plain], attrs, t, None)
        res = rand(*plain.shape)
        fused_ins = ins + ([b if with_bias else None] if extra and len(ins) < 3 else []) \
            + ([res] if extra else [])
        fused_attrs = {**attrs, "fused_relu": 1, **({"fused_add": 1} if extra else {})}
        got = np.empty_like(plain)
        conv.Conv.kernel(fused_ins, [got], fused_attrs, t, None)
        want = np.maximum(plain + (res if extra else 0), 0)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        ws = np.empty(t["workspace"], np.uint8)
        bound = conv.Conv.prepare(fused_ins, [got], fused_attrs, t, ws,
                                  [False, True, True, False][:len(fused_ins)])
        got[...] = np.nan
        bound()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_depthwise_channel_blocks(monkeypatch):
    """Depthwise convolution over several channel blocks gives the same result."""
    import aircc.executor.kernels.conv as conv
    monkeypatch.setattr(conv, "DW_BLOCK_BYTES", 4096)
    inputs = [rand(2, 7, 12, 12), rand(7, 1, 3, 3), rand(7)]
    attrs = {"group": 7, "pads": [1, 1, 1, 1], "strides": [2, 2]}
    t = conv.Conv.tiling([TensorType.of(a) for a in inputs], attrs)
    assert t["mode"] == "depthwise_wide" and 1 < t["chunk"] < 7
    check("Conv", inputs, attrs, opset=11, rtol=1e-4, atol=1e-5)


def test_conv_dtypes_and_no_tiling():
    x, w = rand(1, 4, 7, 7, dtype=np.float64), rand(6, 2, 3, 3, dtype=np.float64)
    check("Conv", [x, w], {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 2]}, opset=11,
          rtol=1e-10, atol=1e-12)
    # called without tiling/workspace (e.g. constant folding): computes them on the spot
    spec = registry.lookup("Conv", 11)
    attrs = {"pads": [1, 1, 1, 1]}
    x, w = rand(2, 3, 6, 6), rand(4, 3, 3, 3)
    (t,) = spec.infer(InferContext([TensorType.of(x), TensorType.of(w)], attrs, [None, None]))
    y = np.full(t.shape, np.nan, np.float32)
    spec.kernel([x, w], [y], attrs, {}, None)
    y2 = np.full(t.shape, np.nan, np.float32)
    til = spec.tiling([TensorType.of(x), TensorType.of(w)], attrs)
    spec.kernel([x, w], [y2], attrs, til, np.empty(til["workspace"], np.uint8))
    np.testing.assert_array_equal(y, y2)


def test_conv_symbolic():
    (t,) = infer("Conv", [T(("N", 3, 224, 224)), T((64, 3, 7, 7))],
                 {"strides": [2, 2], "pads": [3, 3, 3, 3]})
    assert t.shape == ("N", 64, 112, 112)
    (t,) = infer("Conv", [T(("N", 3, "H", 10)), T((8, 3, 3, 3))])
    assert t.shape[:2] == ("N", 8) and isinstance(t.shape[2], str) and t.shape[3] == 8
    with pytest.raises(ShapeInferenceError):
        infer("Conv", [T((1, 4, 8, 8)), T((8, 3, 3, 3))])


# ====================================================================== Pools
POOL_CASES = [
    ((1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 11), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                      "pads": [1, 1, 1, 1]}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 10, 10), {"kernel_shape": [4, 4], "strides": [3, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 10, 10), {"kernel_shape": [3, 3], "auto_pad": "VALID"}),
    ((1, 2, 7, 9), {"kernel_shape": [1, 3], "strides": [1, 2]}),
    ((1, 2, 9, 7), {"kernel_shape": [3, 1], "pads": [1, 0, 1, 0]}),
    ((1, 2, 3, 4), {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2]}),    # no tap covers every row
    # stride 1, rows as long as the input's: the column pass runs over the flattened rows
    ((2, 3, 6, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 2, 5, 9), {"kernel_shape": [2, 4], "pads": [0, 1, 1, 2]}),
    ((1, 2, 5, 6), {"kernel_shape": [1, 3], "pads": [0, 0, 0, 2]}),
    ((1, 2, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]}),  # rows 2x
    ((1, 2, 11, 11), {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 0, 0]}),
    ((2, 3, 20), {"kernel_shape": [4], "strides": [2], "pads": [1, 2]}),
    ((1, 2, 6, 7, 5), {"kernel_shape": [2, 3, 2], "pads": [0, 1, 1, 1, 1, 0]}),
]


@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_maxpool(xs, attrs):
    check("MaxPool", [rand(*xs)], attrs, opset=12, engine="ort")


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_2d_pools_are_separable_unless_dilated(op_type):
    spec = registry.lookup(op_type, 12)
    x = T((1, 4, 12, 12))
    t = spec.tiling([x], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    assert t["mode"] == "separable"
    assert t["row_taps"] == [[1, 6, 1], [0, 6, 0], [0, 6, 1]]   # [first out, end, first in]
    assert spec.tiling([x], {"kernel_shape": [3, 3], "dilations": [2, 2]})["mode"] == "phase"


def test_maxpool_dilations_and_ints():
    attrs = {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]}
    check("MaxPool", [rand(1, 2, 9, 9)], attrs, opset=12, engine="ort")
    check("MaxPool", [rand(1, 2, 9, 9)], {**attrs, "ceil_mode": 1, "strides": [2, 2]},
          opset=12, engine="ort")
    check("MaxPool", [ints(1, 2, 6, 6, dtype=np.int8)], {"kernel_shape": [3, 3],
          "pads": [1, 1, 1, 1]}, opset=12, engine="ort")
    check("MaxPool", [rand(1, 2, 8, 8)], {"kernel_shape": [3, 3], "strides": [2, 2]}, opset=8)


def test_maxpool_indices_rejected():
    with pytest.raises(ShapeInferenceError):
        infer("MaxPool", [T((1, 2, 4, 4))], {"kernel_shape": [2, 2]}, opset=12, n_out=2)


@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("xs,attrs", POOL_CASES)
def test_avgpool(xs, attrs, cip):
    check("AveragePool", [rand(*xs)], {**attrs, "count_include_pad": cip}, opset=11,
          engine="ort")


def test_avgpool_versions():
    check("AveragePool", [rand(1, 2, 9, 9)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
          opset=7)
    check("AveragePool", [rand(1, 2, 9, 9)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
          "dilations": [2, 2], "count_include_pad": 0}, opset=19, engine="ort")


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("xs", [(2, 3, 5, 4), (1, 4, 7), (1, 2, 3, 4, 5)])
def test_global_pool(op_type, xs):
    check(op_type, [rand(*xs)], opset=9, engine="ort")


# ==================================================================== Gemm / MatMul
@pytest.mark.parametrize("a,b", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)),
                                 ((3, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2)),
                                 ((1, 3, 4), (2, 4, 6)), ((2, 3, 5, 4), (4, 6))])
def test_matmul(a, b):
    check("MatMul", [rand(*a), rand(*b)], opset=13)


def test_matmul_rows_as_one_gemm_writes_into_its_output():
    """(..., M, K) @ (K, N) runs as one GEMM over every row, written in place; a strided
    output (a slice of a larger buffer) takes numpy's per-matrix path instead."""
    from aircc.executor.kernels.gemm import MatMul
    a, b = rand(2, 3, 5, 4), rand(4, 6)
    y = np.full((2, 3, 5, 6), np.nan, np.float32)
    MatMul.kernel([a, b], [y], {}, {}, None)
    np.testing.assert_allclose(y, np.matmul(a, b), rtol=1e-6)
    big = np.full((2, 3, 5, 8), np.nan, np.float32)
    MatMul.kernel([a, b], [big[..., :6]], {}, {}, None)
    np.testing.assert_allclose(big[..., :6], np.matmul(a, b), rtol=1e-6)
    assert np.isnan(big[..., 6:]).all()


def test_matmul_int():
    check("MatMul", [ints(2, 3), ints(3, 4)], opset=13)


GEMM_CASES = [
    ((3, 4), (4, 5), (5,), {}),
    ((4, 3), (4, 5), (3, 5), {"transA": 1, "alpha": 0.5, "beta": 2.0}),
    ((3, 4), (5, 4), (1, 5), {"transB": 1}),
    ((4, 3), (5, 4), (3, 1), {"transA": 1, "transB": 1, "beta": 0.0}),
    ((3, 4), (4, 5), (), {"alpha": 2.0}),
    ((3, 4), (4, 5), None, {}),
]


@pytest.mark.parametrize("a,b,c,attrs", GEMM_CASES)
def test_gemm(a, b, c, attrs):
    inputs = [rand(*a), rand(*b)] + ([] if c is None else [rand(*c)])
    check("Gemm", inputs, attrs, opset=13 if c is None else 9)


def test_matmul_symbolic():
    (t,) = infer("MatMul", [T(("B", "S", 64)), T((64, 32))])
    assert t.shape == ("B", "S", 32)
    (t,) = infer("MatMul", [T(("B", 1, "S", 8)), T((4, 8, "S"))])
    assert t.shape == ("B", 4, "S", "S")
    with pytest.raises(ShapeInferenceError):
        infer("MatMul", [T((3, 4)), T((5, 6))])


# ======================================================================= Norms
@pytest.mark.parametrize("opset", [7, 9, 15])
def test_batchnorm(opset):
    c = 4
    inputs = [rand(2, c, 5, 6), rand(c), rand(c), rand(c), rand(c, lo=0.5, hi=2)]
    check("BatchNormalization", inputs, {"epsilon": 1e-3}, opset=opset, engine="ort")
    check("BatchNormalization", [rand(3, c)] + inputs[1:], opset=opset, engine="ort")


def test_batchnorm_training_rejected():
    ts = [T((2, 3, 4, 4))] + [T((3,))] * 4
    with pytest.raises(ShapeInferenceError):
        infer("BatchNormalization", ts, {"training_mode": 1}, opset=15)
    with pytest.raises(ShapeInferenceError):
        infer("BatchNormalization", ts, opset=9, n_out=5)


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn(size):
    check("LRN", [rand(2, 7, 4, 5)], {"size": size, "alpha": 1e-2, "beta": 0.75, "bias": 2.0},
          opset=13, engine="ort")
    check("LRN", [rand(1, 4, 3, 3)], {"size": size}, opset=1, engine="ort")


def test_lrn_even_size():
    """onnxruntime rejects even sizes and onnx's reference is wrong: check the spec formula."""
    x = rand(2, 6, 3, 3)
    size, alpha, beta, bias = 4, 0.1, 0.6, 1.5
    sq = np.zeros_like(x)
    for c in range(6):
        lo, hi = max(0, c - (size - 1) // 2), min(6, c + math.ceil((size - 1) / 2) + 1)
        sq[:, c] = (x[:, lo:hi] ** 2).sum(axis=1)
    expected = x / (bias + alpha / size * sq) ** beta
    _, (y,) = run_ours("LRN", [x], {"size": size, "alpha": alpha, "beta": beta, "bias": bias})
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis,n_out", [(-1, 1), (1, 3), (0, 2), (2, 1)])
def test_layernorm(axis, n_out):
    x = rand(2, 3, 8)
    shape = x.shape[axis:]
    check("LayerNormalization", [x, rand(*shape), rand(*shape)],
          {"axis": axis, "epsilon": 1e-5}, opset=17, n_out=n_out, rtol=1e-4, atol=1e-5)
    check("LayerNormalization", [x, rand(*shape)], {"axis": axis}, opset=17, n_out=n_out,
          rtol=1e-4, atol=1e-5)


def test_layernorm_row_statistics_by_gemm_stay_accurate():
    """float32 rows of up to GEMM_STATS_MAX take mean and variance from a GEMM: against a
    float64 reference on data far from zero (the mean is subtracted before the
    variance), with Mean and InvStdDev; longer rows take numpy's reductions."""
    from aircc.executor.kernels import norm

    rng = np.random.default_rng(14)
    for cols in (64, norm.GEMM_STATS_MAX, norm.GEMM_STATS_MAX + 1):
        x = (rng.standard_normal((2, 16, cols)) * 0.5 + 30).astype(np.float32)
        scale, bias = rand(cols, lo=0.5, hi=1.5), rand(cols)
        outs = [np.empty_like(x), np.empty((2, 16, 1), np.float32), np.empty((2, 16, 1), np.float32)]
        norm.LayerNormalization.kernel([x, scale, bias], outs, {"axis": -1, "epsilon": 1e-5}, None, None)
        x64 = x.astype(np.float64)
        mean, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
        ref = (x64 - mean) / np.sqrt(var + 1e-5) * scale + bias
        np.testing.assert_allclose(outs[0], ref, rtol=0, atol=2e-5)
        np.testing.assert_allclose(outs[1], mean, rtol=1e-6)
        np.testing.assert_allclose(outs[2], 1 / np.sqrt(var + 1e-5), rtol=1e-4)


def test_instancenorm():
    check("InstanceNormalization", [rand(2, 3, 5, 4), rand(3), rand(3)], {"epsilon": 1e-3},
          opset=6, rtol=1e-4, atol=1e-5)
    check("InstanceNormalization", [rand(2, 3, 7), rand(3), rand(3)], opset=6, rtol=1e-4,
          atol=1e-5)


# ===================================================================== Softmax
@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset,axis", [(11, None), (11, 0), (11, 2), (11, -1), (13, None),
                                        (13, 1), (13, 0), (13, -2)])
def test_softmax(op_type, opset, axis):
    attrs = {} if axis is None else {"axis": axis}
    check(op_type, [rand(2, 3, 4, lo=-5, hi=5)], attrs, opset=opset,
          engine="ort" if opset < 13 else "onnx")


def test_softmax_opset1_and_large():
    check("Softmax", [rand(3, 10, lo=-100, hi=100)], opset=9, engine="ort")
    check("LogSoftmax", [rand(3, 10, lo=-100, hi=100)], opset=13, engine="ort")
    assert registry.lookup("Softmax", 1) is registry.lookup("Softmax", 12)


def test_softmax_shift_by_tensor_max_keeps_every_row_accurate():
    """The last-axis float32 path (tensors of SMALL elements or more) shifts by the
    tensor's maximum; rows far below it (an attention mask) are redone with their own
    maximum; NaN and inf go the exact way.  Small tensors take the row-wise path."""
    from aircc.executor.kernels.softmax import SMALL, _softmax

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 48, 64)) * 4).astype(np.float32)
    assert x.size >= SMALL
    x[0, 1, :4] -= 10000                     # whole rows masked out
    x[1, 2, 5, 16:] -= 10000                 # half a row masked out
    x[1, 0, 7] += 60                         # one row far above all the others
    y = np.empty_like(x)
    _softmax(x, y, 3)
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    ref /= ref.sum(axis=-1, keepdims=True)
    big = ref > 1e-30
    assert np.all(np.abs(y - ref)[big] <= 4e-6 * ref[big])
    assert np.all(np.abs(y - ref) <= 1e-30 + 4e-6 * ref)
    for bad in (np.nan, np.inf, -np.inf):
        z = x.copy()
        z[0, 0, 0, 0] = bad
        out = np.empty_like(z)
        _softmax(z, out, 3)
        assert np.isnan(out[0, 0, 0]).all() == (bad != -np.inf)
        np.testing.assert_allclose(out[1], y[1], rtol=1e-5, atol=1e-30)
    small = x[:, :, :4, :32]
    assert small.size < SMALL
    ys = np.empty(small.shape, np.float32)
    _softmax(np.ascontiguousarray(small), ys, 3)
    rs = np.exp(small.astype(np.float64) - small.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(ys, rs / rs.sum(axis=-1, keepdims=True), rtol=4e-6, atol=1e-30)


def test_softmax_of_a_sum_shifts_once_and_redoes_underflowing_rows():
    """softmax(a + b) (fuse-add-softmax) on the large path: one shift by max(a) + max(b);
    a sample whose every key the mask removes underflows against it and is redone
    exactly; the mask may be the bigger operand."""
    from aircc.executor.kernels.softmax import SMALL, _softmax_add

    rng = np.random.default_rng(4)
    a = (rng.standard_normal((4, 4, 32, 32)) * 3).astype(np.float32)
    mask = np.where(rng.random((4, 1, 1, 32)) < 0.3, -10000.0, 0.0).astype(np.float32)
    mask[2] = -1e30
    assert a.size >= SMALL
    s64 = a.astype(np.float64) + mask
    ref = np.exp(s64 - s64.max(axis=-1, keepdims=True))
    ref /= ref.sum(axis=-1, keepdims=True)
    for x, m in ((a, mask), (mask, a)):
        y = np.empty(a.shape, np.float32)
        _softmax_add(x, m, y, 3)
        np.testing.assert_allclose(y, ref, rtol=4e-6, atol=1e-30)
    # small tensors: one reduction for the sums; an underflowing row sends the whole
    # tensor the exact way (sample 2 here), every other case stays on the short path
    small, smask = a[:, :2, :4], mask
    assert small.size < SMALL
    for m in (smask, np.zeros_like(smask)):
        s64 = small.astype(np.float64) + m
        ref = np.exp(s64 - s64.max(axis=-1, keepdims=True))
        ref /= ref.sum(axis=-1, keepdims=True)
        y = np.empty(small.shape, np.float32)
        _softmax_add(np.ascontiguousarray(small), m, y, 3)
        np.testing.assert_allclose(y, ref, rtol=4e-6, atol=1e-30)


# ================================================================== Elementwise
from aircc.executor.kernels import elementwise, gelu  # noqa: E402

_DOMAIN = {"Log": (0.1, 5), "Sqrt": (0, 5), "Reciprocal": (0.5, 3), "Acosh": (1, 4),
           "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99), "Atanh": (-0.99, 0.99),
           "Erf": (-5, 5), "Gelu": (-5, 5), "Exp": (-10, 10)}
_ATTRS = {"LeakyRelu": {"alpha": 0.2}, "Elu": {"alpha": 0.7}, "HardSigmoid": {"alpha": 0.3},
          "Celu": {"alpha": 1.5}, "ThresholdedRelu": {"alpha": 0.3}, "Shrink": {"lambd": 0.4,
                                                                                  "bias": 0.1}}


@pytest.mark.parametrize("name,since", [(e[0], e[1]) for e in elementwise.UNARY])
def test_unary(name, since):
    lo, hi = _DOMAIN.get(name, (-3, 3))
    x = rand(3, 4, 5, lo=lo, hi=hi)
    if name == "Not":
        x = RNG.integers(0, 2, size=(3, 4)).astype(bool)
    elif name == "IsNaN":
        x[0, 0, :2] = np.nan
    elif name == "Round":
        x[0, 0, :4] = [0.5, 1.5, -2.5, 2.4999]
    opset = max(since, 13)
    check(name, [x], _ATTRS.get(name), opset=opset, rtol=2e-6 if name != "Gelu" else 1e-5)
    check(name, [x.astype(np.float64) if x.dtype != bool else x], _ATTRS.get(name), opset=opset,
          rtol=1e-6, atol=1e-7)


def test_relu_against_shared_zeros():
    """Relu on tensors past RELU_ZEROS_MIN compares with a read-only view of zeros (numpy's
    SIMD maximum): same values as max(x, 0), NaN and -0 kept as numpy keeps them, strided
    inputs, in place, and the zeros block is never written."""
    from aircc.executor.kernels._common import RELU_ZEROS_MIN, relu, zeros

    x = rand(3, 40, 70, lo=-2, hi=2)
    assert x.size >= RELU_ZEROS_MIN
    x[0, 0, :3] = [np.nan, -0.0, np.inf]
    y = np.empty_like(x)
    relu(x, y)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    strided = x[:, :, ::2]
    out = np.empty(strided.shape, np.float32)
    relu(strided, out)
    np.testing.assert_array_equal(out, np.maximum(strided, 0))
    z = x.copy()
    relu(z, z)
    np.testing.assert_array_equal(z, np.maximum(x, 0))
    zv = zeros((5, 7), np.float32)
    assert zv.shape == (5, 7) and not zv.flags.writeable and not zv.any()
    with pytest.raises(ValueError):
        zv[0, 0] = 1
    big = zeros((300, 300), np.float32)                 # grows the block, still all zeros
    assert not big.any() and not zeros((5, 7), np.float32).any()


def test_unary_extras():
    check("LeakyRelu", [rand(4, 5)], {"alpha": 1.5}, opset=6)
    check("Gelu", [rand(4, 5, lo=-4, hi=4)], {"approximate": "tanh"}, opset=20)
    check("Relu", [ints(3, 4, dtype=np.int32)], opset=14)
    check("Neg", [ints(3, 4)], opset=13)
    check("Abs", [ints(3, 4, dtype=np.int8)], opset=13)
    check("Sign", [ints(3, 4)], opset=13)
    x = np.array([np.inf, -np.inf, 1.0, np.nan], dtype=np.float32)
    check("IsInf", [x], opset=10)
    check("IsInf", [x], {"detect_negative": 0}, opset=10)
    check("IsInf", [x], {"detect_positive": 0}, opset=10)
    check("Sigmoid", [rand(5, lo=-100, hi=100)], opset=6)
    check("Softplus", [rand(5, lo=-100, hi=100)], opset=1)


def test_erf_accuracy():
    """float32: within 4 ulp (tanh of a polynomial, in float32), saturating to +-1 for
    large |x| with no clamp; float64: within 1e-14 relative."""
    xs = np.concatenate([np.linspace(-6, 6, 200001), np.geomspace(1e-30, 6, 2001),
                         -np.geomspace(1e-30, 6, 2001), np.geomspace(3.9, 1e30, 2001),
                         -np.geomspace(3.9, 1e30, 2001), [0.0, np.inf, -np.inf]])
    for dt in (np.float32, np.float64):
        x = xs.astype(dt)
        y = np.empty_like(x)
        elementwise.erf(x, y)
        r = np.array([math.erf(float(v)) for v in x])
        if dt == np.float32:
            ulp = np.abs(y.astype(np.float64) - r) / np.spacing(np.abs(r).astype(np.float32))
            assert ulp.max() <= 4, ulp.max()
        else:
            err = np.abs(y - r) / np.maximum(np.abs(r), 1e-300)
            assert err.max() < 1e-14, err.max()
    y = np.empty(3, np.float32)
    elementwise.erf(np.array([np.nan, -0.0, 1e-3], np.float32), y)
    assert np.isnan(y[0]) and y[1] == 0 and np.signbit(y[1]) and abs(y[2] - math.erf(1e-3)) < 1e-9


def test_gelu_float32_accuracy():
    """Gelu (exact) in float32 is x / (1 + 2^(-x Q(x^2) log2 e)): within 4.2 ulp of x Phi(x)
    where the result is not tiny, within 3e-7 absolute in the negative tail (where
    1 + erf would cancel), x for large x and -0 for very negative x, NaN stays NaN."""
    xs = np.concatenate([np.linspace(-12, 12, 400001), np.geomspace(1e-30, 12, 2001),
                         -np.geomspace(1e-30, 12, 2001), [1e30, -1e30, 0.0]]).astype(np.float32)
    y = np.empty_like(xs)
    gelu.gelu(xs, y, {})
    r = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in xs.astype(np.float64)])
    err = np.abs(y.astype(np.float64) - r)
    ulp = err / np.spacing(np.abs(r).astype(np.float32))
    assert ulp[xs >= -1].max() <= 4.2, ulp[xs >= -1].max()
    assert err[xs < -1].max() <= 3e-7, err[xs < -1].max()
    assert y[-3] == np.float32(1e30) and y[-2] == 0 and np.signbit(y[-2])
    z = np.empty(2, np.float32)
    gelu.gelu(np.array([np.nan, 2.0], np.float32), z, {})
    assert np.isnan(z[0]) and abs(z[1] - 2 * 0.5 * math.erfc(-2 / math.sqrt(2))) < 1e-6


@pytest.mark.parametrize("opset", [6, 11, 13])
def test_clip(opset):
    x = rand(3, 4, lo=-2, hi=2)
    if opset == 6:
        check("Clip", [x], {"min": -0.5, "max": 0.7}, opset=6)
        check("Clip", [x], {"max": 0.7}, opset=6)
        check("Clip", [x], opset=6)
    else:
        lo, hi = np.array(-0.5, np.float32), np.array(0.7, np.float32)
        check("Clip", [x, lo, hi], opset=opset)
        check("Clip", [x, None, hi], opset=opset)
        check("Clip", [x, lo], opset=opset)
        check("Clip", [x], opset=opset)
    if opset == 13:
        check("Clip", [ints(3, 4), np.array(-2, np.int64), np.array(3, np.int64)], opset=13)


# ====================================================================== Binary
from aircc.executor.kernels import binary  # noqa: E402

_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("a,b", _SHAPES)
@pytest.mark.parametrize("name,since,result", [(e[0], e[1], e[3]) for e in binary.BINARY])
def test_binary(name, since, result, a, b):
    opset = max(since, 13)
    if name in ("And", "Or", "Xor"):
        x = RNG.integers(0, 2, size=a).astype(bool)
        y = RNG.integers(0, 2, size=b).astype(bool)
    elif name.startswith("Bitwise"):
        x, y = ints(*a, lo=0, hi=100), ints(*b, lo=0, hi=100)
    elif name == "Pow":
        x, y = rand(*a, lo=0.1, hi=3), rand(*b, lo=-2, hi=2)
    elif name == "Mod":
        x, y = ints(*a, lo=-20, hi=20), ints(*b, lo=1, hi=7) * RNG.choice([-1, 1], size=b)
        check(name, [x, y], {"fmod": 1}, opset=opset)
        check(name, [rand(*a, lo=-5, hi=5), rand(*b, lo=0.5, hi=2)], {"fmod": 1}, opset=opset)
    elif name == "PRelu":
        x, y = rand(*a), rand(*b)
        if len(b) > len(a) or (len(a) == 0):
            return  # slope must broadcast to X
    else:
        x, y = rand(*a), rand(*b)
        if result == "bool":  # coarse values so that ties (Equal, *OrEqual) happen
            x, y = np.round(x * 2) / 2, np.round(y * 2) / 2
    check(name, [x, y], opset=opset)


def test_div_int_truncates():
    a = np.array([7, -7, 7, -7, 6, -6, 0], np.int64)
    b = np.array([2, 2, -2, -2, 3, 3, 5], np.int64)
    check("Div", [a, b], opset=13)
    check("Div", [a.astype(np.int32), b.astype(np.int32)], opset=13)
    check("Pow", [rand(3, 4, lo=0.1, hi=2), np.array(2.0, np.float32)], opset=13)
    check("Pow", [rand(3, 4, lo=0.1, hi=2), np.array(0.5, np.float32)], opset=13)
    check("Pow", [rand(3, 4, lo=0.1, hi=2), np.array(3, np.int64)], opset=13)
    check("Pow", [ints(3, 4, lo=0, hi=5), np.array(2, np.int64)], opset=13)
    check("PRelu", [rand(2, 3, 4, 4), rand(3, 1, 1)], opset=9)


@pytest.mark.parametrize("name", ["Sum", "Max", "Min", "Mean"])
def test_variadic(name):
    check(name, [rand(2, 3, 4)], opset=13)
    check(name, [rand(2, 3, 4), rand(3, 1), rand(4)], opset=13)
    check(name, [rand(3, 4), rand(3, 4)], opset=6)


def test_where():
    c = RNG.random((3, 1, 4)) < 0.5
    check("Where", [c, rand(2, 1), rand(3, 2, 4)], opset=9)
    check("Where", [c, ints(4), ints(1)], opset=16)


def test_broadcast_symbolic():
    (t,) = infer("Add", [T(("N", 3, 1)), T((1, "W"))])
    assert t.shape == ("N", 3, "W")
    (t,) = infer("Add", [T(("N", 1)), T(("N", 5))])
    assert t.shape == ("N", 5)
    (t,) = infer("Add", [T(("A",)), T(("B",))])
    assert isinstance(t.shape[0], str) and t.shape[0] not in ("A", "B")
    (t,) = infer("Add", [T(("A",)), T((7,))])
    assert t.shape == (7,)
    (t,) = infer("Equal", [T(("N", 3)), T((3,))])
    assert t == T(("N", 3), "bool")
    with pytest.raises(ShapeInferenceError):
        infer("Add", [T((2, 3)), T((4,))])
    with pytest.raises(ShapeInferenceError):
        infer("Add", [T((2, 3)), T((3,), "int64")])


# ===================================================================== Reduce
from aircc.executor.kernels import reduce as reduce_mod  # noqa: E402

_RED_AXES = [None, [1], [0, 2], [-1]]


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", _RED_AXES)
@pytest.mark.parametrize("name", list(reduce_mod.REDUCERS))
def test_reduce(name, axes, keepdims):
    x = rand(2, 3, 4, lo=0.2, hi=1.5) if name in ("ReduceLogSum", "ReduceProd") else rand(2, 3, 4)
    attrs = {"keepdims": keepdims}
    # axes as attribute (opset 11 everywhere)
    check(name, [x], {**attrs, **({} if axes is None else {"axes": axes})}, opset=11,
          rtol=1e-5, atol=1e-6)
    # axes as input
    since = reduce_mod.AXES_INPUT_SINCE[name]
    inputs = [x] if axes is None else [x, np.array(axes, np.int64)]
    check(name, inputs, attrs, opset=since, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["ReduceSum", "ReduceMean", "ReduceMax"])
def test_reduce_noop_and_unknown_axes(name):
    since = reduce_mod.AXES_INPUT_SINCE[name]
    check(name, [rand(2, 3)], {"noop_with_empty_axes": 1}, opset=since)
    check(name, [rand(2, 3), np.zeros(0, np.int64)], {"noop_with_empty_axes": 1}, opset=since)
    check(name, [rand(2, 3), np.zeros(0, np.int64)], {}, opset=since)
    (t,) = infer(name, [T((2, 3, 4)), T((2,), "int64")], {"keepdims": 0}, opset=since)
    assert len(t.shape) == 1 and isinstance(t.shape[0], str)
    (t,) = infer(name, [T(("N", 3, 4)), T((1,), "int64")], {}, opset=since,
                 values=[None, np.array([1])])
    assert t.shape == ("N", 1, 4)


@pytest.mark.parametrize("name", ["ArgMax", "ArgMin"])
def test_argmax(name):
    x = np.round(rand(3, 4, 5) * 2)  # ties
    check(name, [x], {"axis": 1}, opset=11)
    check(name, [x], {"axis": -1, "keepdims": 0}, opset=11)
    check(name, [x], opset=1)
    check(name, [x], {"axis": 2, "select_last_index": 1}, opset=12)
    check(name, [ints(4, 6)], {"axis": 1, "keepdims": 0, "select_last_index": 1}, opset=13)


# ================================================================= Shape ops
RESHAPE_CASES = [
    ((2, 3, 4), [4, 6], 0), ((2, 3, 4), [0, -1], 0), ((2, 3, 4), [-1], 0),
    ((2, 3, 4), [2, 0, 2, 2], 0), ((2, 3, 4), [1, -1, 4, 1], 0), ((2, 0, 4), [0, 4, -1], 0),
    ((2, 0, 4), [0, 4, 0], 1), ((6,), [2, 3], 1),
]


@pytest.mark.parametrize("xs,shape,allowzero", RESHAPE_CASES)
def test_reshape(xs, shape, allowzero):
    x = rand(*xs)
    check("Reshape", [x, np.array(shape, np.int64)], {"allowzero": allowzero} if allowzero
          else None, opset=14 if allowzero else 5)


def test_reshape_attr_version():
    (t,) = infer("Reshape", [T((2, 3, 4))], {"shape": [0, -1]}, opset=4)
    assert t.shape == (2, 12)
    _, (y,) = run_ours("Reshape", [rand(2, 3, 4)], {"shape": [4, -1]}, opset=1)
    assert y.shape == (4, 6)


def test_reshape_symbolic():
    def r(xs, shape, **kw):
        return infer("Reshape", [T(xs), T((len(shape),), "int64")], kw, opset=14,
                     values=[None, np.array(shape, np.int64)])[0].shape
    assert r(("N", 3, 4), [0, -1]) == ("N", 12)
    assert r(("N", 3, 4), [-1, 12]) == ("N", 12)
    assert r(("N", "S", 64), [0, 0, 4, 16]) == ("N", "S", 4, 16)
    assert r(("N", "S", 4, 16), [0, 0, -1]) == ("N", "S", 64)
    assert r(("N", "S", 8), [-1, 8])[1] == 8 and isinstance(r(("N", "S", 8), [-1, 8])[0], str)
    assert r(("N", 3, 4), [2, -1])[0] == 2
    (t,) = infer("Reshape", [T(("N", 3, 4)), T((3,), "int64")], opset=14)
    assert len(t.shape) == 3 and all(isinstance(d, str) for d in t.shape)
    with pytest.raises(ShapeInferenceError):
        r((2, 3, 4), [5, -1])
    with pytest.raises(ShapeInferenceError):
        r((2, 3, 4), [-1, -1])


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    check("Flatten", [rand(2, 3, 4)], {"axis": axis}, opset=13)


def test_flatten_symbolic():
    (t,) = infer("Flatten", [T(("N", 3, 4))])
    assert t.shape == ("N", 12)


def test_squeeze_unsqueeze():
    x = rand(1, 3, 1, 4)
    check("Squeeze", [x], opset=11)
    check("Squeeze", [x], {"axes": [0, -2]}, opset=11)
    check("Squeeze", [x, np.array([2], np.int64)], opset=13)
    check("Squeeze", [x], opset=13)
    check("Unsqueeze", [rand(3, 4)], {"axes": [0, 3]}, opset=11)
    check("Unsqueeze", [rand(3, 4)], {"axes": [-1]}, opset=11)
    check("Unsqueeze", [rand(3, 4), np.array([1, -1], np.int64)], opset=13)
    check("Unsqueeze", [np.array(5.0, np.float32), np.array([0], np.int64)], opset=13)
    with pytest.raises(ShapeInferenceError):
        infer("Squeeze", [T((2, 3))], {"axes": [0]}, opset=11)
    (t,) = infer("Unsqueeze", [T(("N", 3)), T((1,), "int64")], opset=13,
                 values=[None, np.array([0])])
    assert t.shape == (1, "N", 3)


@pytest.mark.parametrize("perm", [None, [0, 2, 1, 3], [3, 1, 0, 2]])
def test_transpose(perm):
    check("Transpose", [rand(2, 3, 4, 5)], None if perm is None else {"perm": perm}, opset=13)


def test_transpose_symbolic():
    (t,) = infer("Transpose", [T(("N", 3, "H", 5))], {"perm": [0, 2, 3, 1]})
    assert t.shape == ("N", "H", 5, 3)
    (t,) = infer("Transpose", [T(("N", 3))])
    assert t.shape == (3, "N")
    with pytest.raises(ShapeInferenceError):
        infer("Transpose", [T((2, 3))], {"perm": [0, 0]})


def test_identity_dropout():
    x = rand(3, 4)
    check("Identity", [x], opset=13)
    check("Identity", [ints(3)], opset=1)
    check("Dropout", [x], {"ratio": 0.3}, opset=7, n_out=2, engine="ort", compare=[0])
    (_, mt), (_, m) = run_ours("Dropout", [x], {"ratio": 0.3}, opset=7, n_out=2)
    assert mt.dtype == "float32" and (m == 1).all()  # opset 7-9: mask has X's type
    check("Dropout", [x], opset=10, n_out=2)
    check("Dropout", [x], opset=9)
    check("Dropout", [x, np.array(0.4, np.float32)], opset=12, n_out=2)
    check("Dropout", [x, np.array(0.4, np.float32), np.array(False)], opset=13, n_out=2)
    # training mode: kept elements are scaled, dropped ones are 0
    _, (y, m) = run_ours("Dropout", [x, np.array(0.5, np.float32), np.array(True)],
                         {"seed": 3}, opset=13, n_out=2)
    np.testing.assert_allclose(y, np.where(m, x * 2, 0), rtol=1e-6)


@pytest.mark.parametrize("src,to", [(np.float32, TensorProto.INT64),
                                    (np.float32, TensorProto.INT32),
                                    (np.int64, TensorProto.FLOAT), (np.float32, TensorProto.BOOL),
                                    (np.bool_, TensorProto.FLOAT),
                                    (np.float32, TensorProto.FLOAT16),
                                    (np.float64, TensorProto.UINT8),
                                    (np.int32, TensorProto.INT8)])
def test_cast(src, to):
    x = (rand(3, 5, lo=-3, hi=3) * 10)
    if src == np.float64 or to == TensorProto.UINT8:
        x = np.abs(x)
    x = x.astype(src)
    check("Cast", [x], {"to": to}, opset=13)


def test_cast_versions():
    (t,) = infer("Cast", [T((2,))], {"to": "INT64"}, opset=1)
    assert t.dtype == "int64"
    check("Cast", [rand(4)], {"to": TensorProto.DOUBLE}, opset=6)
    check("CastLike", [rand(4) * 10, ints(1)], opset=15)


def test_shape_size():
    x = rand(2, 3, 4, 5)
    check("Shape", [x], opset=13)
    check("Shape", [x], {"start": 1}, opset=15)
    check("Shape", [x], {"start": -3, "end": -1}, opset=15)
    check("Shape", [x], {"start": 3, "end": 1}, opset=15)
    check("Shape", [x], {"end": 10}, opset=15)
    check("Size", [x], opset=13)
    check("Size", [np.array(1.0, np.float32)], opset=13)


# ================================================================== Movement
def test_concat():
    check("Concat", [rand(2, 3), rand(2, 1), rand(2, 4)], {"axis": 1}, opset=13)
    check("Concat", [rand(2, 3), rand(1, 3)], {"axis": -2}, opset=13)
    check("Concat", [ints(2, 3)], {"axis": 0}, opset=4)
    check("Concat", [rand(2, 3, 1), rand(2, 3, 0)], {"axis": 2}, opset=13)
    (t,) = infer("Concat", [T(("N", 3)), T(("N", 5))], {"axis": 1})
    assert t.shape == ("N", 8)
    with pytest.raises(ShapeInferenceError):
        infer("Concat", [T((2, 3)), T((3, 3))], {"axis": 1})


def test_split():
    x = rand(6, 4)
    check("Split", [x], {"axis": 0}, opset=11, n_out=3)
    check("Split", [x], {"axis": 1, "split": [1, 3]}, opset=11, n_out=2)
    check("Split", [x, np.array([2, 4], np.int64)], opset=13, n_out=2)
    check("Split", [x], {"axis": -1}, opset=13, n_out=2)
    check("Split", [rand(7, 2)], {"num_outputs": 3}, opset=18, n_out=3)
    check("Split", [x, np.array([1, 1, 4], np.int64)], opset=18, n_out=3)
    with pytest.raises(ShapeInferenceError):
        infer("Split", [T((7, 2))], opset=13, n_out=2)


SLICE_CASES = [
    ([0, 1], [2, 3], [0, 1], None),
    ([1], [-1], [1], None),
    ([-3, 0], [100, 10], [0, 2], [1, 2]),
    ([5, 4], [-100, 0], [0, 1], [-1, -2]),
    ([2], [2 ** 63 - 1], [2], [1]),
    ([0], [-(2 ** 63)], [0], [-1]),
    ([0, 0, 0], [3, 4, 5], None, None),
    ([3], [1], [0], None),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICE_CASES)
def test_slice(starts, ends, axes, steps):
    x = rand(6, 5, 7)
    arr = lambda v: None if v is None else np.array(v, np.int64)  # noqa: E731
    inputs = [x, arr(starts), arr(ends), arr(axes), arr(steps)]
    while inputs[-1] is None:
        inputs.pop()
    check("Slice", inputs, opset=13)
    if steps is None:
        attrs = {"starts": starts, "ends": ends, **({} if axes is None else {"axes": axes})}
        _, (y,) = run_ours("Slice", [x], attrs, opset=9)
        sl = [slice(None)] * 3
        for i, (s, e) in enumerate(zip(starts, ends)):
            sl[axes[i] if axes else i] = slice(s, e)
        np.testing.assert_array_equal(y, x[tuple(sl)])


def test_slice_symbolic():
    (t,) = infer("Slice", [T(("N", 10)), T((1,), "int64"), T((1,), "int64"),
                           T((1,), "int64")], opset=13,
                 values=[None, np.array([2]), np.array([5]), np.array([1])])
    assert t.shape == ("N", 3)
    (t,) = infer("Slice", [T(("N", 10)), T((1,), "int64"), T((1,), "int64")], opset=13,
                 values=[None, np.array([0]), np.array([2 ** 63 - 1])])
    assert t.shape == ("N", 10)
    (t,) = infer("Slice", [T((4, 10)), T((1,), "int64"), T((1,), "int64"), T((1,), "int64")],
                 opset=13, values=[None, None, None, np.array([1])])
    assert t.shape[0] == 4 and isinstance(t.shape[1], str)


def test_gather():
    x = rand(5, 4, 3)
    check("Gather", [x, np.array([0, 4, -1], np.int64)], opset=13)
    check("Gather", [x, np.array([[1, 2], [0, -2]], np.int32)], {"axis": 1}, opset=13)
    check("Gather", [x, np.array(2, np.int64)], {"axis": -1}, opset=13)
    check("Gather", [ints(5), np.array([[1], [3]], np.int64)], opset=1)
    check("GatherElements", [x, RNG.integers(-3, 3, size=(5, 4, 2))], {"axis": 2}, opset=13)


def test_expand_tile():
    check("Expand", [rand(3, 1), np.array([2, 1, 4], np.int64)], opset=13)
    check("Expand", [rand(2, 3), np.array([3], np.int64)], opset=8)
    check("Expand", [ints(1), np.array([2, 2], np.int64)], opset=13)
    check("Tile", [rand(2, 3), np.array([2, 3], np.int64)], opset=13)
    check("Tile", [ints(2, 1, 3), np.array([1, 4, 2], np.int64)], opset=6)
    (t,) = infer("Tile", [T(("N", 3)), T((2,), "int64")], values=[None, np.array([1, 2])])
    assert t.shape == ("N", 6)
    (t,) = infer("Expand", [T(("N", 1)), T((2,), "int64")], values=[None, np.array([1, 5])])
    assert t.shape == ("N", 5)


PAD_CASES = [
    ([1, 2, 0, 3], "constant"), ([0, 0, 2, 1], "reflect"), ([2, 1, 1, 2], "edge"),
    ([1, -1, -1, 2], "constant"), ([0, 1, 0, 0], "reflect"),
]


@pytest.mark.parametrize("pads,mode", PAD_CASES)
def test_pad(pads, mode):
    x = rand(4, 5)
    eng = "ort" if min(pads) < 0 else "onnx"  # onnx's reference rejects negative pads
    check("Pad", [x, np.array(pads, np.int64)], {"mode": mode}, opset=13, engine=eng)
    check("Pad", [x], {"mode": mode, "pads": pads, "value": 1.5}, opset=2, engine=eng)
    if mode == "constant":
        check("Pad", [x, np.array(pads, np.int64), np.array(-2.0, np.float32)], opset=13,
              engine=eng)


def test_pad_axes_and_wrap():
    x = rand(2, 4, 5)
    check("Pad", [x, np.array([1, 2], np.int64), np.array(0.5, np.float32),
                  np.array([-1], np.int64)], opset=18)
    check("Pad", [x, np.array([1, 0, 2, 3], np.int64), None, np.array([0, 2], np.int64)],
          {"mode": "wrap"}, opset=19)
    check("Pad", [ints(3, 3), np.array([1, 1, 1, 1], np.int64), np.array(7, np.int64)],
          opset=11)


@pytest.mark.parametrize("start,limit,delta,dt", [(0, 10, 3, np.int64), (5, 1, -2, np.int32),
                                                   (0.5, 3.0, 0.4, np.float32),
                                                   (1.0, 1.0, 1.0, np.float64),
                                                   (10, 0, 1, np.int64)])
def test_range(start, limit, delta, dt):
    check("Range", [np.array(start, dt), np.array(limit, dt), np.array(delta, dt)], opset=11)


# ================================================================== Constants
def test_constant():
    check("Constant", [], {"value": numpy_helper.from_array(rand(2, 3))}, opset=13)
    check("Constant", [], {"value_float": 2.5}, opset=13)
    check("Constant", [], {"value_floats": [1.0, 2.0]}, opset=13)
    check("Constant", [], {"value_int": 7}, opset=13)
    check("Constant", [], {"value_ints": [1, 2, 3]}, opset=13)
    check("Constant", [], {"value": numpy_helper.from_array(ints(4))}, opset=9)


def test_constant_of_shape():
    check("ConstantOfShape", [np.array([2, 3], np.int64)], opset=9)
    check("ConstantOfShape", [np.array([4], np.int64)],
          {"value": numpy_helper.from_array(np.array([7], np.int64))}, opset=9)
    check("ConstantOfShape", [np.array([2, 0], np.int64)],
          {"value": numpy_helper.from_array(np.array([1.5], np.float16))}, opset=9)
    (t,) = infer("ConstantOfShape", [T((3,), "int64")], opset=9)
    assert len(t.shape) == 3 and t.dtype == "float32"


# ================================================================= Group 2 ops
CONVT_CASES = [
    ((1, 3, 5, 5), (3, 4, 3, 3), {}),
    ((2, 3, 5, 4), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_padding": [1, 1]}),
    ((1, 2, 4, 5), (2, 3, 2, 3), {"strides": [3, 2], "dilations": [2, 1],
                                  "pads": [0, 1, 2, 0]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_shape": [9, 10]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 6), (2, 3, 4), {"strides": [2], "pads": [1, 2]}),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xs,wsh,attrs", CONVT_CASES)
def test_conv_transpose(xs, wsh, attrs, bias):
    inputs = [rand(*xs), rand(*wsh)] + ([rand(wsh[1])] if bias else [])
    check("ConvTranspose", inputs, attrs, opset=11, rtol=1e-4, atol=1e-5)


def test_conv_transpose_groups():
    x, w = rand(1, 4, 5, 5), rand(4, 3, 3, 3)
    check("ConvTranspose", [x, w, rand(6)], {"group": 2, "strides": [2, 2]}, opset=11,
          engine="ort", rtol=1e-4, atol=1e-5)
    (t,) = infer("ConvTranspose", [T(("N", 4, "H", 5)), T((4, 3, 3, 3))],
                 {"group": 2, "strides": [2, 2]})
    assert t.shape[:2] == ("N", 6) and t.shape[3] == 11 and isinstance(t.shape[2], str)


RESIZE_CASES = [
    ("nearest", "asymmetric", "floor", None, [1, 1, 2, 2]),
    ("nearest", "half_pixel", "round_prefer_floor", None, [1, 1, 1.5, 0.6]),
    ("nearest", "align_corners", "round_prefer_ceil", [1, 2, 7, 3], None),
    ("nearest", "asymmetric", "ceil", None, [1, 1, 2, 3]),
    ("nearest", "pytorch_half_pixel", "round_prefer_floor", [1, 2, 1, 9], None),
    ("linear", "half_pixel", None, None, [1, 1, 2, 2]),
    ("linear", "align_corners", None, [1, 2, 7, 9], None),
    ("linear", "asymmetric", None, None, [1, 1, 0.5, 1.7]),
    ("linear", "pytorch_half_pixel", None, [1, 2, 1, 8], None),
]


@pytest.mark.parametrize("mode,ctm,nearest,sizes,scales", RESIZE_CASES)
def test_resize(mode, ctm, nearest, sizes, scales):
    x = rand(1, 2, 4, 5)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if nearest:
        attrs["nearest_mode"] = nearest
    sc = None if scales is None else np.array(scales, np.float32)
    sz = None if sizes is None else np.array(sizes, np.int64)
    check("Resize", [x, None, sc, sz], attrs, opset=13, engine="ort", rtol=1e-5, atol=1e-6)
    if mode == "linear" and ctm != "pytorch_half_pixel":
        check("Resize", [x, None, sc, sz], attrs, opset=13, rtol=1e-5, atol=1e-6)


def test_resize_versions():
    x = rand(1, 2, 3, 4)
    check("Resize", [x, np.array([1, 1, 2, 2], np.float32)], {"mode": "nearest"}, opset=10,
          engine="ort")
    check("Resize", [x, np.array([1, 1, 2, 1.5], np.float32)], {"mode": "linear"}, opset=10,
          engine="ort", atol=1e-6)
    check("Resize", [x, np.zeros(0, np.float32), np.array([1, 1, 2, 2], np.float32)],
          {"mode": "nearest"}, opset=11, engine="ort")
    check("Resize", [x, None, None, np.array([6, 8], np.int64)],
          {"mode": "linear", "axes": [2, 3]}, opset=18)
    (t,) = infer("Resize", [T((1, 2, 3, 4)), None, T((4,))], opset=13)
    assert len(t.shape) == 4 and all(isinstance(d, str) for d in t.shape)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_space(mode):
    x = rand(2, 8, 3, 4)
    check("DepthToSpace", [x], {"blocksize": 2, "mode": mode}, opset=13)
    check("SpaceToDepth", [rand(2, 3, 4, 6)], {"blocksize": 2}, opset=13)
    check("DepthToSpace", [x], {"blocksize": 2}, opset=1) if mode == "DCR" else None


@pytest.mark.parametrize("largest", [0, 1])
def test_topk(largest):
    x = np.round(rand(3, 7, 4) * 3)  # ties
    check("TopK", [x, np.array([3], np.int64)], {"axis": 1, "largest": largest}, opset=11,
          n_out=2)
    check("TopK", [ints(3, 6), np.array([6], np.int64)], {"largest": largest}, opset=11,
          n_out=2)
    if largest:
        check("TopK", [x], {"k": 2}, opset=1, n_out=2)
        check("TopK", [x, np.array([2], np.int64)], {"axis": 0}, opset=10, n_out=2)


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(exclusive, reverse):
    x = rand(3, 4, 5)
    for axis in (0, -1):
        check("CumSum", [x, np.array(axis, np.int64)],
              {"exclusive": exclusive, "reverse": reverse}, opset=14)
    check("CumSum", [ints(6), np.array(0, np.int32)],
          {"exclusive": exclusive, "reverse": reverse}, opset=11)


def test_onehot_trilu_hardmax():
    idx = np.array([[0, 2, -1], [1, 4, 3]], np.int64)
    vals = np.array([0.5, 2.0], np.float32)
    check("OneHot", [idx, np.array(5, np.int64), vals], opset=11)
    check("OneHot", [idx, np.array([5], np.int64), np.array([0, 1], np.int64)], {"axis": 0},
          opset=11, engine="ort")
    check("OneHot", [np.abs(idx).astype(np.float32), np.array(5.0, np.float32), vals],
          {"axis": 1}, opset=9, engine="ort")
    x = rand(2, 4, 5)
    for k in (None, 0, 1, -2, 6):
        for upper in (0, 1):
            inputs = [x] if k is None else [x, np.array(k, np.int64)]
            check("Trilu", inputs, {"upper": upper}, opset=14)
    check("Hardmax", [np.round(rand(3, 4, 5))], opset=13)
    check("Hardmax", [rand(3, 4, 5)], {"axis": 1}, opset=13)


# ==================================================================== Registry
def test_unknown_op():
    with pytest.raises(UnsupportedOpError) as e:
        registry.lookup("NoSuchOp", 13, node="n7")
    msg = str(e.value)
    assert "NoSuchOp" in msg and "n7" in msg and "Conv" in msg and "Supported ops" in msg
    with pytest.raises(UnsupportedOpError):
        registry.lookup("ConstantOfShape", 8)


def test_lookup_versions():
    assert registry.lookup("Softmax", 11).since == 1
    assert registry.lookup("Softmax", 13).since == 13
    assert registry.lookup("Softmax", 21).since == 13
    assert registry.lookup("Unsqueeze", 12).since == 1
    assert registry.lookup("Unsqueeze", 13).value_inputs == (1,)
    assert registry.lookup("Slice", 9).since == 1 and registry.lookup("Slice", 10).since == 10
    assert registry.lookup("ReduceSum", 12).since == 1
    assert registry.lookup("ReduceSum", 13).since == 13
    assert registry.lookup("ReduceMean", 17).since == 1
    assert registry.lookup("ReduceMean", 18).since == 18
    assert registry.lookup("Clip", 10).since == 6 and registry.lookup("Clip", 11).since == 11
    assert registry.lookup("Dropout", 9).since == 7 and registry.lookup("Dropout", 12).since == 12
    assert registry.lookup("Split", 18).since == 18
    assert registry.lookup("Pad", 19).since == 11
    assert registry.lookup("Conv", None).name == "Conv"


def test_every_spec_is_documented_and_complete():
    for spec in registry.all_specs():
        if spec.extra.get("control_flow") or spec.extra.get("tested_by"):   # tested with their passes
            continue
        assert spec.infer is not None and spec.kernel is not None, spec.name


@pytest.mark.parametrize("op_type, fn, opset", [
    (op, fn, opset) for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                   ("Div", np.divide), ("Pow", np.power))
    for opset in ((1,) if op == "Pow" else (1, 6))])     # Pow has no opset-6 version
def test_legacy_broadcast_aligns_b_at_axis(op_type, fn, opset):
    """Before opset 7, B broadcasts to A only with broadcast=1, aligned from ``axis``."""
    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 4, 5)).astype(np.float32) + 0.5
    b = rng.random((3, 4)).astype(np.float32) + 0.5
    _, outs = run_ours(op_type, [a, b], {"broadcast": 1, "axis": 1}, opset=opset)
    np.testing.assert_allclose(outs[0], fn(a, b.reshape(1, 3, 4, 1)), rtol=1e-6)
    _, outs = run_ours(op_type, [a, b[0, :1].reshape(1)], {"broadcast": 1}, opset=opset)
    np.testing.assert_allclose(outs[0], fn(a, b[0, 0]), rtol=1e-6)


@pytest.mark.parametrize("opset", [1, 6])
def test_legacy_prelu_has_one_slope_per_channel(opset):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    _, outs = run_ours("PRelu", [x, slope], {}, opset=opset)
    np.testing.assert_allclose(outs[0], np.where(x >= 0, x, x * slope.reshape(3, 1)), rtol=1e-6)


def test_every_spec_was_exercised(request):
    """Runs last: every registered (op, version) went through at least one kernel test."""
    if request.config.option.keyword or request.config.option.markexpr:
        pytest.skip("only meaningful for a full run")
    missing = sorted({(s.name, s.since) for s in registry.all_specs()
                      if not s.extra.get("control_flow") and not s.extra.get("tested_by")} - COVERED)
    assert not missing, f"ops/versions without a kernel test: {missing}"

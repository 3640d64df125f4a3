"""A dtype sweep of the numpy backend's native kernels (tests/unit/test_dtype_sweep.py).

For every default-domain op with a native numpy kernel and every element type its ONNX
schema allows for its main type constraint (numpy-representable tensor types only), a
one-node model is built with onnx.helper (:func:`build`), compiled through the real
pipeline, run, and compared with ``onnx.reference.ReferenceEvaluator`` (:func:`sweep`).
An (op, type) either passes or is refused at compile time with ``UnsupportedOpError``
naming the op and the type; anything else is a failure.
"""
from __future__ import annotations

import collections
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper

OPSET = 28
#: ONNX type names the sweep runs, as numpy dtypes.
TYPES = {"bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
         "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
         "float16": "float16", "float": "float32", "double": "float64"}
#: Ops with a native kernel the sweep builds no generic model for, with the reason.
SKIPPED_OPS: dict[str, str] = {op: "optional values (host only): tests/e2e/test_sequences.py"
                               for op in ("Optional", "OptionalHasElement", "OptionalGetElement")}
SKIPPED_OPS["SimplifiedLayerNormalization"] = "onnxruntime's, no onnx schema: tests/unit/kernels/test_contrib_kernels.py"
#: Ops whose main type constraint is not the first input's with several types.
MAIN_CONSTRAINT = {"OneHot": "T3", "DynamicQuantizeLinear": "T1"}

#: Value domains: positive, inside (-1, 1), at least 1.
POSITIVE = {"Log", "Sqrt", "Reciprocal", "ReduceLogSum", "ReduceL2", "Pow"}
UNIT = {"Acos", "Asin", "Atanh"}
AT_LEAST_1 = {"Acosh"}
UNARY = ("Abs Acos Acosh Asin Asinh Atan Atanh Ceil Celu Cos Cosh Elu Erf Exp Floor Gelu "
         "HardSigmoid HardSwish Hardmax Identity IsInf IsNaN LeakyRelu Log LogSoftmax Mish Neg "
         "Not BitwiseNot Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softmax Softplus Softsign "
         "Sqrt Tan Tanh ThresholdedRelu Dropout Flatten Transpose Shape Size ArgMax ArgMin "
         "Trilu GlobalAveragePool GlobalMaxPool").split()
BINARY = ("Add Sub Mul Div Mod Pow Equal Greater GreaterOrEqual Less LessOrEqual And Or Xor "
          "BitShift BitwiseAnd BitwiseOr BitwiseXor Max Min Mean Sum").split()
REDUCE = [op for op in ("ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean "
                        "ReduceMin ReduceProd ReduceSum ReduceSumSquare").split()]
NCHW = {"GlobalAveragePool", "GlobalMaxPool"}
#: The shapes of a big model: the oneDNN backend leaves tensors under 4096 elements to numpy.
BIG = {(2, 3, 4): (4, 32, 48), (3, 4): (32, 48), (1, 2, 5, 5): (1, 8, 33, 33)}

#: The last sweep's summary, for the test session's closing report (conftest).
SUMMARY: list[str] = []


def main_types(op: str) -> tuple[list[str], list[str]]:
    """(the ONNX type names of the op's main constraint the sweep runs, those it skips)."""
    schema = onnx.defs.get_schema(op, OPSET)
    allowed = {c.type_param_str: [t[len("tensor("):-1] if t.startswith("tensor(") else t
                                  for t in c.allowed_type_strs]
               for c in schema.type_constraints}
    name = MAIN_CONSTRAINT.get(op)
    if name is None:
        multi = [i.type_str for i in schema.inputs if len(allowed.get(i.type_str, ())) > 1]
        name = multi[0] if multi else schema.outputs[0].type_str
    names = [t for t in allowed[name] if "(" not in t]
    return [t for t in names if t in TYPES], [t for t in names if t not in TYPES]


def data(rng, dtype: str, shape, op: str = "") -> np.ndarray:
    """Random values of ``dtype`` that fit ``op``'s domain."""
    dt = np.dtype(dtype)
    if dt == bool:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        low = 1 if op in POSITIVE else (0 if dt.kind == "u" else -5)
        return rng.integers(low, 6, shape).astype(dt)
    if op in UNIT:
        x = rng.uniform(-0.9, 0.9, shape)
    elif op in AT_LEAST_1:
        x = rng.uniform(1.1, 3.0, shape)
    elif op in POSITIVE:
        x = rng.uniform(0.5, 3.0, shape)
    else:
        x = rng.uniform(-2.0, 2.0, shape)
    return x.astype(dt)


class Spec:
    """One model under construction: graph inputs (fed), initializers, attributes."""

    def __init__(self, rng, dtype: str, big: bool = False):
        self.rng, self.dtype, self.big = rng, dtype, big
        self.inputs: list[tuple[str, np.ndarray]] = []
        self.inits: list[tuple[str, np.ndarray]] = []
        self.names: list[str] = []
        self.attrs: dict = {}
        self.n_out = 1

    def feed(self, value: np.ndarray) -> "Spec":
        name = f"in{len(self.names)}"
        self.inputs.append((name, np.asarray(value)))
        self.names.append(name)
        return self

    def const(self, value) -> "Spec":
        name = f"c{len(self.names)}"
        self.inits.append((name, np.asarray(value)))
        self.names.append(name)
        return self

    def none(self) -> "Spec":
        self.names.append("")
        return self

    def x(self, shape=(2, 3, 4), op: str = "") -> "Spec":
        return self.feed(data(self.rng, self.dtype, self.shape(shape), op))

    def shape(self, shape):
        """``shape``, or for a big model (past oneDNN's small-tensor cut) a larger one."""
        return BIG.get(tuple(shape), shape) if self.big else shape

    def t(self, values) -> np.ndarray:
        return np.asarray(values).astype(self.dtype)


def _fill(op: str, s: Spec) -> None:
    """The inputs and attributes of a small ``op`` model of element type ``s.dtype``."""
    i64 = lambda v: np.asarray(v, np.int64)          # noqa: E731
    f32 = np.float32
    if op in UNARY:
        s.x((1, 2, 3, 3) if op in NCHW else (3, 4) if op == "Trilu" else (2, 3, 4), op)
    elif op in BINARY:
        s.x((2, 3, 4), op)
        if op in ("Div", "Mod"):
            b = data(s.rng, s.dtype, s.shape((3, 4)))
            s.feed(np.where(b == 0, 1, b).astype(s.dtype))
        elif op in ("Pow", "BitShift"):
            s.feed(s.rng.integers(0, 3, s.shape((3, 4))).astype(s.dtype))
        else:
            s.x((3, 4), op)
        if op == "BitShift":
            s.attrs["direction"] = "LEFT"
        if op == "Mod" and np.dtype(s.dtype).kind == "f":
            s.attrs["fmod"] = 1
    elif op in REDUCE:
        s.x((2, 3, 4), op).const(i64([1]))
    elif op == "Cast":
        s.x().attrs["to"] = onnx.TensorProto.FLOAT
    elif op == "CastLike":
        s.x().const(np.zeros([1], f32))
    elif op == "Clip":
        s.x().const(s.t(1 if np.dtype(s.dtype).kind == "u" else -1)).const(s.t(3))
    elif op == "Concat":
        s.x((2, 3)).x((1, 3)).attrs["axis"] = 0
    elif op == "Constant":
        s.attrs["value"] = numpy_helper.from_array(data(s.rng, s.dtype, (2, 3)))
    elif op == "ConstantOfShape":
        s.const(i64([2, 3])).attrs["value"] = numpy_helper.from_array(s.t([1]))
    elif op in ("Conv", "ConvTranspose"):
        w = (3, 2, 3, 3) if op == "Conv" else (2, 3, 3, 3)
        w = (w[0] * 4, w[1] * 4) + w[2:] if s.big else w
        s.x((1, 2, 5, 5)).const(data(s.rng, s.dtype, w) / 4).const(data(s.rng, s.dtype, w[:1]
                                                                   if op == "Conv" else w[1:2]))
    elif op in ("AveragePool", "MaxPool"):
        s.x((1, 2, 5, 5)).attrs["kernel_shape"] = [2, 2]
    elif op == "LRN":
        s.x((1, 4, 3, 3)).attrs["size"] = 3
    elif op == "BatchNormalization":
        s.x((1, 3, 2, 2)).const(s.t([1, 2, 0.5])).const(s.t([0, 1, -1]))
        s.const(s.t([0.1, -0.2, 0.3])).const(s.t([1, 0.5, 2]))
    elif op == "InstanceNormalization":
        s.x((1, 3, 2, 2)).const(s.t([1, 2, 0.5])).const(s.t([0, 1, -1]))
    elif op == "LayerNormalization":
        n = s.shape((2, 3, 4))[-1]
        s.x((2, 3, 4)).const(data(s.rng, s.dtype, (n,))).const(data(s.rng, s.dtype, (n,)))
    elif op in ("GRU", "LSTM", "RNN"):
        gates, hidden = {"GRU": 3, "LSTM": 4, "RNN": 1}[op], 4
        s.x((2, 1, 3)).const(data(s.rng, s.dtype, (1, gates * hidden, 3)) / 2)
        s.const(data(s.rng, s.dtype, (1, gates * hidden, hidden)) / 2)
        s.attrs["hidden_size"] = hidden
    elif op == "CumSum":
        s.x().const(i64(1))
    elif op in ("DepthToSpace", "SpaceToDepth"):
        s.x((1, 8, 2, 2) if op == "DepthToSpace" else (1, 2, 4, 4)).attrs["blocksize"] = 2
    elif op == "Expand":
        s.x((3, 1)).const(i64([2, 3, 4]))
    elif op == "Gather":
        s.x((4, 3)).feed(i64([[0, 3], [2, -1]]))
    elif op == "GatherElements":
        s.x((3, 4)).feed(s.rng.integers(-3, 3, (2, s.shape((3, 4))[1]))).attrs["axis"] = 0
    elif op == "GatherND":
        s.x((4, 3, 2)).feed(i64([[[0, 2], [3, -1]], [[1, 0], [2, 1]]]))
    elif op == "ScatterElements":
        n = s.shape((3, 4))[1]
        s.x((3, 4)).feed(s.rng.integers(-3, 3, (2, n))).x((2, 4) if not s.big else (2, n))
        s.attrs.update(axis=0, reduction="add")            # repeated indices each count
    elif op == "ScatterND":
        s.x((4, 3)).feed(i64([[1], [-1], [1]])).x((3, 3))
        s.attrs["reduction"] = "add"
    elif op in ("Gemm", "MatMul"):
        m, k, n = (64, 48, 32) if s.big else (2, 3, 4)
        s.feed(data(s.rng, s.dtype, (m, k))).feed(data(s.rng, s.dtype, (k, n)))
        if op == "Gemm":
            s.const(data(s.rng, s.dtype, (n,)))
    elif op in QUANTIZED:
        _fill_quantized(op, s)
    elif op == "OneHot":
        s.feed(i64([0, 2, 1, -1])).const(i64(3)).const(s.t([0, 1]))
    elif op == "PRelu":
        s.x().const(data(s.rng, s.dtype, s.shape((2, 3, 4))[-1:]))
    elif op == "Pad":
        s.x((2, 3)).const(i64([0, 1, 1, 0])).const(s.t(1))
    elif op == "Range":
        s.const(s.t(1)).const(s.t(9)).const(s.t(2))
    elif op == "Reshape":
        s.x().const(i64([4, -1]))
    elif op == "Resize":
        s.x((1, 1, 2, 2)).none().const(np.asarray([1, 1, 2, 2], f32))
    elif op == "Slice":
        s.x().const(i64([0, 1])).const(i64([2, 3])).const(i64([1, 2]))
    elif op == "Split":
        s.x((4, 3)).attrs["num_outputs"] = 2
        s.n_out = 2
    elif op == "Squeeze":
        s.x((1, 3, 4)).const(i64([0]))
    elif op == "Unsqueeze":
        s.x((3, 4)).const(i64([0]))
    elif op == "Tile":
        s.x().const(i64([2, 1, 1]))
    elif op == "TopK":
        s.x().const(i64([2]))
        s.n_out = 2
    elif op == "Where":
        s.feed(s.rng.random(s.shape((3, 4))) < 0.5).x((2, 3, 4)).x((3, 4))
    else:
        raise KeyError(op)


#: The quantization ops: their inputs come from :func:`_fill_quantized`.
QUANTIZED = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearMatMul",
             "MatMulInteger", "QLinearConv", "ConvInteger")


def _fill_quantized(op: str, s: Spec) -> None:
    """A quantization op of ``s.dtype`` (the float of Q, the integer of the others), its
    scales float32, its zero points the integer type's."""
    f32 = lambda v: np.asarray(v, np.float32)          # noqa: E731
    if op == "QuantizeLinear":
        s.x().const(f32(0.05)).const(np.asarray(3, np.uint8))
    elif op == "DequantizeLinear":
        s.x().const(f32(0.5)).const(s.t(1))
    elif op == "DynamicQuantizeLinear":
        s.x((3, 4)).n_out = 3
    elif op in ("QLinearMatMul", "MatMulInteger"):
        m, k, n = (64, 48, 32) if s.big else (2, 3, 4)
        a, b = data(s.rng, s.dtype, (m, k)), data(s.rng, s.dtype, (k, n))
        if op == "MatMulInteger":
            s.feed(a).feed(b).const(s.t(1)).const(s.t(2))
        else:
            s.feed(a).const(f32(0.02)).const(s.t(1)).const(b).const(f32(0.03)).const(s.t(2))
            s.const(f32(0.01)).const(s.t(0))
    else:
        w = (12, 8, 3, 3) if s.big else (3, 2, 3, 3)
        x, wv = s.x((1, 2, 5, 5)), data(s.rng, s.dtype, w)
        if op == "ConvInteger":
            x.const(wv).const(s.t(1)).const(s.t(0))
        else:
            x.const(f32(0.02)).const(s.t(1)).const(wv).const(f32(0.03)).const(s.t(0))
            x.const(f32(0.05)).const(s.t(2)).const(np.arange(w[0], dtype=np.int32))


#: Ops (or (op, type) pairs) whose reference implementation in onnx is wrong where the sweep
#: runs it: their expected outputs come from onnxruntime.
ORT_ORACLE = {"LRN": "onnx's reference LRN sums squares over the batch index, not the channels",
              ("LayerNormalization", "float16"): "onnx's reference rounds float16 intermediates "
              "(stash_type 1 asks for float32): 3e-3 off the exact result, onnxruntime 1/2 ulp"}


def _model(op: str, onnx_type: str, s: Spec, inputs, inits, outs):
    node = helper.make_node(op, s.names, [o.name for o in outs], name=op.lower(), **s.attrs)
    g = helper.make_graph(
        [node], f"{op}_{onnx_type}",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in inputs], outs, [numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)


def _reference(model, feeds: dict) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(e) for e in ReferenceEvaluator(model).run(None, feeds)]


def _retyped(op: str, onnx_type: str, s: Spec, dtype, outs):
    """(model, feeds) with every array of the sweep's type as ``dtype`` instead."""
    cast = lambda pairs: [(n, v.astype(dtype) if v.dtype == s.dtype else v)  # noqa: E731
                          for n, v in pairs]
    attrs = dict(s.attrs)
    if "value" in attrs:
        s.attrs["value"] = numpy_helper.from_array(numpy_helper.to_array(attrs["value"]).astype(dtype))
    try:
        return _model(op, onnx_type, s, cast(s.inputs), cast(s.inits), outs), dict(cast(s.inputs))
    finally:
        s.attrs = attrs


def build(op: str, onnx_type: str, seed: int = 0, big: bool = False):
    """(model, feeds, expected outputs, oracle) of a one-node ``op`` model of ``onnx_type``.

    The outputs are declared as onnx's shape inference types them.  The oracle is onnx's
    reference evaluator; where it cannot run an integer or bool type (MaxPool pads with
    NaN, say), the reference on float64 copies of the inputs, cast back; for the ops of
    :data:`ORT_ORACLE`, onnxruntime."""
    s = Spec(np.random.default_rng(seed), TYPES[onnx_type], big)
    _fill(op, s)
    empty = [helper.make_empty_tensor_value_info(f"out{k}") for k in range(s.n_out)]
    typed = onnx.shape_inference.infer_shapes(_model(op, onnx_type, s, s.inputs, s.inits, empty),
                                              strict_mode=True)
    elems = [o.type.tensor_type.elem_type for o in typed.graph.output]
    feeds, oracle = dict(s.inputs), "onnx reference"
    try:
        expected = _reference(_model(op, onnx_type, s, s.inputs, s.inits, empty), feeds)
    except Exception:
        if np.dtype(s.dtype).kind not in "biu":
            raise
        expected, oracle = _reference(*_retyped(op, onnx_type, s, np.float64, empty)), \
            "onnx reference on float64"
    expected = [e.astype(helper.tensor_dtype_to_np_dtype(t)) if t else e
                for e, t in zip(expected, elems)]
    outs = [helper.make_tensor_value_info(f"out{k}", helper.np_dtype_to_tensor_dtype(e.dtype),
                                          e.shape) for k, e in enumerate(expected)]
    model = _model(op, onnx_type, s, s.inputs, s.inits, outs)
    onnx.checker.check_model(model)
    if op in ORT_ORACLE or (op, onnx_type) in ORT_ORACLE:
        import onnxruntime as ort

        m, f = model, feeds
        if s.dtype == "float64":          # onnxruntime has float32 kernels for all of them
            m, f = _retyped(op, onnx_type, s, np.float32, empty)
            m = onnx.shape_inference.infer_shapes(m)
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = [np.asarray(e).astype(x.dtype) for e, x in zip(session.run(None, f), expected)]
        oracle = "onnxruntime" + (" on float32" if m is not model else "")
    return model, feeds, expected, oracle


def compare(got: dict, expected: list, onnx_type: str) -> None:
    """Raises AssertionError when ``got`` differs from the reference outputs."""
    if len(got) != len(expected):
        raise AssertionError(f"{len(got)} outputs, expected {len(expected)}")
    for k, e in enumerate(expected):
        g = np.asarray(got[f"out{k}"])
        if g.dtype != e.dtype or g.shape != e.shape:
            raise AssertionError(f"output {k} is {g.dtype}{list(g.shape)}, "
                                 f"expected {e.dtype}{list(e.shape)}")
        if e.dtype.kind == "f":
            tol = 1e-3 if e.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol, equal_nan=True,
                                       err_msg=f"output {k}")
        elif not np.array_equal(g, e):
            raise AssertionError(f"output {k} differs: {g.ravel()[:8]} vs {e.ravel()[:8]}")


def run_pair(aircc, model, feeds, expected, onnx_type: str, op: str, mode: str, target: str,
             device) -> tuple[str, str]:
    """('pass' | 'fallback' | 'refused' | 'failed', detail) of one compile + load + run
    ('fallback': passed on onnx's reference kernel, as the compile report says; the detail of
    a static pass names the backends its nodes' tilings chose)."""
    try:
        compiled = aircc.compile(model, mode=mode, target=target)
    except aircc.UnsupportedOpError as e:
        msg = str(e)
        if op in msg and any(n in msg for n in (onnx_type, TYPES[onnx_type])):
            return "refused", msg
        return "failed", f"refused without naming the op and the type: {msg}"
    except Exception as e:          # any other compile error is a failure of the sweep
        return "failed", f"compile: {type(e).__name__}: {e}"
    try:
        loaded = aircc.load(compiled, device=device)
        try:
            got = loaded.run(feeds)
        finally:
            loaded.close()
        compare(got, expected, onnx_type)
    except Exception as e:
        return "failed", f"run: {type(e).__name__}: {str(e)[:300]}"
    backends = {n.meta["tiling"].get("backend", "") for n in compiled.graph.nodes
                if n.domain == "" and isinstance(n.meta.get("tiling"), dict)}
    return ("fallback" if compiled.report.fallback_nodes else "pass"), " ".join(sorted(backends))


def native_ops() -> list[str]:
    """The default-domain ops the numpy backend has a native kernel for."""
    from aircc.ops import kernel_backend

    return sorted({i.op for i in kernel_backend("numpy").all_impls() if i.domain == ""})


def sweep(device, numpy_target: str, native_types=tuple(TYPES)) -> dict:
    """Every (op, type) through static and dynamic mode on ``numpy_target``, and static mode
    on the default target for ``native_types``; the outcomes and the skips."""
    import aircc

    t0 = time.monotonic()
    result = {"outcomes": {}, "skipped_types": {}, "skipped_ops": {}, "oracles": {},
              "ops": native_ops(), "swept_ops": set()}
    for op in result["ops"]:
        if op in SKIPPED_OPS:
            result["skipped_ops"][op] = SKIPPED_OPS[op]
            continue
        run_types, skipped = main_types(op)
        result["skipped_types"][op] = skipped
        for onnx_type in run_types:
            result["swept_ops"].add(op)
            try:
                model, feeds, expected, oracle = build(op, onnx_type)
            except Exception as e:
                result["outcomes"][(op, onnx_type, "build")] = ("failed", f"{type(e).__name__}: {e}")
                continue
            if oracle != "onnx reference":
                result["oracles"][(op, onnx_type)] = oracle
            runs = [("static", numpy_target), ("dynamic", numpy_target)]
            for mode, target in runs:
                result["outcomes"][(op, onnx_type, f"{mode}@{target}")] = run_pair(
                    aircc, model, feeds, expected, onnx_type, op, mode, target, device)
            if onnx_type not in native_types:
                continue
            try:                # on oneDNN: big enough for its kernels to take the op
                model, feeds, expected, oracle = build(op, onnx_type, big=True)
            except Exception as e:
                result["outcomes"][(op, onnx_type, "build big")] = ("failed", f"{type(e).__name__}: {e}")
                continue
            for mode in ("static", "dynamic"):
                result["outcomes"][(op, onnx_type, f"{mode}@native")] = run_pair(
                    aircc, model, feeds, expected, onnx_type, op, mode, "native", device)
    result["seconds"] = time.monotonic() - t0
    return result


def summary(result: dict) -> str:
    """The sweep's counts, refusals, skips and failures, as printed at the end of the run."""
    outcomes = result["outcomes"]
    counts = collections.Counter(o for o, _ in outcomes.values())
    pairs = {(op, t) for op, t, _ in outcomes}
    lines = [f"{len(result['swept_ops'])} ops with a native numpy kernel, {len(pairs)} (op, type) "
             f"pairs, {len(outcomes)} runs (static and dynamic on the numpy target and, with "
             f"shapes past oneDNN's small-tensor cut, on native) in {result['seconds']:.1f} s",
             f"passed {counts['pass'] + counts['fallback']} ({counts['fallback']} on the fallback "
             f"kernel), refused at compile time {counts['refused']}, failed {counts['failed']}",
             f"static native runs on oneDNN's own kernels: "
             f"{sum('dnnl' in d for (_, _, r), (o, d) in outcomes.items() if o == 'pass')} "
             f"(the rest handed to numpy's)"]
    refused = collections.defaultdict(set)
    for (op, t, _), (o, _) in outcomes.items():
        if o == "refused":
            refused[op].add(t)
    for op, types in sorted(refused.items()):
        lines.append(f"  refused {op}: {', '.join(sorted(types))}")
    fallback = collections.defaultdict(set)
    for (op, t, _), (o, _) in outcomes.items():
        if o == "fallback":
            fallback[op].add(t)
    for op, types in sorted(fallback.items()):
        lines.append(f"  on the fallback kernel {op}: {', '.join(sorted(types))}")
    skipped = {op: ts for op, ts in result["skipped_types"].items() if ts}
    lines.append(f"skipped types ({sum(map(len, skipped.values()))} (op, type) pairs: not "
                 f"numpy-representable tensor types)")
    by_types = collections.defaultdict(list)
    for op, ts in sorted(skipped.items()):
        by_types[tuple(ts)].append(op)
    for ts, ops in sorted(by_types.items(), key=lambda kv: len(kv[1])):
        lines.append(f"  {', '.join(ts)}: {', '.join(ops)}")
    lines.append(f"skipped ops ({len(result['skipped_ops'])}; every op with a native kernel was swept)"
                 if not result["skipped_ops"] else f"skipped ops ({len(result['skipped_ops'])})"
                 + "".join(f"\n  {op}: {why}" for op, why in sorted(result["skipped_ops"].items())))
    lines.append(f"expected outputs not from onnx's reference evaluator ({len(result['oracles'])})")
    for (op, t), oracle in sorted(result["oracles"].items()):
        lines.append(f"  oracle of {op} {t}: {oracle}"
                     + (f" ({ORT_ORACLE.get(op) or ORT_ORACLE.get((op, t))})"
                        if oracle.startswith("onnxruntime") else ""))
    for (op, t, run), (o, detail) in sorted(outcomes.items()):
        if o == "failed":
            lines.append(f"  FAIL {op} {t} {run}: {detail}")
    return "\n".join(lines)

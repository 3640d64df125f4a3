"""Run one op through aircc's own path (shape rule, tiling, numpy kernel) and through
onnx's ReferenceEvaluator (or onnxruntime), and compare.

Every (op, since) whose kernel runs here is recorded in :data:`COVERED`;
``test_every_definition_was_exercised`` checks at the end that none was left out.
"""
from __future__ import annotations

import msgpack
import numpy as np
import onnx
from aircc.ops import InferContext, TensorType, kernel_backend, op_def, resolve_target
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

RNG = np.random.default_rng(0)
#: (op, since) pairs whose kernels ran; (domain, op, since) for an op of another domain.
COVERED: set[tuple] = set()
BACKEND = kernel_backend("numpy")
#: Tilings are computed for one fixed target, whatever machine runs the tests.
TARGET = resolve_target("cpu-avx2")


def rand(*shape, dtype=np.float32, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def ints(*shape, lo=-5, hi=6, dtype=np.int64):
    return RNG.integers(lo, hi, size=shape).astype(dtype)


def attr_values(node: onnx.NodeProto) -> dict:
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


def one_node_model(op_type, inputs, attrs, opset, n_out, domain=""):
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(op_type, names, [f"y{j}" for j in range(n_out)], name="n0",
                            domain=domain or None, **(attrs or {}))
    vi = [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in zip(names, inputs) if n]
    outs = [helper.make_empty_tensor_value_info(f"y{j}") for j in range(n_out)]
    graph = helper.make_graph([node], "g", vi, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                              + ([helper.make_opsetid(domain, 1)] if domain else []))
    model.ir_version = 8
    return model, node


def reference(model, inputs, engine):
    """The reference's outputs: ``engine`` ``"onnx"`` (onnx's ReferenceEvaluator) or
    ``"ort"`` (onnxruntime, one thread)."""
    if engine not in ("onnx", "ort"):
        raise ValueError(f"engine must be 'onnx' or 'ort', got {engine!r}")
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


def garbage(t: TensorType) -> np.ndarray:
    """An output buffer full of values a kernel that forgot an element would leave."""
    a = np.empty(t.shape, dtype=t.dtype)
    if a.dtype.kind == "f":
        a.fill(np.nan)
    elif a.dtype.kind == "b":
        a[...] = RNG.integers(0, 2, size=a.shape).astype(bool)
    else:
        a.fill(123)
    return a


def run_ours(op_type, inputs, attrs=None, opset=13, n_out=1, node=None, domain=""):
    """Infer, tile and run our kernel (of the op of ``domain``: at its opset 1); returns
    (output types, outputs)."""
    if node is None:
        _, node = one_node_model(op_type, inputs, attrs, opset, n_out, domain)
    at = attr_values(node)
    version = 1 if domain else opset
    definition = op_def(op_type, version, domain)
    impl = BACKEND.impl(op_type, version, domain)
    COVERED.add((domain, definition.name, definition.since) if domain
                else (definition.name, definition.since))
    types = [None if a is None else TensorType.of(a) for a in inputs]
    values = [a if (i in definition.value_inputs and a is not None) else None
              for i, a in enumerate(inputs)]
    ctx = InferContext(types, at, values, node="n0", op=op_type, num_outputs=n_out)
    out_types = definition.infer(ctx)
    assert len(out_types) == n_out
    tiling = impl.tile(types, at, TARGET)
    msgpack.packb(tiling)  # must be storable
    nws = tiling.get("workspace", 0)
    ws = np.empty(nws, np.uint8) if nws else None
    outs = [garbage(t) for t in out_types]
    impl.kernel([None if a is None else a for a in inputs], outs, at, tiling, ws)
    if impl.prepare is not None:        # every input an activation; then all but the first
        for weights in (set(definition.value_inputs), set(range(1, len(inputs)))):
            check_bound(impl, inputs, out_types, at, tiling, weights)
    return out_types, outs


def check_bound(impl, inputs, out_types, attrs, tiling, weights: set) -> None:
    """The kernel bound once (its ``prepare``, as static tasks and replays run it) computes
    what the plain kernel computes on the inputs of each run: bound to copies of the inputs
    (those in ``weights`` said constant), run, then run again after every other input
    changed in place (a bound kernel that kept a copy of an activation answers the first
    run's values)."""
    held = [None if a is None else np.array(a) for a in inputs]
    constant = [i in weights for i in range(len(inputs))]
    ws = np.empty(tiling.get("workspace", 0), np.uint8) if tiling.get("workspace") else None
    bound = [garbage(t) for t in out_types]
    run = impl.prepare(held, bound, attrs, tiling, ws, constant)
    if run is None:                     # a use it leaves to the plain kernel
        return
    run()
    for a, c in zip(held, constant):
        if a is not None and not c and a.size > 1:
            a[...] = np.roll(a.copy(), 1)
    plain = [garbage(t) for t in out_types]
    try:
        impl.kernel(held, plain, attrs, tiling, ws)
    except Exception:                   # the changed values do not fit the op: nothing to compare
        return
    run()
    for b, p in zip(bound, plain):
        if p.dtype.kind in "fc":
            np.testing.assert_allclose(b, p, rtol=1e-5, atol=1e-6, err_msg="bound kernel, 2nd run")
        else:
            np.testing.assert_array_equal(b, p, err_msg="bound kernel, 2nd run")


def check(op_type, inputs, attrs=None, opset=13, n_out=1, engine="onnx", rtol=1e-5,
          atol=1e-6, compare=None, domain=""):
    """Run ``op_type`` (of ``domain``) through our path and the reference, compare types and
    values."""
    model, node = one_node_model(op_type, inputs, attrs, opset, n_out, domain)
    expected = reference(model, inputs, engine)
    out_types, outs = run_ours(op_type, inputs, attrs, opset, n_out, node, domain)
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
    definition = op_def(op_type, opset)
    ctx = InferContext(types, attrs or {}, values or [None] * len(types), node="n",
                       op=op_type, num_outputs=n_out)
    return definition.infer(ctx)


def T(shape, dtype="float32"):
    return TensorType(dtype, tuple(shape))

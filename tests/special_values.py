"""NaN and infinities through every native kernel (tests/unit/kernels/test_special_values.py).

Every default-domain op with a native numpy kernel and a float32 type gets the one-node
model of the dtype sweep (:func:`dtype_sweep.build`), its fed float inputs salted with NaN,
+inf and -inf at a few positions among ordinary values (:func:`salted`); the expected
outputs are onnx's ReferenceEvaluator on that model (onnxruntime for the ops of
``dtype_sweep.ORT_ORACLE``).  The one-node models are then put side by side into one
model per shape class (:func:`batch`), each node on inputs of its own, so that a compile
gives every node the kernel it gets alone, and one compile and one run check them all.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

import dtype_sweep

#: Ops with a native kernel left out, with the reason.
LEFT_OUT = {
    **{op: "no float32 input to carry a special value (its values are constants)"
       for op in ("Constant", "ConstantOfShape", "Range", "OneHot")},
    **{op: "NaN and infinities to an integer type: ONNX does not say what they give"
       for op in ("QuantizeLinear", "DynamicQuantizeLinear")},
    **dtype_sweep.SKIPPED_OPS,
}

SPECIALS = (np.nan, np.inf, -np.inf)
#: Cases whose expected outputs are onnx's reference with NaN carried through each window as
#: ``np.max`` carries it (as its GlobalMaxPool and ReduceMax do), with the reason: its MaxPool
#: keeps or drops a NaN by where it lies (strides 1: nanmax of each window; else a NaN
#: first in its window wins and later ones are dropped; onnxruntime's likewise), which
#: ONNX does not define, and a NaN pixel must not vanish.
NAN_WINDOWS = {"MaxPool": "its reference drops NaN by position", "maxpool": "its MaxPool"}
#: Cases (ops, fusion graphs) whose expected outputs come from onnxruntime, with the reason.
ORACLE = {
    **dtype_sweep.ORT_ORACLE,
    "AveragePool": "onnx's reference pads with NaN and averages with nanmean: it drops a NaN "
                   "of the input too",
    "Resize": "onnx's reference takes nearest neighbours as 0/1 weights times every input: "
              "0 * inf makes NaN of an infinity",
    "avgpool_conv": "its AveragePool (above)",
}


def salted(x: np.ndarray, seed: int, specials=SPECIALS) -> np.ndarray:
    """``x`` with NaN, +inf and -inf (``specials``) each at one or a few positions (one of
    each per 2048 elements, at least one), the rest of the values as they were."""
    y = np.array(x, copy=True)
    flat = y.reshape(-1)
    per = max(1, flat.size // 2048)
    rng = np.random.default_rng(seed)
    at = rng.choice(flat.size, size=min(flat.size, len(specials) * per), replace=False)
    for k, i in enumerate(at):
        flat[i] = specials[k % len(specials)]
    return y


def reference(model: onnx.ModelProto, feeds: dict, op: str) -> list[np.ndarray]:
    """The expected outputs: onnx's reference evaluator (for :data:`NAN_WINDOWS`, with NaN
    carried through each window), or onnxruntime for the cases of :data:`ORACLE`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if op in ORACLE:
            import onnxruntime as ort

            session = ort.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
            return [np.asarray(e) for e in session.run(None, feeds)]
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(model)
        if op not in NAN_WINDOWS:
            return [np.asarray(e) for e in evaluator.run(None, feeds)]
        x = model.graph.input[0].name
        nan = np.isnan(feeds[x])
        base = evaluator.run(None, {**feeds, x: np.where(nan, -np.inf, feeds[x])})[0]
        marks = evaluator.run(None, {**feeds, x: nan.astype(feeds[x].dtype)})[0]
        return [np.where(marks > 0, np.float32(np.nan), base).astype(base.dtype)]


@dataclass
class Batch:
    """Models side by side in one: the model, its feeds, the expected value of every output,
    and which case (op or fusion) each output and node belongs to."""

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    owner: dict[str, str] = field(default_factory=dict)


def batch(cases: dict[str, tuple[onnx.ModelProto, dict]], name: str) -> Batch:
    """One model of the ``cases`` (case name -> (model, feeds)): every value, initializer and
    node renamed ``<case>/<name>``, the expected outputs computed on each case alone."""
    nodes, inputs, inits, outputs = [], [], [], []
    feeds, expected, owner = {}, {}, {}
    opsets = {}
    for case, (model, case_feeds) in cases.items():
        for imp in model.opset_import:
            opsets[imp.domain] = max(opsets.get(imp.domain, 0), imp.version)
        ren = lambda n: f"{case}/{n}" if n else n      # noqa: E731
        g = model.graph
        for node in g.node:
            n = onnx.NodeProto()
            n.CopyFrom(node)
            n.name = ren(node.name or node.op_type)
            n.input[:] = [ren(i) for i in node.input]
            n.output[:] = [ren(o) for o in node.output]
            nodes.append(n)
        for vi in g.input:
            v = onnx.ValueInfoProto()
            v.CopyFrom(vi)
            v.name = ren(vi.name)
            inputs.append(v)
        for t in g.initializer:
            c = onnx.TensorProto()
            c.CopyFrom(t)
            c.name = ren(t.name)
            inits.append(c)
        got = reference(model, case_feeds, case)
        for vi, value in zip(g.output, got):
            v = onnx.ValueInfoProto()
            v.CopyFrom(vi)
            v.name = ren(vi.name)
            outputs.append(v)
            expected[v.name] = value
            owner[v.name] = case
        feeds.update({ren(k): v for k, v in case_feeds.items()})
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid(d, v) for d, v in sorted(opsets.items())])
    onnx.checker.check_model(model)
    return Batch(model, feeds, expected, owner)


def float_ops() -> list[str]:
    """The ops with a native numpy kernel whose main type constraint allows float32 (an op
    onnx has no schema for at the sweep's opset has no reference to compare with)."""
    return [op for op in dtype_sweep.native_ops() if op not in LEFT_OUT
            and onnx.defs.has(op, dtype_sweep.OPSET) and "float" in dtype_sweep.main_types(op)[0]]


def node_cases(big: bool) -> dict[str, tuple[onnx.ModelProto, dict]]:
    """Every op of :func:`float_ops` as a one-node float32 model with salted feeds; ``big``:
    the dtype sweep's shapes past oneDNN's small-tensor cut."""
    cases = {}
    for k, op in enumerate(float_ops()):
        try:
            model, feeds, _, _ = dtype_sweep.build(op, "float", seed=k, big=big)
        except KeyError:            # no model in the dtype sweep: test_special_values says so
            continue
        cases[op] = (model, {n: salted(v, k) if v.dtype == np.float32 else v
                             for n, v in feeds.items()})
    return cases


def mismatch(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-5) -> str:
    """'' when ``got`` is ``want`` (same dtype and shape; NaN exactly where ``want`` has NaN,
    the same infinities, finite values within tolerance), else what differs."""
    got = np.asarray(got)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f":
        if np.array_equal(got, want):
            return ""
        bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        return f"{bad.size} of {want.size} differ, first at {bad[0]}: " \
               f"{got.reshape(-1)[bad[0]]} vs {want.reshape(-1)[bad[0]]}"
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    if not np.array_equal(nan_got, nan_want):
        lost, extra = int((nan_want & ~nan_got).sum()), int((nan_got & ~nan_want).sum())
        at = np.flatnonzero((nan_want ^ nan_got).reshape(-1))[0]
        return (f"NaN masks differ ({lost} NaN lost, {extra} NaN extra of {want.size}; first "
                f"at {at}: {got.reshape(-1)[at]} vs {want.reshape(-1)[at]})")
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        return " ".join(str(e).split())[:400]
    return ""

"""The op registry and the numpy backend's kernels: versions, coverage, documentation."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from aircc.errors import UnsupportedOpError
from aircc.ops import Trait, all_definitions, kernel_backend, op_def
from kernel_harness import COVERED, run_ours

BACKEND = kernel_backend("numpy")
#: Domains besides the default whose ops models use (``check(..., domain=...)`` records them).
MODEL_DOMAINS = ("com.microsoft",)


def test_unknown_op():
    with pytest.raises(UnsupportedOpError) as e:
        op_def("NoSuchOp", 13, node="n7")
    msg = str(e.value)
    assert "node 'n7': op 'NoSuchOp' (domain ai.onnx, opset 13) is not supported" in msg
    assert "`aircc ops`" in msg and "\n" not in msg and len(msg) < 200 and "Conv" not in msg
    with pytest.raises(UnsupportedOpError, match="did you mean 'Conv'"):
        op_def("Cnov", 13, node="n8")
    with pytest.raises(UnsupportedOpError, match="domain com.microsoft, opset 1"):
        op_def("NoSuchContribOp", 1, "com.microsoft", node="n9")
    with pytest.raises(UnsupportedOpError):
        op_def("ConstantOfShape", 8)


def test_lookup_versions():
    assert op_def("Softmax", 11).since == 1
    assert op_def("Softmax", 13).since == 13
    assert op_def("Softmax", 21).since == 13
    assert op_def("Unsqueeze", 12).since == 1
    assert op_def("Unsqueeze", 13).value_inputs == (1,)
    assert op_def("Slice", 9).since == 1 and op_def("Slice", 10).since == 10
    assert op_def("ReduceSum", 12).since == 1
    assert op_def("ReduceSum", 13).since == 13
    assert op_def("ReduceMean", 17).since == 1
    assert op_def("ReduceMean", 18).since == 18
    assert op_def("Clip", 10).since == 6 and op_def("Clip", 11).since == 11
    assert op_def("Dropout", 9).since == 7 and op_def("Dropout", 12).since == 12
    assert op_def("Split", 18).since == 18
    assert op_def("Pad", 19).since == 11
    assert op_def("Conv", None).name == "Conv"
    assert BACKEND.impl("Softmax", 12).since == 1 and BACKEND.impl("Softmax", 13).since == 13


def _kernel_ops():
    """Every native definition run by a kernel of its own (not the device's tasks, not ops
    with bodies): each must have a shape rule and a numpy kernel of the same version."""
    return [d for d in all_definitions()
            if not d.has(Trait.DEVICE_TASK) and not d.has(Trait.CONTROL_FLOW)]


def test_every_definition_has_a_shape_rule_a_kernel_and_a_docstring():
    assert all(d.doc for d in all_definitions()), [d.name for d in all_definitions() if not d.doc]
    for d in _kernel_ops():
        assert d.infer is not None, d.name
        impl = BACKEND.impl(d.name, d.since, d.domain)
        assert impl.native and impl.kernel is not None, d.name
        assert impl.since == d.since, (d.name, d.since, impl.since)


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


@pytest.mark.last
def test_every_definition_was_exercised(request):
    """Runs last: every (op, version) of the default domain and of onnxruntime's contrib
    domain (:data:`MODEL_DOMAINS`) went through at least one kernel test (aircc's own ops
    are tested through the passes that create them)."""
    here = Path(__file__).parent
    collected = {item.path for item in request.session.items}
    if request.config.option.keyword or request.config.option.markexpr \
            or not set(here.glob("test_*_kernels.py")) <= collected:
        pytest.skip("only meaningful when every kernel test module runs")
    missing = sorted({(d.name, d.since) for d in _kernel_ops() if not d.domain} - COVERED)
    missing += sorted({(d.domain, d.name, d.since) for d in _kernel_ops() if d.domain in MODEL_DOMAINS}
                      - COVERED)
    assert not missing, f"ops/versions without a kernel test: {missing}"

"""NaN, +inf and -inf through every native kernel and every fused epilogue, on the numpy
target and on the oneDNN one, as onnx's reference has them: NaN exactly where the
reference has NaN, the same infinities, finite values within tolerance.

Each model goes through the real pipeline (``aircc.compile``, static mode, then
``aircc.load(...).run``).  The one-node models of every op (``tests/special_values.py``)
and the fusion graphs (``tests/special_fusions.py``) are each batched into one model per
shape class, so a compile covers them all; the compiled graph shows that each fusion
fired and which backend ran each node.

Left out, with the reason (``special_values.LEFT_OUT``; an op onnx has no schema for at the
sweep's opset has no reference either):

| op | why |
| --- | --- |
| Constant, ConstantOfShape, Range, OneHot | no float32 input to carry a special value |
| QuantizeLinear, DynamicQuantizeLinear | NaN and infinities to an integer: not defined by ONNX |
| Optional, OptionalHasElement, OptionalGetElement | optional values, host only |

Expected values not from onnx's reference alone: AveragePool and Resize from onnxruntime
(``special_values.ORACLE``: their reference implementations drop NaN, nanmean over NaN
padding, or make NaN of infinities, nearest neighbours as 0/1 weights times every input);
MaxPool from the reference with NaN carried through each window as ``np.max`` carries it
(``special_values.NAN_WINDOWS``: the reference keeps or drops a NaN by where it lies in its
window, which ONNX does not define, and a NaN pixel must not vanish).
"""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest

import aircc
import special_fusions
import special_values
from aircc.ops import kernel_backend, resolve_target
from testdata import SAMPLES, light_path, numpy_target

DNNL_TARGET = "native"
ON_DNNL = resolve_target(DNNL_TARGET).backend == "dnnl"
#: (target, big shapes) of each batch of one-node models.
NODE_RUNS = [(numpy_target(), False), (numpy_target(), True)] + \
    ([(DNNL_TARGET, True)] if ON_DNNL else [])
FUSION_TARGETS = [numpy_target()] + ([DNNL_TARGET] if ON_DNNL else [])
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")    # numpy on NaN and inf


def run(batch: special_values.Batch, target: str, device):
    """(compiled model, outputs) of ``batch`` compiled static for ``target`` and run once."""
    compiled = aircc.compile(batch.model, mode="static", target=target)
    with aircc.load(compiled, device=device) as model, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return compiled, model.run(batch.feeds)


def failures(batch: special_values.Batch, got: dict, backends: dict) -> list[str]:
    """One line per output that differs from its expected value."""
    lines = []
    for name, want in batch.expected.items():
        why = special_values.mismatch(got[name], want)
        if why:
            case = batch.owner[name]
            lines.append(f"{name} [{','.join(sorted(backends.get(case, ())))}]: {why}")
    return lines


def backends_by_case(compiled) -> dict[str, set[str]]:
    """Case name -> the backends its nodes' tilings chose (``numpy`` when not oneDNN)."""
    seen: dict[str, set[str]] = {}
    for node in compiled.graph.nodes:
        tiling = node.meta.get("tiling")
        if isinstance(tiling, dict) and "/" in node.name:
            seen.setdefault(node.name.split("/")[0], set()).add(tiling.get("backend") or "numpy")
    return seen


@pytest.fixture(scope="module")
def node_batches():
    return {big: special_values.batch(special_values.node_cases(big), f"nodes_big{int(big)}")
            for big in (False, True)}


@pytest.fixture(scope="module")
def fusion_batch():
    cases, fused = {}, {}
    for seed, name in enumerate(special_fusions.FUSIONS):
        model, feeds, fused[name] = special_fusions.build(name, seed)
        cases[name] = (model, feeds)
    return special_values.batch(cases, "fusions"), fused


@pytest.fixture(scope="module")
def dnnl_node_run(node_batches, device):
    """The big batch on the oneDNN target (None where this machine has none)."""
    return run(node_batches[True], DNNL_TARGET, device) if ON_DNNL else None


@pytest.mark.parametrize("target,big", NODE_RUNS, ids=[f"{t}-{'big' if b else 'small'}"
                                                        for t, b in NODE_RUNS])
def test_every_native_kernel_keeps_nan_and_infinities(node_batches, device, dnnl_node_run,
                                                      target, big):
    batch = node_batches[big]
    compiled, got = dnnl_node_run if target == DNNL_TARGET else run(batch, target, device)
    assert not compiled.report.fallback_nodes, compiled.report.fallback_nodes
    bad = failures(batch, got, backends_by_case(compiled))
    assert not bad, f"{len(bad)} outputs differ from the reference:\n" + "\n".join(bad)


def test_every_float_op_with_a_native_kernel_is_in_the_batch(node_batches):
    missing = set(special_values.float_ops()) - set(node_batches[True].owner.values())
    assert not missing, (f"ops with a native kernel but no model in tests/dtype_sweep.py "
                         f"(add one to its _fill, or to special_values.LEFT_OUT): {sorted(missing)}")


def test_the_dnnl_target_runs_its_own_kernels_on_the_big_models(dnnl_node_run):
    """Every op the oneDNN backend has a kernel for took it (not numpy's) in the big batch,
    so the test above checked oneDNN's kernels."""
    if dnnl_node_run is None:
        pytest.skip("no oneDNN target on this machine")
    compiled, _ = dnnl_node_run
    own = {i.op for i in kernel_backend("dnnl").all_impls() if i.domain == ""}
    ran = {case for case, b in backends_by_case(compiled).items() if "dnnl" in b}
    assert own <= ran, f"on numpy's kernels instead of oneDNN's: {sorted(own - ran)}"


def _fusions_fired(compiled, fused: dict, backend: str) -> list[str]:
    nodes: dict[str, list] = {}
    for node in compiled.graph.nodes:
        nodes.setdefault(node.name.split("/")[0], []).append(node)
    missing = []
    for case, wanted in fused.items():
        for want in wanted:
            op, attr = want[:2]
            if len(want) > 2 and want[2] != backend:
                continue
            if not any(n.op == op and (not attr or attr in n.attrs) for n in nodes.get(case, ())):
                missing.append(f"{case}: no {op}" + (f" with {attr}" if attr else ""))
    return missing


@pytest.mark.parametrize("target", FUSION_TARGETS)
def test_every_fused_epilogue_keeps_nan_and_infinities(fusion_batch, device, target):
    batch, fused = fusion_batch
    compiled, got = run(batch, target, device)
    backend = resolve_target(target).backend
    missing = _fusions_fired(compiled, fused, backend)
    assert not missing, "fusions that did not fire:\n" + "\n".join(missing)
    seen = backends_by_case(compiled)
    if backend == "dnnl":
        on_numpy = sorted(c for c, b in seen.items() if "dnnl" not in b
                          and c not in special_fusions.NUMPY_ONLY)
        assert not on_numpy, f"fusion cases oneDNN ran none of: {on_numpy}"
    modes = {n.meta["tiling"].get("mode") or n.meta["tiling"].get("impl", "")
             for n in compiled.graph.nodes if n.name.startswith("winograd_relu/")
             and isinstance(n.meta.get("tiling"), dict)}
    assert any("winograd" in str(m) for m in modes), modes
    bad = failures(batch, got, seen)
    assert not bad, f"{len(bad)} outputs differ from the reference:\n" + "\n".join(bad)


@pytest.mark.parametrize("batch_size", [4, 64])
@pytest.mark.parametrize("target", FUSION_TARGETS)
def test_mlp_gives_nan_for_a_nan_row_as_onnxruntime(device, target, batch_size):
    import onnxruntime as ort

    path = f"{SAMPLES}/mlp.onnx"
    x = np.random.default_rng(1).random((batch_size, 784), dtype=np.float32)
    x[1, 300] = np.nan
    x[2, 10] = np.inf
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})
    compiled = aircc.compile(onnx.load(path), mode="static", target=target,
                             input_shapes={"input": [batch_size, 784]})
    with aircc.load(compiled, device=device) as model:
        got = list(model.run({"input": x}).values())
    assert np.isnan(want[0][1]).all() and np.isfinite(np.delete(want[0], [1, 2], 0)).all()
    for g, w in zip(got, want):
        assert special_values.mismatch(g, w, rtol=1e-4, atol=1e-6) == ""


@pytest.mark.parametrize("target", FUSION_TARGETS)
def test_squeezenet_gives_nan_for_one_nan_pixel_as_onnxruntime(device, target):
    """onnx's light SqueezeNet: the NaN goes through Conv + Relu, MaxPool, Concat and the
    global pool to every class, as in onnxruntime (not a uniform 0.001)."""
    import onnxruntime as ort

    path = light_path("squeezenet")
    model = onnx.load(path)
    weights = {t.name for t in model.graph.initializer}
    x_info = next(i for i in model.graph.input if i.name not in weights)
    shape = [d.dim_value for d in x_info.type.tensor_type.shape.dim]
    x = np.random.default_rng(2).random(shape, dtype=np.float32)
    x[0, 1, 100, 100] = np.nan
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {x_info.name: x})
    compiled = aircc.compile(model, mode="static", target=target)
    with aircc.load(compiled, device=device) as loaded:
        got = list(loaded.run({x_info.name: x}).values())
    assert np.isnan(want[0]).all()
    assert special_values.mismatch(got[0], want[0]) == ""

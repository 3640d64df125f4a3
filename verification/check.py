"""``aircc.verify``: compile a model in each mode, run it and the reference on the same
inputs, compare every output, and on a mismatch find the first diverging node."""
from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from aircc.compiler.assemble import CompiledModel
from aircc.compiler.frontend.onnx_import import load_onnx
from aircc.errors import CompileOptionError, InputError
from aircc.ops import resolve_target

from .bisect import Subject, bisect as find_divergence
from .compare import ValueCheck, compare_values
from .inputs import make_feeds, model_inputs
from .kernels import OnnxGraph
from .reference import Reference, choose_reference
from .report import FAIL, NOT_APPLICABLE, PASS, ModeResult, VerifyReport

MODES = ("static", "dynamic")


def verify(model: str | os.PathLike | bytes | onnx.ModelProto, feeds: Mapping[str, Any] | None = None,
           *, input_shapes: Mapping[str, Sequence[int]] | None = None,
           modes: Sequence[str] = MODES, target: str | None = None, rtol: float | None = None,
           atol: float | None = None, bisect: bool = True, seed: int = 0,
           compiled: CompiledModel | None = None) -> VerifyReport:
    """Compile ``model`` in each of ``modes``, run it on ``feeds`` (the inputs not given are
    generated from ``seed``, symbolic dims sized by ``input_shapes``: see
    :mod:`aircc.verification.inputs`) and compare each output with the reference's
    (onnxruntime, else onnx's ReferenceEvaluator).  Floats agree within ``rtol`` /
    ``atol`` (default per dtype: float32 1e-3 / 1e-4, float16 1e-2 / 1e-3, bfloat16
    2e-2 / 1e-2), other types exactly.  A failing mode with ``bisect`` names its first
    diverging node.  ``compiled``: ``model`` already compiled (its mode is the one
    checked, as compiled).  A model that cannot be static reports static as not
    applicable; a compile or run error raises as it would anywhere in aircc."""
    for m in modes:
        if m not in MODES:
            raise CompileOptionError(f"verify: mode must be one of {', '.join(MODES)}, got {m!r}")
    if compiled is not None:
        modes = (compiled.report.mode,)
    proto = load_onnx(model)
    target_name = resolve_target(target).name
    specs = model_inputs(proto)
    fed, infos = make_feeds(specs, dict(feeds or {}), seed,
                            {k: list(v) for k, v in (input_shapes or {}).items()})
    reference = choose_reference(proto)
    graph = OnnxGraph(proto)
    results, want = [], None
    for mode in dict.fromkeys(modes):
        result, want = _check_mode(proto, graph, mode, fed, target, reference, rtol, atol,
                                   bisect, compiled, want, len(set(modes)) > 1)
        results.append(result)
    return VerifyReport(_model_label(model, proto), reference.description, target_name,
                        infos, seed, results)


def _check_mode(proto: onnx.ModelProto, graph: OnnxGraph, mode: str, feeds: dict,
                target: str | None, reference: Reference, rtol: float | None,
                atol: float | None, bisect: bool, compiled: CompiledModel | None,
                want: dict | None, others: bool) -> tuple[ModeResult, dict | None]:
    """One mode's result (and the reference's outputs, computed once for every mode); a
    static compile the model does not allow is ``not applicable`` when ``others`` (modes)
    are verified too, else the compiler's error."""
    static = mode == "static"
    shapes = {k: list(v.shape) for k, v in feeds.items() if isinstance(v, np.ndarray)}

    def run(m: onnx.ModelProto, given: CompiledModel | None = None) -> tuple[CompiledModel, dict]:
        import aircc

        c = given or aircc.compile(m, mode=mode, input_shapes=shapes if static else None,
                                   target=target)
        with aircc.load(c) as loaded:
            return c, loaded.run(feeds)

    t0 = time.perf_counter()
    try:
        import aircc

        c = compiled or aircc.compile(proto, mode=mode, input_shapes=shapes if static else None,
                                      target=target)
    except CompileOptionError as e:
        if not (static and others):
            raise
        return ModeResult(mode, NOT_APPLICABLE, reason=e.message), want
    t1 = time.perf_counter()
    _, got = run(proto, c)
    t2 = time.perf_counter()
    if want is None:
        want = run_reference(reference, proto, feeds)
    checks = [_check_output(name, got, want, rtol, atol) for name in graph.outputs]
    status = PASS if all(check.passed for check in checks) else FAIL
    found = None
    if status == FAIL and bisect:
        subject = Subject(proto, graph, feeds, reference, static, rtol, atol)
        found = find_divergence(subject, run, c)
    return ModeResult(mode, status, checks, bisection=found, compile_seconds=t1 - t0,
                      run_seconds=t2 - t1), want


def run_reference(reference: Reference, model: onnx.ModelProto, feeds: dict) -> dict:
    """The reference's outputs; InputError when it cannot run on these inputs."""
    try:
        return reference.run(model, feeds)
    except Exception as e:  # onnxruntime's and the evaluator's errors share no base
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise InputError(f"the reference ({reference.description.split(' (')[0]}) cannot run "
                         f"the model on these inputs: {first[:300]}") from e


def _check_output(name: str, got: dict, want: dict, rtol: float | None,
                  atol: float | None) -> ValueCheck:
    if name not in got:
        check = compare_values(name, want[name], want[name], rtol, atol)
        return ValueCheck(check.name, check.dtype, check.shape, check.tolerance,
                          problem="aircc gives no such output")
    return compare_values(name, got[name], want[name], rtol, atol)


def _model_label(model: Any, proto: onnx.ModelProto) -> str:
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    return proto.graph.name or "model"

"""Finding the first node whose output diverges, as polygraphy's ``--onnx-outputs mark
all`` does: every value of the ONNX graph made an output, run through aircc and the
reference, compared in the graph's (topological) order.  The first node with an output
outside the tolerance is the culprit; its inputs, made by earlier nodes, agree.

Exposing every value stops the compiler fusing across them, so a fault that lives only
in a fused kernel does not show that way; then the values the compiled model's kernels
write anyway (its fusions kept) are exposed instead, and the first kernel whose output
diverges is named with the ONNX nodes it runs.  One compile with every value exposed
costs about what one compile of the model does (each value adds a device-to-host copy),
so the search exposes everything at once rather than halving the graph.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper

from aircc.compiler.assemble import CompiledModel
from aircc.errors import AirccError

from .compare import ValueCheck, compare_values
from .kernels import Kernel, OnnxGraph, kernel_running, kernels
from .reference import Reference
from .report import FAILED, FOUND, KERNEL_OUTPUTS, NOT_FOUND, Bisection, Culprit, NodeValue

#: Compiles an ONNX model as the mode being verified and runs it on the verification's
#: feeds: (the compiled model, its outputs by name).
RunAircc = Callable[[onnx.ModelProto], tuple[CompiledModel, dict[str, Any]]]


@dataclass(frozen=True)
class Subject:
    """What a bisection works on: the model, its feeds, the reference, the tolerances."""

    model: onnx.ModelProto
    graph: OnnxGraph
    feeds: dict[str, Any]
    reference: Reference
    static: bool
    rtol: float | None
    atol: float | None


def bisect(subject: Subject, run: RunAircc, compiled: CompiledModel) -> Bisection:
    """The first diverging node of ``subject``'s model (``compiled``: the model as the
    failing mode compiled it, whose fusions name the kernel a node runs in)."""
    t0 = time.perf_counter()
    g = subject.graph
    candidates = [o for n in g.nodes for o in n.outputs if o and o not in g.outputs]
    try:
        want = subject.reference.run(exposed(subject.model, candidates, {}), subject.feeds)
    except Exception as e:  # the reference's own errors
        return Bisection(FAILED, note=f"the reference cannot run the model with every value "
                                      f"exposed: {type(e).__name__}: {e}")
    keep = [v for v in candidates if _exposable(want.get(v), subject.static)]
    types = declared_types(subject.model, keep, want)
    try:
        exposed_compiled, got = run(exposed(subject.model, keep, types))
    except AirccError as e:
        return Bisection(FAILED, note=f"aircc cannot compile or run the model with every value "
                                      f"exposed: {e.message}", seconds=time.perf_counter() - t0)
    found = _first_node(subject, got, want)
    compared = len([v for v in [*keep, *g.outputs] if v in got and v in want])
    compiled_kernels = kernels(compiled, g)
    if found is not None:
        node, outs, checks = found
        ran = kernel_running(node, kernels(exposed_compiled, g))
        fused = kernel_running(node, compiled_kernels)
        culprit = _culprit(subject, node, ran, outs, checks, want)
        if fused is not None and len(fused.onnx_nodes) > 1:
            culprit = _with_fusion(culprit, fused)
        return Bisection(FOUND, culprit, compared, seconds=time.perf_counter() - t0)
    written = [w for k in compiled_kernels for w in k.writes if w in keep]
    try:
        fused_compiled, got = run(exposed(subject.model, list(dict.fromkeys(written)), types))
    except AirccError as e:
        return Bisection(NOT_FOUND, compared=compared, seconds=time.perf_counter() - t0,
                         note=f"no node diverges with every value exposed, and aircc cannot "
                              f"compile the model with its kernels' outputs exposed: {e.message}")
    culprit = _first_kernel(subject, compiled_kernels, kernels(fused_compiled, g), got, want)
    compared = len([w for w in {*written, *g.outputs} if w in got and w in want])
    seconds = time.perf_counter() - t0
    if culprit is None:
        return Bisection(NOT_FOUND, compared=compared, seconds=seconds,
                         note="no node diverges with every value exposed, nor any kernel with "
                              "its kernels' outputs exposed: the divergence comes and goes with "
                              "what is exposed (a fusion that depends on it, or an "
                              "order-dependent result)")
    return Bisection(FOUND, culprit, compared, KERNEL_OUTPUTS, seconds,
                     note="no single ONNX node diverges with every value exposed (which stops "
                          "fusions): the fault lives in this fused kernel")


def exposed(model: onnx.ModelProto, names: list[str],
            types: dict[str, onnx.TypeProto]) -> onnx.ModelProto:
    """``model`` with ``names`` added to its outputs (typed as ``types`` says, else untyped:
    the reference needs no type)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    present = {o.name for o in out.graph.output}
    for name in names:
        if name in present:
            continue
        vi = onnx.ValueInfoProto(name=name)
        if name in types:
            vi.type.CopyFrom(types[name])
        out.graph.output.append(vi)
    return out


def declared_types(model: onnx.ModelProto, names: list[str],
                   values: dict[str, Any]) -> dict[str, onnx.TypeProto]:
    """Types for exposed values (aircc wants every output typed): onnx's shape inference
    where it agrees with the reference's dtype, else the reference's dtype and rank."""
    try:
        inferred = {v.name: v.type for v in
                    onnx.shape_inference.infer_shapes(model).graph.value_info}
    except Exception:  # a model onnx's inference gives up on: every type from the values
        inferred = {}
    out = {}
    for name in names:
        value, t = values[name], inferred.get(name)
        if isinstance(value, list):
            elem = helper.np_dtype_to_tensor_dtype(value[0].dtype) if value else None
            if t is not None and t.HasField("sequence_type"):
                out[name] = t
            elif elem is not None:
                out[name] = helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, None))
            continue
        elem = helper.np_dtype_to_tensor_dtype(value.dtype)
        if (t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type == elem
                and t.tensor_type.HasField("shape")
                and len(t.tensor_type.shape.dim) == value.ndim):
            out[name] = t
        else:
            out[name] = helper.make_tensor_type_proto(elem, [None] * value.ndim)
    return out


def _exposable(value: Any, static: bool) -> bool:
    """A value aircc can give as an output: a tensor (a static model: of numbers), a
    sequence of tensors in dynamic mode."""
    if isinstance(value, np.ndarray):
        return not (static and value.dtype == object)
    return (not static and isinstance(value, list) and bool(value)
            and all(isinstance(v, np.ndarray) for v in value))


def _first_node(subject: Subject, got: dict, want: dict):
    """(node, its output checks, every check so far) of the first ONNX node with an output
    outside the tolerance; None: none."""
    checks: dict[str, ValueCheck] = {}
    for node in subject.graph.nodes:
        outs = [compare_values(o, got[o], want[o], subject.rtol, subject.atol)
                for o in node.outputs if o and o in got and o in want]
        checks.update((c.name, c) for c in outs)
        if any(not c.passed for c in outs):
            return node.name, outs, checks
    return None


def _first_kernel(subject: Subject, compiled: list[Kernel], ran: list[Kernel], got: dict,
                  want: dict) -> Culprit | None:
    """The first kernel of the compiled model with an output outside the tolerance."""
    checks: dict[str, ValueCheck] = {}
    for k in compiled:
        outs = [compare_values(w, got[w], want[w], subject.rtol, subject.atol)
                for w in k.writes if w in got and w in want]
        checks.update((c.name, c) for c in outs)
        if any(not c.passed for c in outs):
            same = next((r for r in ran if r.name == k.name), k)
            return Culprit(k.name, k.op, k.domain, same.name, same.backend, same.impl,
                           _inputs(subject, list(k.reads), checks, want), outs,
                           fused_into=k.name, fused_nodes=list(k.onnx_nodes))
    return None


def _culprit(subject: Subject, node: str, ran: Kernel | None, outs: list[ValueCheck],
             checks: dict[str, ValueCheck], want: dict) -> Culprit:
    n = subject.graph.by_name[node]
    return Culprit(n.name, n.op, n.domain, ran.name if ran else "", ran.backend if ran else "",
                   ran.impl if ran else None, _inputs(subject, [i for i in n.inputs if i],
                                                      checks, want), outs)


def _with_fusion(culprit: Culprit, fused: Kernel) -> Culprit:
    return replace(culprit, fused_into=fused.name, fused_nodes=list(fused.onnx_nodes))


def _inputs(subject: Subject, names: list[str], checks: dict[str, ValueCheck],
            want: dict) -> list[NodeValue]:
    """The culprit's inputs: type, where each comes from, whether aircc's agrees."""
    weights = {t.name: t for t in subject.model.graph.initializer}
    out = []
    for name in dict.fromkeys(names):
        value = want.get(name, subject.feeds.get(name))
        if name in weights:
            t = weights[name]
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).name
            shape: list[int] | None = list(t.dims)
        elif isinstance(value, np.ndarray):
            dtype, shape = value.dtype.name, list(value.shape)
        else:
            dtype, shape = ("sequence" if isinstance(value, list) else "?"), None
        check = checks.get(name)
        out.append(NodeValue(name, dtype, shape, subject.graph.source(name),
                             None if check is None else check.passed))
    return out

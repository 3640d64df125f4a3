"""Shape and type inference through If, Loop and Scan bodies.

Each body is a region whose inputs are typed from the op's operands (a
Loop body gets the iteration number, the condition and the loop-carried
values; a Scan body the states and one slice of each scan input), then
inferred like any graph, with the enclosing scope visible for captured
values.  A loop-carried value whose type changes between iterations is
widened (its differing dims become symbols) and the body inferred again.

An If whose condition is known at compile time takes its types from the branch that
runs; the other branch is dead (the next ``fold-constants`` inlines the live one) and
may not even type with these shapes, as when an exporter writes "squeeze this dim if
it is 1" as an If on a shape.  When the condition is only known at run time and one
branch cannot type with the shapes given, that branch can never run without an error:
the If takes the other branch's types and records which and why
(``meta["infeasible_branch"]``, ``meta["infeasible_reason"]``): static mode lowers it to
a task that fails the run, dynamic mode fails at InferShape if it is taken, as
onnxruntime does.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from aircc.errors import ShapeInferenceError

from ..ir.graph import Graph, Node, TensorType


def region(node: Node, attribute: str) -> Graph:
    for r in node.regions:
        if r.meta.get("attribute") == attribute:
            return r
    raise ShapeInferenceError(f"node '{node.name}' ({node.op}) has no '{attribute}' body")


def merge_types(a: TensorType | None, b: TensorType | None, hint: str) -> TensorType | None:
    """The most precise type both ``a`` and ``b`` fit (differing dims become symbols)."""
    if a is None or b is None:
        return a or b
    if a.dtype == "optional:" + b.dtype or b.dtype == "optional:" + a.dtype:
        return TensorType(max(a.dtype, b.dtype, key=len), None)   # an optional and its value
    if a.dtype != b.dtype:
        raise ShapeInferenceError(f"{hint}: types {a.dtype} and {b.dtype} disagree")
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorType(a.dtype, None)
    dims = tuple(x if x == y else f"{hint}_d{k}" for k, (x, y) in enumerate(zip(a.shape, b.shape)))
    return TensorType(a.dtype, dims)


def _infer_body(body: Graph, input_types: list[TensorType | None], scope: dict, infer) -> list:
    for name, t in zip(body.inputs, input_types):
        if t is not None:
            body.types[name] = t
    infer(body, scope)
    return [body.types.get(o) or scope.get(o) for o in body.outputs]


def _type_rest_unknown(body: Graph) -> None:
    """After a branch failed to type: every value it has not typed gets an unknown rank
    (and its first typed input's dtype), so the graph stays valid; nothing reads them."""
    for node in body.walk():
        guess = next((body.types[i] for i in node.inputs if i in body.types), None)
        for o in node.outputs:
            if o and o not in body.types:
                body.types[o] = TensorType(guess.dtype if guess else "float32", None)
    for r in (r for n in body.nodes for r in n.regions):
        _type_rest_unknown(r)


def taken_branch(node: Node, values: Mapping) -> str | None:
    """The branch an If runs when its condition is known at compile time, else None."""
    cond = values.get(node.inputs[0]) if node.inputs else None
    if cond is None:
        return None
    return "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"


def infer_if(graph: Graph, node: Node, scope: dict, infer, values: Mapping) -> list[TensorType]:
    taken = taken_branch(node, values)
    node.meta.pop("infeasible_branch", None)
    node.meta.pop("infeasible_reason", None)
    types: dict[str, list] = {}
    failed: dict[str, ShapeInferenceError] = {}
    for attr in ("then_branch", "else_branch"):
        body = region(node, attr)
        try:
            types[attr] = _infer_body(body, [], scope, infer)
        except ShapeInferenceError as e:
            if attr == taken or (taken is None and failed):
                raise
            failed[attr] = e
            _type_rest_unknown(body)
    if taken is None and failed:
        (attr, e), = failed.items()
        node.meta["infeasible_branch"] = attr
        node.meta["infeasible_reason"] = (f"node '{node.name}' (If): its {attr.replace('_', ' ')} "
                                          f"cannot run with the shapes compiled for ({e.message})")
    then_t, else_t = types.get("then_branch"), types.get("else_branch")
    live = [t for t in (types.get(taken) if taken else None, then_t, else_t) if t is not None]
    if len(live[0]) != len(node.outputs) or (then_t and else_t and len(then_t) != len(else_t)):
        raise ShapeInferenceError(f"node '{node.name}' (If): branches give "
                                  f"{len(then_t or ())} and {len(else_t or ())} outputs "
                                  f"for {len(node.outputs)}")
    if taken or failed:
        return live[0]
    return [merge_types(a, b, f"{node.name}_{k}") for k, (a, b) in enumerate(zip(then_t, else_t))]


def loop_trip_count(graph: Graph, node: Node) -> int | None:
    """Iterations known at compile time: a constant M and a condition that stays true."""
    body = region(node, "body")
    m = node.inputs[0] if node.inputs else ""
    if not m or m not in graph.constants:
        return None
    cond = node.inputs[1] if len(node.inputs) > 1 else ""
    if cond and not (cond in graph.constants and bool(graph.constants[cond])):
        return None
    cond_out = body.outputs[0]
    stays_true = (cond_out in body.constants and bool(body.constants[cond_out])) or \
        (len(body.inputs) > 1 and cond_out == body.inputs[1])
    return int(graph.constants[m]) if stays_true or not cond else None


def infer_loop(graph: Graph, node: Node, scope: dict, infer, values: Mapping) -> list[TensorType]:
    body = region(node, "body")
    carried = [scope.get(i) for i in node.inputs[2:]]
    n_carried = len(carried)
    if len(body.inputs) != 2 + n_carried:
        raise ShapeInferenceError(f"node '{node.name}' (Loop): body has {len(body.inputs)} inputs "
                                  f"for 2 + {n_carried} carried values")
    head = [TensorType("int64", ()), TensorType("bool", ())]
    for _ in range(3):
        outs = _infer_body(body, head + carried, scope, infer)
        widened = [merge_types(c, o, f"{node.name}_c{k}") for k, (c, o) in
                   enumerate(zip(carried, outs[1:1 + n_carried]))]
        if widened == carried:
            break
        carried = widened
    trips = loop_trip_count(graph, node)
    n_iter = trips if trips is not None else f"{node.name}_iterations"
    scans = [TensorType(t.dtype, None if t.shape is None else (n_iter, *t.shape))
             for t in outs[1 + n_carried:]]
    return carried + scans


def scan_lengths(node: Node, scope: dict) -> tuple[int, int]:
    """(number of states, number of scan inputs) of a Scan (opset 9+)."""
    m = int(node.attrs["num_scan_inputs"])
    return len(node.inputs) - m, m


def infer_scan(graph: Graph, node: Node, scope: dict, infer, values: Mapping) -> list[TensorType]:
    body = region(node, "body")
    if node.version < 9:
        return _infer_scan8(node, body, scope, infer)
    n_state, m = scan_lengths(node, scope)
    axes = node.attrs.get("scan_input_axes") or [0] * m
    scan_in = [scope.get(i) for i in node.inputs[n_state:]]
    length = None
    slices = []
    for t, axis in zip(scan_in, axes):
        if t is None or t.shape is None:
            slices.append(None)
            continue
        a = axis % len(t.shape)
        length = t.shape[a] if length is None else length
        slices.append(TensorType(t.dtype, t.shape[:a] + t.shape[a + 1:]))
    states = [scope.get(i) for i in node.inputs[:n_state]]
    outs = _infer_body(body, states + slices, scope, infer)
    out_axes = node.attrs.get("scan_output_axes") or [0] * (len(outs) - n_state)
    result = [merge_types(s, o, f"{node.name}_s{k}") for k, (s, o) in enumerate(zip(states, outs))]
    for t, axis in zip(outs[n_state:], out_axes):
        if t is None or t.shape is None or length is None:
            result.append(TensorType(t.dtype if t else "float32", None))
            continue
        a = axis % (len(t.shape) + 1)
        result.append(TensorType(t.dtype, t.shape[:a] + (length,) + t.shape[a:]))
    return result


def _infer_scan8(node: Node, body: Graph, scope: dict, infer) -> list[TensorType]:
    """Scan-8: every operand has a batch dim first; scan inputs scan along dim 1."""
    inputs = node.inputs[1:]            # input 0 is the optional sequence_lens
    n_body_in = len(body.inputs)
    m = int(node.attrs["num_scan_inputs"])
    n_state = n_body_in - m
    types = [scope.get(i) for i in inputs]
    batch = types[0].shape[0] if types and types[0] and types[0].shape else None
    length = next((t.shape[1] for t in types[n_state:] if t is not None and t.shape), None)
    body_in = [None if t is None or t.shape is None else
               TensorType(t.dtype, t.shape[1:] if k < n_state else t.shape[2:])
               for k, t in enumerate(types)]
    outs = _infer_body(body, body_in, scope, infer)
    result = []
    for k, t in enumerate(outs):
        if t is None or t.shape is None:
            result.append(TensorType(t.dtype if t else "float32", None))
        elif k < n_state:
            result.append(TensorType(t.dtype, (batch, *t.shape)))
        else:
            result.append(TensorType(t.dtype, (batch, length, *t.shape)))
    return result


INFER = {"If": infer_if, "Loop": infer_loop, "Scan": infer_scan}

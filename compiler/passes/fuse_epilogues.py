"""Pass ``fuse-epilogues``: Conv/MatMul + (scale) + Add + Relu in one kernel launch.

A MatMul whose only reader multiplies or divides it by a constant scalar
takes the factor as ``fused_scale`` (attention's scores / sqrt(d)).  A Conv
or MatMul whose only reader is then an Add (or a two-input Sum) takes the
other operand as an extra input and adds it as it writes its output
(``fused_add``): the residual of a ResNet block, the bias of a MatMul,
attention's mask.  A Relu that then reads it alone becomes ``fused_relu`` (of a
BatchNormalization or InstanceNormalization too).
The reader nodes go away.

Where the target's kernel for the Conv or MatMul runs other activations as part of its
epilogue (``fused_activation`` among its ``KernelImpl.epilogues``: the oneDNN backend's,
as post-ops), a Clip, HardSwish, Sigmoid, LeakyRelu, Tanh, HardSigmoid, Elu or Gelu in
Relu's place becomes ``fused_activation = {"op": ..., "attrs": {...}}`` (a Clip's bounds
as opset-6 attributes ``min`` / ``max``).
"""
from __future__ import annotations

from aircc.formats.kinds import Impl
from aircc.ops.epilogues import ACTIVATIONS

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass

FUSABLE = ("Conv", "MatMul")
RELU_ONLY = ("BatchNormalization", "InstanceNormalization")     # fuse a following Relu, no Add


def _activation(graph: Graph, node: Node, value: str) -> dict | None:
    """``fused_activation`` for ``node``, the reader of ``value``, if it is an activation
    with constant parameters of ``value``'s type."""
    if node.domain or node.impl is Impl.FALLBACK or node.inputs[:1] != [value]:
        return None
    if graph.types.get(node.outputs[0]) != graph.types.get(value):
        return None
    if node.op == "Clip":
        bounds = {}
        for key, i, default in (("min", 1, float("-inf")), ("max", 2, float("inf"))):
            if node.version < 11:
                bounds[key] = float(node.attrs.get(key, default))
            elif i < len(node.inputs) and node.inputs[i]:
                c = graph.constants.get(node.inputs[i])
                if c is None or c.size != 1:
                    return None
                bounds[key] = float(c.reshape(-1)[0])
            else:
                bounds[key] = default
        return {"op": "Clip", "attrs": bounds}
    if node.op not in ACTIVATIONS or node.op == "Clip" or len(node.inputs) != 1:
        return None
    return {"op": node.op, "attrs": {k: node.attrs.get(k, d) for k, d in ACTIVATIONS[node.op].items()}}


def _runs_activations(ctx: CompileContext, node: Node) -> bool:
    return "fused_activation" in ctx.backend.impl(node.op, node.version, node.domain,
                                                  node.name).epilogues


def _add_operand(graph: Graph, node: Node, add: Node, value: str) -> str | None:
    """The operand of ``add`` that is not ``value``, if adding it keeps ``value``'s shape."""
    if add.op == "Sum" and len(add.inputs) != 2:
        return None
    if add.op not in ("Add", "Sum") or add.domain or add.inputs.count(value) != 1:
        return None
    other = add.inputs[1] if add.inputs[0] == value else add.inputs[0]
    t_out, t_val, t_other = graph.types.get(add.outputs[0]), graph.types.get(value), graph.types.get(other)
    if t_out is None or t_val is None or t_other is None or t_out != t_val:
        return None            # the Add must not broadcast the result to a bigger shape
    if t_other.dtype != t_val.dtype or t_other.shape is None:
        return None
    return other


def _scale_factor(graph: Graph, node: Node, scale: Node, value: str) -> float | None:
    """The factor ``scale`` (a Mul or Div by a constant scalar of the same dtype) applies."""
    if scale.op not in ("Mul", "Div") or scale.domain or len(scale.inputs) != 2 \
            or scale.inputs.count(value) != 1 or scale.impl is Impl.FALLBACK:
        return None
    other = scale.inputs[1] if scale.inputs[0] == value else scale.inputs[0]
    c = graph.constants.get(other)
    t_out, t_val = graph.types.get(scale.outputs[0]), graph.types.get(value)
    if c is None or c.size != 1 or t_out is None or t_out != t_val or str(c.dtype) != t_val.dtype:
        return None
    if scale.op == "Div" and scale.inputs[0] != value:
        return None                      # c / y is not a scale
    f = float(c.reshape(-1)[0])
    if scale.op == "Div":
        return None if f == 0 else 1.0 / f
    return f


def _absorb(graph: Graph, node: Node, reader: Node, removed: set[str]) -> str:
    """``node`` takes over ``reader``'s output (the reader goes away); that output's name."""
    graph.types.pop(node.outputs[0], None)
    node.outputs = [reader.outputs[0]]
    removed.add(reader.name)
    return node.outputs[0]


@compile_pass("fuse-epilogues", stats=("fused_epilogues",))
def fuse_epilogues(graph: Graph, ctx: CompileContext) -> Graph:
    users = graph.consumers()
    removed: set[str] = set()
    moved: dict[str, Node] = {}    # an Add's name -> the node that now stands in its place
    fused = 0
    for node in graph.nodes:
        if node.op not in FUSABLE + RELU_ONLY or node.domain or node.name in removed \
                or node.impl is Impl.FALLBACK:
            continue
        out = node.outputs[0]
        scale = graph.only_reader(out, users) if node.op == "MatMul" else None
        factor = _scale_factor(graph, node, scale, out) if scale is not None else None
        if factor is not None:
            node.attrs["fused_scale"] = factor
            out = _absorb(graph, node, scale, removed)
            users = graph.consumers()
            fused += 1
        add = graph.only_reader(out, users) if node.op in FUSABLE else None
        other = _add_operand(graph, node, add, out) if add is not None else None
        if other is not None:
            slot = 3 if node.op == "Conv" else 2
            node.inputs = node.inputs + [""] * (slot - len(node.inputs)) + [other]
            node.attrs["fused_add"] = 1
            out = _absorb(graph, node, add, removed)
            moved[add.name] = node       # it reads the Add's other operand: run it there
            users = graph.consumers()
            fused += 1
        relu = graph.only_reader(out, users)
        act = _activation(graph, relu, out) if relu is not None and relu.name not in removed \
            and relu.op != "Relu" and node.op in FUSABLE and _runs_activations(ctx, node) else None
        if act is not None:
            node.attrs["fused_activation"] = act
        elif relu is not None and relu.op == "Relu" and not relu.domain and relu.name not in removed:
            node.attrs["fused_relu"] = 1
        else:
            continue
        _absorb(graph, node, relu, removed)
        users = graph.consumers()
        fused += 1
    placed = {n.name for n in moved.values()}
    order = []
    for n in graph.nodes:
        if n.name in moved:
            order.append(moved[n.name])
        elif n.name not in removed and n.name not in placed:
            order.append(n)
    graph.nodes = order
    ctx.count("fused_epilogues", fused)
    return graph

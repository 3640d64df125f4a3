"""Pass ``infer-shapes``: type every value from the op registry's shape rules.

Each node's rule (``Node.definition``) sees its input types and, where an
input is a compile-time constant, its value (Reshape's shape, ConstantOfShape's
shape, ...).  A node whose use of its op the native kernels do not cover (the
rule raises ``UnsupportedVariantError``) is marked ``Impl.FALLBACK`` (``Node.impl``)
and typed by the fallback definition (onnx's shape inference).
"""
from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping

import numpy as np

from aircc.errors import ShapeInferenceError, UnsupportedOpError, UnsupportedVariantError
from aircc.formats.kinds import Impl
from aircc.ops import InferContext, OpDef, layout

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass
from .control_flow import INFER as CONTROL_FLOW


def infer_node(graph: Graph, node: Node, types: dict[str, TensorType] | None = None,
               values: Mapping[str, np.ndarray] | None = None) -> list[TensorType]:
    """Output types of one node from the types (and constant values) of its inputs;
    ``values``: the constants it may read (default: its graph's; in a body, the
    enclosing graphs' too, see :func:`scope_values`)."""
    types = graph.types if types is None else types
    values = graph.constants if values is None else values
    try:
        return _infer_with(node.definition, node, types, values)
    except UnsupportedVariantError:
        if node.impl is Impl.FALLBACK:
            raise
        node.impl = Impl.FALLBACK            # the native kernel does not cover this use
        try:
            return _infer_with(node.definition, node, types, values)
        except UnsupportedOpError:
            node.meta.pop("impl")
            raise


def scope_values(graph: Graph, outer: Mapping[str, np.ndarray] | None) -> Mapping[str, np.ndarray]:
    """The constants a node of ``graph`` may read: its own, then those of the graphs that
    enclose it (a branch's Pad may take its ``pads`` from the model's initializers)."""
    return graph.constants if not outer else ChainMap(graph.constants, outer)  # type: ignore[arg-type]


def _infer_with(definition: OpDef, node: Node, types: Mapping, values: Mapping) -> list[TensorType]:
    ctx = InferContext(types=[types.get(i) if i else None for i in node.inputs],
                       attrs=node.attrs,
                       values=[values.get(i) if i else None for i in node.inputs],
                       node=node.name, op=node.op, num_outputs=len(node.outputs))
    if definition.infer is None:
        ctx.fail("the op has no shape rule")
    out = layout.infer(definition, ctx)
    if len(out) != len(node.outputs):
        ctx.fail(f"shape rule gave {len(out)} outputs for {len(node.outputs)}")
    return out


def _infer_or_unknown_rank(graph: Graph, node: Node, scope: dict,
                           values: Mapping[str, np.ndarray]) -> list[TensorType]:
    """A node's output types; when an input's rank is unknown (an If whose branches
    differ in rank, say) and the rule cannot cope, the outputs' ranks are unknown too:
    run-time InferShape decides them."""
    try:
        return infer_node(graph, node, scope, values)
    except ShapeInferenceError:
        ins = [scope.get(i) for i in node.inputs if i]
        if not any(t is not None and t.shape is None for t in ins):
            raise
        dtype = next(t.dtype for t in ins if t is not None)
        return [TensorType(dtype, None) for _ in node.outputs]


def infer_region(graph: Graph, outer: dict[str, TensorType] | None = None,
                 outer_values: Mapping[str, np.ndarray] | None = None) -> Graph:
    """Set ``graph.types`` for every node output (nested regions included); ``outer`` and
    ``outer_values``: the types of the enclosing scopes' values a region may read, and
    the values of their constants."""
    scope = dict(outer or {})
    scope.update(graph.types)
    for name, arr in graph.constants.items():
        graph.types[name] = scope[name] = TensorType.of(arr)
    values = scope_values(graph, outer_values)

    def infer_body(body: Graph, body_scope: dict) -> Graph:
        return infer_region(body, body_scope, values)

    for node in graph.nodes:
        if node.op in CONTROL_FLOW and not node.domain:
            types = CONTROL_FLOW[node.op](graph, node, scope, infer_body, values)
        else:
            for region in node.regions:
                infer_body(region, scope)
            types = _infer_or_unknown_rank(graph, node, scope, values)
        for name, t in zip(node.outputs, types):
            if name:
                graph.types[name] = scope[name] = t
    graph.meta["typed"] = True
    return graph


@compile_pass("infer-shapes")
def infer_shapes(graph: Graph, ctx: CompileContext) -> Graph:
    """Type every value of the graph (see the module doc)."""
    return infer_region(graph)

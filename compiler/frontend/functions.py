"""Ops aircc runs as onnx defines them, by their function body: ``SequenceMap`` and
``ai.onnx.preview``'s ``FlexAttention``.

SequenceMap applies its ``body`` graph to each element of its sequences.  onnx defines
it by a context-dependent function (a Loop of SequenceAt / body / SequenceInsert),
which depends on whether each extra input is a sequence or a tensor; FlexAttention's
function (scores, its ``score_mod`` / ``prob_mod`` graphs, softmax, the product with V)
depends on its inputs' types too.  The importer puts the expansion in the node's place
(as onnx's own ``_expanded`` test models have it).
"""
from __future__ import annotations

import onnx

from aircc.errors import ModelImportError

#: (domain, op) of the ops expanded by their function.
EXPANDED = {("", "SequenceMap"), ("ai.onnx.preview", "FlexAttention")}


def _expanded(node: onnx.NodeProto) -> bool:
    domain = "" if node.domain == "ai.onnx" else node.domain
    return (domain, node.op_type) in EXPANDED


def has_expanded_ops(model: onnx.ModelProto) -> bool:
    def walk(g: onnx.GraphProto) -> bool:
        return any(_expanded(n) or
                   any(walk(a.g) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
                   for n in g.node)
    return walk(model.graph)


def expand_nodes(gp: onnx.GraphProto, opsets: dict[str, int],
                 types: dict[str, onnx.TypeProto]) -> list:
    """The nodes of ``gp`` with each op of :data:`EXPANDED` replaced by its function's nodes
    (``opsets``: the model's version of each domain)."""
    from onnx.backend.test.case.node import function_expand_helper

    out = []
    for k, node in enumerate(gp.node):
        if not _expanded(node):
            out.append(node)
            continue
        missing = [i for i in node.input if i and i not in types]
        if missing:
            raise ModelImportError(f"{node.op_type} node '{node.name or k}': the types of "
                                   f"its inputs {missing} are unknown")
        domain = "" if node.domain == "ai.onnx" else node.domain
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
        fn = onnx.FunctionProto()
        fn.ParseFromString(schema.get_context_dependent_function_with_opset_version(
            schema.since_version, node.SerializeToString(),
            [types[i].SerializeToString() for i in node.input]))
        out.extend(function_expand_helper(node, fn, f"{node.name or node.op_type}_{k}_"))
    return out


def known_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Every value's type onnx's shape inference finds (main graph and bodies)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types: dict[str, onnx.TypeProto] = {}

    def walk(g: onnx.GraphProto) -> None:
        for vi in [*g.input, *g.value_info, *g.output]:
            if vi.type.WhichOneof("value"):
                types.setdefault(vi.name, vi.type)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
    walk(inferred.graph)
    return types

"""Ops aircc runs as onnx defines them, by their function body: ``SequenceMap``.

SequenceMap applies its ``body`` graph to each element of its sequences.  onnx defines
it by a context-dependent function (a Loop of SequenceAt / body / SequenceInsert),
which depends on whether each extra input is a sequence or a tensor; the importer puts
that expansion in the node's place (as onnx's own ``_expanded`` test models have it).
"""
from __future__ import annotations

import onnx

from aircc.errors import ModelImportError

EXPANDED = ("SequenceMap",)


def has_expanded_ops(model: onnx.ModelProto) -> bool:
    def walk(g: onnx.GraphProto) -> bool:
        return any(n.op_type in EXPANDED and n.domain in ("", "ai.onnx") or
                   any(walk(a.g) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
                   for n in g.node)
    return walk(model.graph)


def expand_nodes(gp: onnx.GraphProto, version: int, types: dict[str, onnx.TypeProto]) -> list:
    """The nodes of ``gp`` with each SequenceMap replaced by its function's nodes."""
    from onnx.backend.test.case.node import function_expand_helper

    out = []
    for k, node in enumerate(gp.node):
        if node.op_type not in EXPANDED or node.domain not in ("", "ai.onnx"):
            out.append(node)
            continue
        missing = [i for i in node.input if i and i not in types]
        if missing:
            raise ModelImportError(f"{node.op_type} node '{node.name or k}': the types of "
                                   f"its inputs {missing} are unknown")
        schema = onnx.defs.get_schema(node.op_type, version, node.domain)
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

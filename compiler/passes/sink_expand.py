"""Pass ``sink-expand``: an Expand moves past the elementwise ops that read it, and goes away
where its reader broadcasts anyway.

Exporters build an attention mask the long way: ``Where(Equal(Expand(m, [B, 1, S, S]),
0), -inf, ConstantOfShape([B, 1, S, S])) + ext`` materialises S copies of a [B, 1, 1, S]
row, then runs three elementwise passes over all of them, only for the attention to
broadcast the mask over the heads anyway.  Elementwise ops commute with broadcasting:
``f(Expand(x, T), c) = Expand(f(x, c), T)`` when c broadcasts into T, and a
ConstantOfShape (or, folded, a constant of one repeated value) is an Expand of its
one value.  So each such Expand moves down past
its (only) reader, until every reader broadcasts that input itself (an
elementwise op with another operand of the shape T already, or the mask of
``aircc.Attention`` / ``aircc.SoftmaxMatMul``), where it is dropped.  Shapes are
compared as dims, symbols included (the target through :func:`shape_value`).
Counted as ``sunk_expands`` (moves) and ``dropped_expands``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from aircc.ops import InferContext, Trait

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass
from .eliminate_dead_code import eliminate_dead_code
from .shape_values import shape_value


def _elementwise(node: Node) -> bool:
    """A plain node of an op that applies elementwise with numpy broadcasting."""
    return node.is_plain(node.op) and node.definition.has(Trait.ELEMENTWISE)


def _broadcast(a: tuple, b: tuple) -> Optional[tuple]:
    """Broadcast of two dim tuples (ints or symbols), None when it is not known."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        else:
            return None
    return tuple(out[::-1])


def _expand_source(graph: Graph, value: str, producers) -> Optional[tuple[Node, str, tuple]]:
    """(the Expand or ConstantOfShape making ``value``, what it expands, the full shape) or
    None.  A ConstantOfShape's source is a new 0-d constant of its value."""
    const = graph.constants.get(value)
    if const is not None and const.size > 1 and value not in graph.outputs:
        flat = const.reshape(-1)
        if (flat == flat[0]).all():                   # a splat (a folded ConstantOfShape)
            return Node("Splat", [], [value], {"value": flat[:1]}), "", tuple(const.shape)
        return None
    node = producers.get(value)
    if node is None or node.domain or node.op not in ("Expand", "ConstantOfShape"):
        return None
    target = shape_value(graph, node.inputs[1 if node.op == "Expand" else 0], producers)
    if target is None:
        return None
    if node.op == "ConstantOfShape":
        return (node, "", tuple(target)) if _fill(node).size == 1 else None
    src = graph.types.get(node.inputs[0])
    if src is None or src.shape is None:
        return None
    full = _broadcast(tuple(src.shape), tuple(target))
    return None if full is None else (node, node.inputs[0], full)


def _fits(shape, full: tuple) -> bool:
    """A value of ``shape`` broadcast with ``full`` gives ``full``."""
    return shape is not None and _broadcast(tuple(shape), full) == full


def _fill(node: Node) -> np.ndarray:
    """A ConstantOfShape's (or a splat constant's) value, flat (float32 0 by default)."""
    fill = node.attrs.get("value")
    return np.zeros(1, np.float32) if fill is None else np.asarray(fill).reshape(-1)


def _scalar(graph: Graph, node: Node) -> str:
    """A 0-d constant of a ConstantOfShape's (or a splat constant's) value."""
    fill = _fill(node)
    name = graph.fresh_name(f"{node.name or node.outputs[0]}/value")
    graph.constants[name] = fill.reshape(())
    graph.types[name] = TensorType.of(graph.constants[name])
    return name


def _infer(graph: Graph, node: Node) -> list[TensorType]:
    definition = node.definition
    ctx = InferContext([graph.types.get(i) if i else None for i in node.inputs], node.attrs,
                       [graph.constants.get(i) if i else None for i in node.inputs],
                       node.name, node.op, len(node.outputs))
    return definition.infer(ctx)


def _broadcasts_anyway(graph: Graph, reader: Node, value: str, full: tuple) -> bool:
    """``reader`` gives the same result when ``value`` (of shape ``full``) is not expanded:
    it broadcasts that input itself, or is elementwise with another operand of shape
    ``full``."""
    slots = [k for k, v in enumerate(reader.inputs) if v == value]
    broadcast = reader.definition.broadcast_inputs
    if broadcast:
        return all(k in broadcast for k in slots)
    if not _elementwise(reader):
        return False
    others = [graph.types.get(v) for v in reader.inputs if v and v != value]
    return any(t is not None and t.shape is not None and tuple(t.shape) == full for t in others) \
        and all(t is not None and _fits(t.shape, full) for t in others)


def _drop_once(graph: Graph, users, producers) -> int:
    """Drop one Expand (or ConstantOfShape) whose every reader broadcasts anyway."""
    for node in graph.nodes:
        if node.domain or node.op not in ("Expand", "ConstantOfShape"):
            continue
        value = node.outputs[0]
        readers = users.get(value, [])
        src = _expand_source(graph, value, producers)
        if not readers or value in graph.outputs or src is None:
            continue
        if all(_broadcasts_anyway(graph, r, value, src[2]) for r in readers):
            source = src[1] or _scalar(graph, node)
            for r in readers:
                r.inputs = [source if v == value else v for v in r.inputs]
            return 1
    return 0


def _sink_once(graph: Graph, users, producers) -> int:
    """Move one Expand (or ConstantOfShape) past the elementwise op that alone reads it."""
    for node in graph.nodes:
        if not (_elementwise(node) and len(node.outputs) == 1):
            continue
        found = {}
        for k, value in enumerate(node.inputs):
            if value and graph.only_reader(value, users) is node and node.inputs.count(value) == 1:
                src = _expand_source(graph, value, producers)
                if src is not None:
                    found[k] = src
        fulls = {full for _, _, full in found.values()}
        if len(fulls) != 1:
            continue
        full = fulls.pop()
        others = [graph.types.get(v) for k, v in enumerate(node.inputs) if v and k not in found]
        if any(t is None or not _fits(t.shape, full) for t in others):
            continue
        if all(v in graph.constants for v in node.inputs if v):
            continue                      # only constants: constant folding's business
        real = [exp for exp, _, _ in found.values() if exp.op != "Splat"]
        if real:
            target = real[0].inputs[1 if real[0].op == "Expand" else 0]
        else:                             # splat constants only: their shape is static
            target = graph.fresh_name(f"{node.name}/expand_shape")
            graph.constants[target] = np.array(full, np.int64)
            graph.types[target] = TensorType.of(graph.constants[target])
        for k, (exp, source, _) in found.items():
            node.inputs[k] = source or _scalar(graph, exp)
        out = node.outputs[0]
        small = graph.fresh_name(f"{out}/unexpanded")
        node.outputs[0] = small
        (graph.types[small],) = _infer(graph, node)
        expand = Node("Expand", [small, target], [out], name=graph.fresh_name(f"{node.name}/expand"),
                      version=max(13, graph.opsets.get("", 13)))
        graph.nodes.insert(graph.nodes.index(node) + 1, expand)
        return 1
    return 0


@compile_pass("sink-expand", stats=("sunk_expands", "dropped_expands"))
def sink_expand(graph: Graph, ctx: CompileContext) -> Graph:
    moves = drops = 0
    while True:
        users, producers = graph.consumers(), graph.producers()
        d = _drop_once(graph, users, producers)
        m = 0 if d else _sink_once(graph, users, producers)
        if not m and not d:
            break
        moves, drops = moves + m, drops + d
    if moves or drops:
        eliminate_dead_code(graph, ctx)
    ctx.count("sunk_expands", moves)
    ctx.count("dropped_expands", drops)
    return graph

"""Pass ``fold-constants``: evaluate at compile time what only depends on constants.

A node folds when every input it reads is a constant (or it has none, like
Constant) and its op allows folding; its outputs become constants and the
node goes away.  ``Shape``/``Size`` of a value whose shape is fully static
fold too, whatever produced the value.  This is what turns the light models'
``ConstantOfShape`` weight builders into plain weights.
"""
from __future__ import annotations

from collections import ChainMap, deque
from collections.abc import Mapping

import numpy as np
from aircc.errors import AirccError, ShapeInferenceError
from aircc.formats.kinds import Impl

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass
from .control_flow import region, taken_branch
from .infer_shapes import infer_node, scope_values

#: Folding may not create constants larger than this (bytes).
MAX_FOLDED_BYTES = 1 << 30


def _static_shape_value(types: Mapping[str, TensorType], node: Node) -> np.ndarray | None:
    t = types.get(node.inputs[0])
    if t is None or not t.is_static:
        return None
    if node.op == "Size":
        return np.array(t.numel, dtype=np.int64)
    shape = list(t.shape)  # type: ignore[arg-type]
    rank = len(shape)
    start = node.attrs.get("start", 0)
    end = node.attrs.get("end", rank)
    start = max(0, min(rank, start + rank if start < 0 else start))
    end = max(0, min(rank, end + rank if end < 0 else end))
    return np.array(shape[start:end], dtype=np.int64)


def evaluate(graph: Graph, node: Node, out_types: list[TensorType],
             ctx: CompileContext, values: Mapping[str, np.ndarray] | None = None,
             types: Mapping[str, TensorType] | None = None) -> list[np.ndarray]:
    """Run a node's kernel (the target backend's) on its constant inputs, in host memory;
    ``values`` and ``types``: those it may read (default: its graph's)."""
    values = graph.constants if values is None else values
    types = graph.types if types is None else types
    impl = ctx.backend.impl(node.op, node.version, node.domain, node.name,
                            fallback=node.impl is Impl.FALLBACK)
    ins = [values[i] if i else None for i in node.inputs]
    outs = [np.empty(t.shape, dtype=t.dtype) for t in out_types]
    tiling = impl.tile([types.get(i) if i else None for i in node.inputs], node.attrs,
                       ctx.target)
    ws_bytes = int(tiling.get("workspace", 0))
    ws = np.empty(ws_bytes, dtype=np.uint8) if ws_bytes else None
    with np.errstate(all="ignore"):        # IEEE results, as ONNX defines them: log(0) = -inf
        impl.kernel(ins, outs, node.attrs, tiling, ws)
    return outs


def _foldable(graph: Graph, node: Node, types: Mapping, values: Mapping) -> list[TensorType] | None:
    """The output types if the node can be folded, else None."""
    if node.regions or node.has_side_effects:
        return None
    definition = node.definition
    if not definition.foldable:
        return None
    if not all(i == "" or i in values for i in node.inputs):
        return None
    out_types = infer_node(graph, node, types, values)   # every input is a constant: exact
    if any(not t.is_static or t.nbytes > MAX_FOLDED_BYTES for t in out_types):
        return None
    return out_types


def _fold(graph: Graph, node: Node, ctx: CompileContext, types: Mapping,
          values: Mapping) -> list[np.ndarray] | None:
    """The values of a node that folds, else None; a kernel that fails on the node's
    constants (an index out of range, say) is a ShapeInferenceError naming the node."""
    try:
        out_types = _foldable(graph, node, types, values)
        return None if out_types is None else evaluate(graph, node, out_types, ctx, values, types)
    except AirccError:
        raise
    except Exception as e:
        raise ShapeInferenceError(f"node '{node.name}' ({node.op}): constant folding failed: "
                                  f"{type(e).__name__}: {e}") from e


def _inline_if(graph: Graph, node: Node, scope) -> list[Node]:
    """The nodes of the branch a constant condition picks, then Identity to the If's outputs."""
    body = region(node, taken_branch(node, scope))
    for name, arr in body.constants.items():
        graph.constants[name] = arr
        graph.types[name] = TensorType.of(arr)
    for name, t in body.types.items():
        graph.types.setdefault(name, t)
    taken = {n.name for n in graph.nodes}
    nodes = []
    for n in body.nodes:
        if n.name in taken:
            n.name = graph.fresh_name(n.name)
        nodes.append(n)
    for k, (src, dst) in enumerate(zip(body.outputs, node.outputs)):
        if dst:
            nodes.append(Node("Identity", [src], [dst], name=f"{node.name}/out{k}",
                              version=node.version))
    return nodes


def _refresh_types(graph: Graph, node: Node, types: Mapping, values: Mapping) -> None:
    """Re-type a kept node from its (possibly just folded) inputs, so that a Shape
    further down sees shapes that folding made static."""
    if node.regions or node.has_side_effects or not all(
            i == "" or i in types for i in node.inputs):
        return
    try:
        types = infer_node(graph, node, types, values)
    except AirccError:
        return   # left to infer-shapes, which reports it
    for name, t in zip(node.outputs, types):
        if name:
            graph.types[name] = t


@compile_pass("fold-constants", stats=("folded_nodes",))
def fold_constants(graph: Graph, ctx: CompileContext) -> Graph:
    """Replace constant-only nodes by the constants they compute."""
    return _fold_region(graph, ctx, None, None)


def _fold_region(graph: Graph, ctx: CompileContext, outer, outer_types) -> Graph:
    """Fold ``graph``'s nodes (and its bodies'); ``outer`` and ``outer_types``: the
    enclosing graphs' constants and types, which a body reads (a Shape of an outer value
    folds in a branch).  The nodes of an If that a known condition inlines are folded in
    turn, so a chain of them (an exporter's "squeeze if this dim is 1", twice) goes in
    one pass."""
    kept: list[Node] = []
    folded = 0
    scope = scope_values(graph, outer)
    for name, arr in graph.constants.items():
        graph.types[name] = TensorType.of(arr)
    types = graph.types if not outer_types else ChainMap(graph.types, outer_types)
    pending = deque(graph.nodes)
    while pending:
        node = pending.popleft()
        for region in node.regions:
            _fold_region(region, ctx, scope, types)
        if node.op == "If" and not node.domain and node.inputs[0] in scope:
            pending.extendleft(reversed(_inline_if(graph, node, scope)))
            folded += 1
            continue
        values = None
        if node.op in ("Shape", "Size"):
            v = _static_shape_value(types, node)
            values = None if v is None else [v]
        if values is None:
            values = _fold(graph, node, ctx, types, scope)
        if values is None:
            kept.append(node)
            _refresh_types(graph, node, types, scope)
            continue
        for name, v in zip(node.outputs, values):
            if name:
                graph.constants[name] = v
                graph.types[name] = TensorType.of(v)
        folded += 1
    graph.nodes = kept
    ctx.count("folded_nodes", folded)
    return graph

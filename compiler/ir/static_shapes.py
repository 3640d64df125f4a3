"""Why a graph's shapes are not all known at compile time, in the user's terms.

Static mode plans every buffer at compile time, so every value needs a static
shape.  When one has none, the fix depends on where the unknown dim comes from: an
input whose shape was not fixed (``--input-shape``), or an op whose output shape
follows values only known at run time (an If whose branches make different shapes
and whose condition depends on an input's value, a NonZero, a Reshape to a computed
shape), which static mode cannot plan at all.  :func:`dynamic_shape_origin` finds
the first such place, in node order, and says which.
"""
from __future__ import annotations

from .graph import Graph, Node, TensorType
from .user_names import user_value


def _shape(t: TensorType | None) -> str:
    if t is None or t.shape is None:
        return "[*]"
    return str(list(t.shape))


def _static(graph: Graph, name: str, scope: dict[str, TensorType]) -> bool:
    t = scope.get(name)
    return not name or name in graph.constants or (t is not None and t.is_static)


def _inputs_behind(graph: Graph, value: str) -> list[str]:
    """The graph inputs whose values ``value`` is computed from."""
    producers, seen, found, todo = graph.producers(), set(), [], [value]
    while todo:
        v = todo.pop()
        if v in seen or not v:
            continue
        seen.add(v)
        if v in graph.inputs:
            found.append(v)
        node = producers.get(v)
        if node is not None:
            todo.extend(node.inputs)
            for r in node.regions:          # values a body reads from outside
                todo.extend(i for n in r.walk() for i in n.inputs)
    return sorted(found)


def _explain(graph: Graph, node: Node, out: str, scope: dict[str, TensorType]) -> str:
    what = f"{user_value(graph, out)} has shape {_shape(scope.get(out))}"
    behind = _inputs_behind(graph, node.inputs[0] if node.op == "If" and node.inputs else out)
    runtime = f" (it depends on {', '.join(repr(i) for i in behind)})" if behind else ""
    if node.op == "If" and not node.domain:
        branches = {r.meta.get("attribute"): r for r in node.regions}
        k = node.outputs.index(out)
        made = [f"{a.split('_')[0]}: {_shape(r.types.get(r.outputs[k]))}" for a, r in branches.items()
                if k < len(r.outputs)]
        return (f"{what}: the branches of If node '{node.name}' make different shapes "
                f"({', '.join(made)}) and its condition '{node.inputs[0]}' is only known at run "
                f"time{runtime}")
    if node.on_fallback:
        return (f"{what}: node '{node.name}' ({node.op}) runs on the fallback kernel (onnx's "
                f"reference implementation), whose shape inference gives it none (its size may "
                f"follow values only known at run time{runtime})")
    return (f"{what}: node '{node.name}' ({node.op}) makes it from inputs of static shapes, so "
            f"its size follows values only known at run time{runtime}")


def dynamic_shape_origin(graph: Graph) -> str | None:
    """Where the first value without a static shape comes from (see the module doc), or
    None when every value of the graph and its bodies has one."""
    loose = [i for i in graph.inputs if not _static(graph, i, graph.types)]
    if loose:
        i = loose[0]
        return f"input '{i}' has shape {_shape(graph.types.get(i))}; fix it with --input-shape"
    return _origin_in(graph, dict(graph.types))


def _origin_in(graph: Graph, scope: dict[str, TensorType]) -> str | None:
    for node in graph.nodes:
        for r in node.live_regions:
            inner = _origin_in(r, {**scope, **r.types}) if all(
                _static(r, i, {**scope, **r.types}) for i in r.inputs) else None
            if inner:
                return inner
        for out in node.outputs:
            if out and not _static(graph, out, scope):
                return _explain(graph, node, out, scope)
    return None

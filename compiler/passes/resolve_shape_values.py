"""Pass ``resolve-shape-values``: the exporters' run-time shape arithmetic, resolved from the types.

Exporters compute a Reshape's target from the shapes of other values
(``Concat(Shape(x)[0], Shape(x)[1], [4], [16])``).  With symbolic dims the target is
no constant, so ``infer-shapes`` gives the result fresh symbols, and what follows
loses track too: the heads' layout, the head size a scale is computed from
(``1 / sqrt(Shape(q)[-1])``), the batch and sequence dims of every later layer.
Following the arithmetic with :func:`~.shape_values.shape_value`, this pass makes

- an integer value (0-d or 1-d) whose entries are all known ints a constant, so that
  ``fold-constants`` folds what is computed from it (the scale);
- a Reshape typed by the entries of its target that are known dims (``0`` copies
  the input's dim, ``-1`` is what cancelling the symbols leaves; an unknown entry
  stays the symbol it had), and the nodes after it typed again from their rules.

A target the run must honour is the shape the Reshape makes, so the types stay
sound.  Nodes with regions keep their types.  Counted as ``resolved_shape_values``
and ``resolved_reshapes``.  Run after ``infer-shapes``, then ``fold-constants``.
"""
from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence

import numpy as np

from aircc.errors import AirccError

from ..context import CompileContext
from ..ir.graph import Dim, Graph, Node, TensorType
from .base import compile_pass
from .infer_shapes import infer_node
from .shape_values import shape_entries, shape_value

INT_TYPES = ("int32", "int64")


def _known_constant(graph: Graph, node: Node, producers) -> Optional[np.ndarray]:
    """The value of ``node``'s one integer output if shape arithmetic tells all its entries."""
    if len(node.outputs) != 1 or node.regions or node.has_side_effects or node.domain \
            or node.outputs[0] in graph.outputs:
        return None
    t = graph.types.get(node.outputs[0])
    if t is None or t.dtype not in INT_TYPES or t.shape is None or len(t.shape) > 1:
        return None
    entries = shape_value(graph, node.outputs[0], producers)
    if entries is None or not all(isinstance(d, int) for d in entries):
        return None
    if t.shape == ():
        return np.array(entries[0], dtype=t.dtype) if len(entries) == 1 else None
    if isinstance(t.shape[0], int) and t.shape[0] != len(entries):
        return None
    return np.array(entries, dtype=t.dtype)


def _quotient(dims: Sequence[Dim], others: Sequence[Dim]) -> Optional[Dim]:
    """The dim that, times ``others``, makes ``dims``: ints divide, symbols cancel."""
    sin = Counter(d for d in dims if not isinstance(d, int))
    sout = Counter(d for d in others if not isinstance(d, int))
    pin = int(np.prod([d for d in dims if isinstance(d, int)], dtype=np.int64))
    pout = int(np.prod([d for d in others if isinstance(d, int)], dtype=np.int64))
    rest = sin - sout
    if sout - sin or pout == 0 or pin % pout:
        return None
    if not rest:
        return pin // pout
    if pin == pout and sum(rest.values()) == 1:
        return next(iter(rest))
    return None


def _reshaped(graph: Graph, node: Node, producers) -> Optional[TensorType]:
    """The type a Reshape's known target gives its output, None if the target is unknown."""
    xt, old = graph.types.get(node.inputs[0]), graph.types.get(node.outputs[0])
    target = shape_entries(graph, node.inputs[1], producers)
    if xt is None or xt.shape is None or target is None or old is None or old.shape is None \
            or len(old.shape) != len(target):
        return None
    out: list[Dim] = []
    neg = None
    for i, d in enumerate(target):
        if d is None:
            out.append(old.shape[i])     # not known: the symbol it had
        elif d == 0 and not node.attrs.get("allowzero", 0):
            if i >= len(xt.shape):
                return None
            out.append(xt.shape[i])
        elif d == -1:
            if neg is not None:
                return None
            neg = i
            out.append(old.shape[i])
        elif isinstance(d, int) and d < 0:
            return None
        else:
            out.append(d)
    if neg is not None:
        out[neg] = _quotient(xt.shape, out[:neg] + out[neg + 1:]) or old.shape[neg]
    if all(isinstance(d, int) for d in (*xt.shape, *out)) and np.prod(xt.shape) != np.prod(out):
        return None                     # the run would fail: leave it to the run
    return TensorType(xt.dtype, tuple(out))


@compile_pass("resolve-shape-values", stats=("resolved_shape_values", "resolved_reshapes"))
def resolve_shape_values(graph: Graph, ctx: CompileContext) -> Graph:
    producers = graph.producers()
    kept: list[Node] = []
    values = reshapes = 0
    for node in graph.nodes:
        const = _known_constant(graph, node, producers)
        if const is not None:
            graph.constants[node.outputs[0]] = const
            graph.types[node.outputs[0]] = TensorType.of(const)
            values += 1
            continue
        kept.append(node)
        if node.regions:
            continue
        if node.is_plain("Reshape") and node.version >= 5 and node.inputs[1] not in graph.constants:
            t = _reshaped(graph, node, producers)
            if t is not None:
                reshapes += t != graph.types.get(node.outputs[0])
                graph.types[node.outputs[0]] = t
            continue
        try:
            types = infer_node(graph, node)
        except AirccError:
            continue                     # typed as it was
        for name, t in zip(node.outputs, types):
            if name:
                graph.types[name] = t
    graph.nodes = kept
    ctx.count("resolved_shape_values", values)
    ctx.count("resolved_reshapes", reshapes)
    return graph

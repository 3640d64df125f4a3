"""Which heads of which projection a value of an attention block holds, found by running
the block's layout ops on the projection's element indices.

Exporters split a projection into heads in many spellings: Reshape to [B, S, H, D]
and Transpose (BERT); one packed projection Reshaped to [S, B, 3, E], Unsqueezed,
Transposed, Squeezed, Gathered per part, Reshaped to [S, B H, D], Transposed and
Reshaped again (torch.nn.MultiheadAttention); K^T as a Transpose, as Reshape -
Transpose - Reshape, or through a MatMul's ``perm_b``.  Rather than match each
spelling, :func:`find_chain` walks from a value back through layout ops to a linear
MatMul with constant weights, and :func:`heads_at` runs those ops (aircc's own
kernels; the Reshape targets computed by the exporter's shape arithmetic) on a
tensor of the projection's element indices.  The value holds heads when the result
is ``[B, H, S, D]`` with entry (b, h, s, d) the index of column ``offset + h D + d``
of the projection at batch b, position s, for its input laid out ``[B, S, E]`` or
``[S, B, E]``.

A :class:`Probe` evaluates in a graph whose shapes are all known: the graph itself in
a static compile (the check is exact), else copies of it with every symbol of its
inputs a prime, folded as a static compile folds them (:func:`probes`); a dynamic
compile checks two such sizes, so that a layout matching by a coincidence of sizes
is not taken.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from aircc.errors import AirccError

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .fold_constants import evaluate, fold_constants
from .infer_shapes import infer_node

#: Ops that move a value's elements without computing (input 0 is the data).
LAYOUT_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Gather",
              "Slice", "Split")
#: Primes a dynamic compile's symbols take at its two probe sizes.
PROBE_PRIMES = ((7, 11, 13, 17, 37, 41), (19, 23, 29, 31, 43, 47))


class Probe:
    """The values of a graph whose shapes are all known: ``seed`` gives values, and layout
    ops and integer shape arithmetic are run by the target's kernels."""

    def __init__(self, graph: Graph, ctx: CompileContext):
        self.graph, self.ctx = graph, ctx
        self.producers = graph.producers()
        self.memo: dict[str, np.ndarray] = {}

    def seed(self, value: str, array: np.ndarray) -> None:
        self.memo[value] = array

    def shape(self, value: str) -> Optional[tuple[int, ...]]:
        """``value``'s shape, from its evaluated value or its type."""
        if value in self.memo:
            return self.memo[value].shape
        t = self.graph.types.get(value)
        if t is not None and t.is_static:
            return tuple(t.shape)
        arr = self.value(value)
        return None if arr is None else arr.shape

    def value(self, value: str, depth: int = 48) -> Optional[np.ndarray]:
        """``value``, or None when it is neither a constant, seeded, a layout op of such
        values, nor integer shape arithmetic."""
        if value in self.memo:
            return self.memo[value]
        if value in self.graph.constants:
            return self.graph.constants[value]
        node = self.producers.get(value)
        if node is None or node.domain or node.regions or depth <= 0:
            return None
        if node.op in ("Shape", "Size"):
            dims = self.shape(node.inputs[0])
            if dims is None:
                return None
            if node.op == "Size":
                return np.array(int(np.prod(dims)), np.int64)
            end = node.attrs.get("end")
            return np.array(dims[int(node.attrs.get("start", 0)):None if end is None else int(end)], np.int64)
        t = self.graph.types.get(value)
        shape_arithmetic = t is not None and t.dtype in ("int32", "int64") and t.shape is not None \
            and len(t.shape) <= 1
        if node.op not in LAYOUT_OPS and not shape_arithmetic:
            return None
        ins = [self.value(i, depth - 1) if i else None for i in node.inputs]
        if any(a is None for a, i in zip(ins, node.inputs) if i):
            return None
        outs = self.run(node, ins)
        if outs is None:
            return None
        for name, arr in zip(node.outputs, outs):
            if name:
                self.memo[name] = arr
        return self.memo.get(value)

    def run(self, node: Node, ins: list[Optional[np.ndarray]]) -> Optional[list[np.ndarray]]:
        """``node``'s outputs for inputs ``ins`` (its shape rule and kernel, as fold-constants
        runs them); None if the rule or the kernel refuses them."""
        scratch = Graph(constants={i: a for i, a in zip(node.inputs, ins) if i},
                        types={i: TensorType.of(a) for i, a in zip(node.inputs, ins) if i})
        copy = dataclasses.replace(node, meta=dict(node.meta))   # a rule may mark it fallback
        try:
            return evaluate(scratch, copy, infer_node(scratch, copy), self.ctx)
        except (AirccError, ValueError, IndexError, TypeError):
            return None


def _specialized(graph: Graph, ctx: CompileContext, sizes: dict[str, int]) -> Optional[Graph]:
    """A copy of ``graph`` with its inputs' symbols given ``sizes``, folded as a static
    compile folds it (None if that fails: the graph does not run at these sizes)."""
    nodes = [copy.deepcopy(n) if n.regions else
             dataclasses.replace(n, inputs=list(n.inputs), outputs=list(n.outputs), attrs=dict(n.attrs),
                                 meta=dict(n.meta)) for n in graph.nodes]
    g = Graph(graph.name, nodes, list(graph.inputs), list(graph.outputs), dict(graph.types),
              dict(graph.constants), dict(graph.opsets), dict(graph.meta))
    for i in g.inputs:
        t = g.types[i]
        if t.shape is not None:
            g.types[i] = TensorType(t.dtype, tuple(sizes.get(d, d) for d in t.shape))
    try:
        fold_constants(g, CompileContext(ctx.options))
    except AirccError:
        return None
    return g


def probes(graph: Graph, ctx: CompileContext) -> list[Probe]:
    """Where to check a layout: the graph itself when its inputs are static, else two
    copies with every symbol of its inputs a prime (none if a copy cannot be folded)."""
    symbols = list(dict.fromkeys(d for i in graph.inputs for d in (graph.types[i].shape or ())
                                 if not isinstance(d, int)))
    if not symbols:
        return [Probe(graph, ctx)]
    if len(symbols) > len(PROBE_PRIMES[0]):
        return []
    copies = [_specialized(graph, ctx, dict(zip(symbols, primes))) for primes in PROBE_PRIMES]
    return [Probe(g, ctx) for g in copies] if all(g is not None for g in copies) else []


@dataclass(frozen=True)
class Heads:
    """Heads of a projection: columns ``[offset, offset + heads * head_dim)``."""

    offset: int
    heads: int
    head_dim: int
    seq_first: bool
    """The projection's operand is ``[S, B, E]`` (else ``[B, S, E]``)."""


def linear_projection(graph: Graph, node: Node | None) -> bool:
    """``node`` is ``x @ W (+ b)`` with x of rank 3 (read directly or through a ``perm_a``
    that keeps its last axis), W a constant float32 matrix and b a constant vector."""
    if node is None or not node.is_plain("MatMul") or set(node.attrs) - {"fused_add", "perm_a"}:
        return False
    w = graph.constants.get(node.inputs[1])
    xt = graph.types.get(node.inputs[0])
    if w is None or w.ndim != 2 or w.dtype != np.float32 or xt is None or xt.shape is None \
            or len(xt.shape) != 3 or node.attrs.get("perm_a", [0, 1, 2])[-1] != 2:
        return False
    if node.attrs.get("fused_add"):
        b = graph.constants.get(node.inputs[2]) if len(node.inputs) > 2 else None
        return b is not None and b.shape == (w.shape[1],) and b.dtype == w.dtype
    return len(node.inputs) == 2


def find_chain(graph: Graph, value: str, producers: dict[str, Node]) -> Optional[tuple[Node, list[Node]]]:
    """(projection, the layout ops from its output to ``value``, in order) if ``value`` is
    made from a linear projection by layout ops alone."""
    chain: list[Node] = []
    while True:
        node = producers.get(value)
        if node is None or len(chain) > 16:
            return None
        if linear_projection(graph, node):
            return node, chain[::-1]
        if not node.is_plain(node.op) or node.op not in LAYOUT_OPS:
            return None
        chain.append(node)
        value = node.inputs[0]


def heads_at(probe: Probe, linear: Node, value: str, perm: list[int] | None, keys: bool) -> Optional[Heads]:
    """The heads ``value`` (read through ``perm``) holds at the probe's size: Q's or V's as
    ``[B, H, S, D]``, or with ``keys`` K^T's as ``[B, H, D, S]``; None if it holds none."""
    x_shape = probe.shape(linear.inputs[0])
    if x_shape is None:
        return None
    perm_a = linear.attrs.get("perm_a")
    a0, a1, _ = (x_shape[p] for p in perm_a) if perm_a else x_shape
    n = _cols(probe.graph, linear)
    size = a0 * a1 * n
    index = np.arange(size, dtype=np.int32 if size < 2 ** 31 else np.int64).reshape(a0, a1, n)
    probe.seed(linear.outputs[0], index)
    got = probe.value(value)
    if got is None or got.ndim != 4:
        return None
    got = got.transpose(perm) if perm else got
    if keys:
        got = got.swapaxes(2, 3)
    h, d = got.shape[1], got.shape[3]
    offset = int(got.reshape(-1)[0]) % n if got.size else 0
    if h * d == 0 or offset + h * d > n:
        return None
    part = index[:, :, offset:offset + h * d].reshape(a0, a1, h, d)
    for seq_first, order in ((False, (0, 2, 1, 3)), (True, (1, 2, 0, 3))):
        want = part.transpose(order)
        if want.shape == got.shape and np.array_equal(want, got):
            return Heads(offset, h, d, seq_first)
    return None


def _cols(graph: Graph, linear: Node) -> int:
    """The projection's number of output columns (its weights' second dim)."""
    return int(graph.constants[linear.inputs[1]].shape[1])


def dims_of(probes: list[Probe], value: str, x: str) -> Optional[list[tuple[str, int]]]:
    """``value``'s shape entry by entry: ``("x", axis)`` for a dim of ``x`` (it follows x's
    at every probe), ``("int", n)`` for one that is n at every probe; None if an entry is
    neither (a product of x's dims, say)."""
    shapes, xs = [p.shape(value) for p in probes], [p.shape(x) for p in probes]
    if not probes or any(s is None for s in shapes + xs) or len({len(s) for s in shapes}) != 1:
        return None
    out: list[tuple[str, int]] = []
    for j in range(len(shapes[0])):
        vals = [s[j] for s in shapes]
        axes = [i for i in range(len(xs[0])) if all(xv[i] == v for xv, v in zip(xs, vals))]
        if len(set(vals)) == 1:
            out.append(("int", vals[0]))
        elif axes:
            out.append(("x", axes[0]))
        else:
            return None
    return out

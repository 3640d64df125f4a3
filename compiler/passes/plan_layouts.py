"""Pass ``plan-layouts``: run convolution regions channels-last, reorder only at their edges.

A kernel backend may want its convolutions, pools and normalisations to run on
``(N, H, W, C)`` activations (:meth:`KernelBackend.wants_channels_last`; the oneDNN
backend does, numpy's does not).  This pass finds the *regions* of the graph that can
stay channels-last: connected values of one rank (3 to 5) linked through

- spatial ops the backend wants channels-last (:data:`aircc.ops.layout.SPATIAL_INPUTS`),
  which get ``channels_last = 1``;
- layout-free ops (elementwise ops, Clip, elementwise chains: the same numbers in the
  same order on every operand), whose constant operands are permuted at compile time;
- Concats and ChannelShuffles, whose axis moves;

and keeps a region only if it holds a spatial op.  Every value a region node makes
takes its channels-last (physical) type, so the memory planner sizes it as it lies.
A value entering a region from outside gets one reorder (a ``Transpose``) before its
first reader; a value leaving it one reorder back, under its old name (so readers
outside and the model's outputs do not change).  A reorder that moves no bytes (all
but one of the permuted dims are 1: a pooled ``(N, 1, 1, C)``) is a ``Reshape``, a
view.  Counted as ``channels_last_nodes``, ``layout_reorders`` and ``layout_views``.

``CompileOptions.channels_last``: None lets the backend decide; True plans every
spatial op the pass can (kernels that do not run channels-last themselves run through
channels-first copies, slower but right: for tests); False plans nothing.  Run after
``pack-weights`` (which reads channels-first shapes); ``infer-shapes`` after it checks
every type it set.
"""
from __future__ import annotations

import numpy as np

from aircc.formats.kinds import Impl
from aircc.ops import Trait, has_trait
from aircc.ops.layout import (CHANNELS_LAST, SPATIAL_INPUTS, first_perm, last_axis, last_perm,
                              to_last)

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass

#: Ops outside the ELEMENTWISE trait that are layout-free all the same: (domain, op).
LAYOUT_FREE = {("", "Clip"), ("aircc", "ElementwiseChain")}
#: Ops of one activation input that work along an ``axis`` attribute, moved in a region.
AXIS_OPS = {("", "Concat"), ("aircc", "ChannelShuffle")}


@compile_pass("plan-layouts", stats=("channels_last_nodes", "layout_reorders", "layout_views"))
def plan_layouts(graph: Graph, ctx: CompileContext) -> Graph:
    wanted = ctx.options.channels_last
    if wanted is False or (wanted is None and not ctx.backend.plans_layouts()):
        return graph
    regions = _Regions(graph)
    for node in graph.nodes:
        rank = _rank(graph, node)
        if rank is None:
            continue
        if _spatial(graph, node, rank) and (wanted or ctx.backend.wants_channels_last(
                node.op, [graph.types.get(i) if i else None for i in node.inputs], node.attrs,
                ctx.target, node.domain)):
            regions.join(node, SPATIAL_INPUTS[node.op], spatial=True)
        elif _layout_free(graph, node, rank) or _concat(graph, node, rank):
            regions.join(node, range(len(node.inputs)), spatial=False)
    planned = regions.planned()
    if planned:
        _Rewrite(graph, planned, ctx).run()
    return graph


def _rank(graph: Graph, node: Node) -> int | None:
    """The rank of the node's one output, if it is a top-level node that could be planned."""
    outs = [o for o in node.outputs if o]
    if len(outs) != 1 or node.regions or node.impl is Impl.FALLBACK:
        return None
    t = graph.types.get(outs[0])
    return len(t.shape) if t is not None and t.shape is not None and 3 <= len(t.shape) <= 5 \
        else None


def _typed_rank(graph: Graph, value: str) -> int | None:
    t = graph.types.get(value)
    return None if t is None or t.shape is None else len(t.shape)


def _spatial(graph: Graph, node: Node, rank: int) -> bool:
    spatial = SPATIAL_INPUTS.get(node.op)
    return (spatial is not None and not node.domain and len(node.outputs) == 1
            and all(_typed_rank(graph, node.inputs[j]) == rank for j in spatial
                    if j < len(node.inputs) and node.inputs[j]))


def _layout_free(graph: Graph, node: Node, rank: int) -> bool:
    if not (has_trait(node.op, Trait.ELEMENTWISE, node.domain) or (node.domain, node.op) in LAYOUT_FREE):
        return False
    values = [i for i in node.inputs if i and i not in graph.constants]
    return bool(values) and all(_typed_rank(graph, i) == rank for i in values)   # constants: permuted


def _concat(graph: Graph, node: Node, rank: int) -> bool:
    """A Concat or ChannelShuffle (:data:`AXIS_OPS`) of activations of ``rank``."""
    return (node.domain, node.op) in AXIS_OPS and all(_typed_rank(graph, i) == rank and i not in graph.constants
                                           for i in node.inputs)


def _rename_input(node: Node, old: str, new: str) -> None:
    """``node`` reads ``new`` where it read ``old`` (an elementwise chain names its operands
    in ``operands`` and ``steps`` too)."""
    node.inputs = [new if i == old else i for i in node.inputs]
    if node.domain == "aircc" and "steps" in node.attrs:
        node.attrs["operands"] = [new if i == old else i for i in node.attrs.get("operands", [])]
        node.attrs["steps"] = [[op, new if x == old else x, right]
                               for op, x, right in node.attrs["steps"]]


def _reshape_target(shape: tuple, new_shape: tuple) -> list[int] | None:
    """A Reshape's shape input taking ``shape`` to ``new_shape``: a symbolic dim is 0 (copied
    from the input) where the input has it at the same place, else -1 once; None when the
    symbols cannot be said so."""
    out, inferred = [], False
    for i, d in enumerate(new_shape):
        if isinstance(d, int):
            out.append(d)
        elif i < len(shape) and shape[i] == d:
            out.append(0)
        elif not inferred:
            out.append(-1)
            inferred = True
        else:
            return None
    return out


def _moves_no_bytes(shape: tuple, perm: list[int]) -> bool:
    """Permuting ``shape`` by ``perm`` leaves every byte in place: the dims that are not 1
    keep their order."""
    kept = [p for p in perm if shape[p] != 1]
    return kept == sorted(kept)


class _Regions:
    """Union-find over values; a region is planned when a spatial node makes one of them."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.parent: dict[str, str] = {}
        self.nodes: list[tuple[Node, bool]] = []

    def find(self, v: str) -> str:
        root = v
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(v, v) != root:
            self.parent[v], v = root, self.parent[v]
        return root

    def join(self, node: Node, inputs, spatial: bool) -> None:
        out = next(o for o in node.outputs if o)
        for j in inputs:
            if j < len(node.inputs) and node.inputs[j] and node.inputs[j] not in self.graph.constants:
                self.parent[self.find(node.inputs[j])] = self.find(out)
        self.nodes.append((node, spatial))

    def planned(self) -> list[tuple[Node, bool]]:
        roots = {self.find(next(o for o in n.outputs if o)) for n, spatial in self.nodes if spatial}
        return [(n, s) for n, s in self.nodes if self.find(next(o for o in n.outputs if o)) in roots]


class _Rewrite:
    """Marks the planned nodes, permutes their values and constants, adds the reorders."""

    def __init__(self, graph: Graph, planned: list[tuple[Node, bool]], ctx: CompileContext):
        self.graph, self.planned, self.ctx = graph, planned, ctx
        self.inside = {id(n) for n, _ in planned}
        self.made = {next(o for o in n.outputs if o) for n, _ in planned}
        self.entries: dict[str, str] = {}
        self.constants: dict[str, str] = {}
        self.before: dict[int, list[Node]] = {}    # id(node) -> reorders to put before it
        self.after: dict[int, list[Node]] = {}

    def run(self) -> None:
        g = self.graph
        producers = g.producers()
        users = g.consumers()
        for node, spatial in self.planned:
            rank = len(g.types[next(o for o in node.outputs if o)].shape)
            activations = SPATIAL_INPUTS[node.op] if spatial else range(len(node.inputs))
            for j in activations:
                value = node.inputs[j] if j < len(node.inputs) else ""
                if value and value not in self.made:
                    _rename_input(node, value, self._enter(node, value, rank, producers))
            if spatial:
                node.attrs[CHANNELS_LAST] = 1
                self.ctx.count("channels_last_nodes")
            elif (node.domain, node.op) in AXIS_OPS:
                default = 0 if node.op == "Concat" else 1
                node.attrs["axis"] = last_axis(int(node.attrs.get("axis", default)), rank)
        for node, _ in self.planned:
            out = next(o for o in node.outputs if o)
            t = g.types[out]
            outside = [u for u in users.get(out, []) if id(u) not in self.inside]
            g.types[out] = TensorType(t.dtype, to_last(t.shape))
            if outside or out in g.outputs:
                self._leave(node, out, t)
        order = []
        for n in g.nodes:
            order += self.before.get(id(n), []) + [n] + self.after.get(id(n), [])
        g.nodes = order

    def _enter(self, reader: Node, value: str, rank: int, producers: dict) -> str:
        g = self.graph
        if value in g.constants:
            return self._permuted_constant(value, rank)
        if value not in self.entries:
            t = g.types[value]
            name = g.fresh_name(f"{value}.nhwc")
            g.types[name] = TensorType(t.dtype, to_last(t.shape))
            self.entries[value] = name
            node = self._reorder(value, name, t.shape, last_perm(rank), to_last(t.shape))
            self.before.setdefault(id(reader), []).append(node)
        return self.entries[value]

    def _leave(self, node: Node, out: str, t: TensorType) -> None:
        """``out`` keeps its name and channels-first type outside; inside it is renamed."""
        g = self.graph
        inner = g.fresh_name(f"{out}.nhwc")
        g.types[inner] = g.types.pop(out)
        node.outputs = [inner if o == out else o for o in node.outputs]
        for reader, _ in self.planned:
            _rename_input(reader, out, inner)
        g.types[out] = t
        rank = len(t.shape)
        self.after.setdefault(id(node), []).append(
            self._reorder(inner, out, to_last(t.shape), first_perm(rank), t.shape))

    def _reorder(self, src: str, dst: str, shape: tuple, perm: list[int], new_shape: tuple) -> Node:
        g = self.graph
        target_dims = _reshape_target(shape, new_shape)
        if _moves_no_bytes(shape, perm) and target_dims is not None:
            target = g.fresh_name(f"{dst}.shape")
            g.constants[target] = np.array(target_dims, np.int64)
            g.types[target] = TensorType("int64", (len(new_shape),))
            self.ctx.count("layout_views")
            return Node("Reshape", [src, target], [dst], {}, g.fresh_name(f"{dst}/layout"), "", 14)
        self.ctx.count("layout_reorders")
        return Node("Transpose", [src], [dst], {"perm": list(perm)}, g.fresh_name(f"{dst}/layout"),
                    "", 13)

    def _permuted_constant(self, name: str, rank: int) -> str:
        g = self.graph
        arr = np.asarray(g.constants[name])
        if arr.ndim == 0 or arr.size == 1 or arr.ndim > rank:
            return name           # a scalar broadcasts the same in any layout
        if name not in self.constants:
            full = arr.reshape((1,) * (rank - arr.ndim) + arr.shape)
            moved = np.ascontiguousarray(full.transpose(last_perm(rank)))
            new = g.fresh_name(f"{name}.nhwc")
            g.constants[new] = moved
            g.types[new] = TensorType.of(moved)
            self.constants[name] = new
        return self.constants[name]

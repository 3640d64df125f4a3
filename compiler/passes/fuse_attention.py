"""Pass ``fuse-attention``: a self-attention block, from its input to its heads' context, one kernel.

After the earlier fusions an exported self-attention is still several launches: the
projections of Q, K and V (``x @ W + b``: three, or one packed ``x @ [Wq | Wk | Wv]``),
the layout ops that split them into heads, the scores ``Q @ K^T`` (with a
``fused_scale`` no earlier pass could move into Q's weights), and
``aircc.SoftmaxMatMul`` with the mask, or a Softmax whose NaNs
``Where(IsNaN(p), 0, p)`` zeroes (PyTorch's SDPA) and its product with V.  This pass
makes them one ``aircc.Attention(x, [Wq | Wk | Wv], [bq | bk | bv], mask)``: one
product for Q, K and V (a wider GEMM, where BLAS is efficient, instead of three narrow
ones), the heads read as views of its result, and no intermediate leaving the
kernel's workspace.  Q's weights and bias carry the scale and a factor log2 e
(``base2``), so the kernel exponentiates its scores with numpy's exp2, twice as fast
as its exp.

Matched when the scores' operands and the product's V are the heads of linear
projections of the same rank-3 ``x`` with constant weights (and constant or no bias),
as running their layout ops on the projections' element indices shows
(:mod:`.head_layout`), with the same heads and head size, x laid out ``[B, S, E]`` or
``[S, B, E]`` (``seq_first_in``); the context is ``[B, S, H, D]`` (or ``[S, B, H, D]``:
``seq_first_out``) at the product or at most a few layout ops after it, which the
Attention then writes; and every value in between is read by the block alone
(readers of its shape only must go dead with it, or be a Shape whose entries are
dims of x or ints at every probe: that Shape then reads them from x's shape, as a
mask built for the scores' shape needs).  Counted as ``fused_attention``.
Run after ``fuse-softmax-matmul``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from aircc.errors import AirccError

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass
from .eliminate_dead_code import eliminate_dead_code
from .head_layout import Heads, Probe, dims_of, find_chain, heads_at, probes
from .infer_shapes import infer_node

#: Layout ops the context may pass through before it is [B, S, H, D].
OUTPUT_LAYOUT_OPS = ("Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze")
SCORES_ATTRS = {"perm_a", "perm_b", "fused_scale"}


@dataclass
class _Product:
    """softmax(scores + mask) @ V, as one SoftmaxMatMul or as Softmax, NaN guard, MatMul."""

    node: Node                  # the node the Attention takes the place of
    members: list[Node]         # the first one reads the scores
    scores: str
    mask: Optional[str]
    v: str
    perm_v: Optional[list[int]]
    perm_y: Optional[list[int]]
    nan_guard: bool


def _orders(scores: str, mask: Optional[str]) -> list[tuple[str, Optional[str]]]:
    """A fused mask Add may have had the mask first: either operand may be the scores."""
    return [(scores, mask)] if mask is None else [(scores, mask), (mask, scores)]


def _products(graph: Graph, node: Node, users, producers) -> list[_Product]:
    """The ways ``node`` ends softmax(scores + mask) @ V (none if it does not)."""
    if node.op == "SoftmaxMatMul" and node.domain == "aircc":
        mask = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
        return [_Product(node, [node], s, m, node.inputs[1], node.attrs.get("perm_b"),
                         node.attrs.get("perm_y"), False) for s, m in _orders(node.inputs[0], mask)]
    if not node.is_plain("MatMul") or len(node.inputs) != 2 or set(node.attrs) - {"perm_b", "perm_y"}:
        return []
    where = producers.get(node.inputs[0])
    isnan = producers.get(where.inputs[0]) if where is not None and where.is_plain("Where") else None
    if isnan is None or not isnan.is_plain("IsNaN") or where.inputs[2] != isnan.inputs[0] \
            or graph.only_reader(where.outputs[0], users) is not node \
            or graph.only_reader(isnan.outputs[0], users) is not where:
        return []
    zero = graph.constants.get(where.inputs[1])
    sm = producers.get(isnan.inputs[0])
    t = graph.types.get(isnan.inputs[0])
    if zero is None or zero.size != 1 or zero.reshape(-1)[0] != 0 or sm is None or not sm.is_plain("Softmax") \
            or sm.version < 13 or len(sm.outputs) != 1 or t is None or t.shape is None \
            or int(sm.attrs.get("axis", -1)) not in (-1, len(t.shape) - 1) \
            or {n.name for n in graph.number_readers(sm.outputs[0], users)} != {isnan.name, where.name}:
        return []
    mask = sm.inputs[1] if sm.attrs.get("fused_add") and len(sm.inputs) > 1 else None
    return [_Product(node, [sm, isnan, where, node], s, m, node.inputs[1], node.attrs.get("perm_b"),
                     node.attrs.get("perm_y"), True) for s, m in _orders(sm.inputs[0], mask)]


def _context(probe: Probe, graph: Graph, product: _Product, heads: Heads, x_shape, users):
    """(the value that holds the context as [B, S, H, D] or [S, B, H, D], seq-first, the
    layout ops from the product to it), or None."""
    a0, a1 = x_shape[:2]
    b, s = (a1, a0) if heads.seq_first else (a0, a1)
    ctx = np.arange(b * heads.heads * s * heads.head_dim).reshape(b, heads.heads, s, heads.head_dim)
    value = product.node.outputs[0]
    got = ctx.transpose(product.perm_y) if product.perm_y else ctx
    nodes: list[Node] = []
    while True:
        for seq_first, order in ((False, (0, 2, 1, 3)), (True, (2, 0, 1, 3))):
            want = ctx.transpose(order)
            if want.shape == got.shape and np.array_equal(want, got):
                return value, seq_first, nodes
        readers = graph.number_readers(value, users)
        if len(nodes) == 3 or len(readers) != 1 or value in graph.outputs:
            return None
        r = readers[0]
        if r.op not in OUTPUT_LAYOUT_OPS or not r.is_plain(r.op) or r.inputs[0] != value or len(r.outputs) != 1:
            return None
        probe.seed(value, got)
        got = probe.value(r.outputs[0])
        if got is None:
            return None
        nodes.append(r)
        value = r.outputs[0]


def _live_readers(graph: Graph, members: list[Node], keep: set[str]) -> Optional[list[tuple[str, Node]]]:
    """(value, reader) for each value the members make (but those in ``keep``) that a node
    outside them reads and that does not go dead with them (a mask built from the
    scores' shape, say); None if such a value is a graph output or a control-flow body
    reads it."""
    users = graph.consumers()
    dead = {n.name for n in members}
    changed = True
    while changed:
        changed = False
        for n in graph.nodes:
            if n.name in dead or n.has_side_effects or n.regions:
                continue
            outs = [o for o in n.outputs if o]
            if all(o not in graph.outputs and o not in keep and all(u.name in dead for u in users.get(o, []))
                   for o in outs):
                dead.add(n.name)
                changed = True
    made = {o for n in members for o in n.outputs if o} - keep
    captured = {i for n in graph.nodes for region in n.regions for m in region.walk() for i in m.inputs}
    if made & (set(graph.outputs) | captured):       # a body reads it from outside: keep it
        return None
    return [(v, u) for v in sorted(made) for u in users.get(v, []) if u.name not in dead]


def _shape_fixes(at: list[Probe], live: list[tuple[str, Node]], x: str) -> Optional[list[tuple[Node, list]]]:
    """For each live reader, a plain Shape, the entries it reads as dims of x or ints (see
    :func:`dims_of`): what it can read instead of a value that goes away; None if a
    reader is something else or its value's shape is not such."""
    fixes = []
    for value, reader in live:
        dims = dims_of(at, value, x) if reader.is_plain("Shape") and reader.inputs == [value] else None
        if dims is None:
            return None
        end = reader.attrs.get("end")
        fixes.append((reader, dims[int(reader.attrs.get("start", 0)):None if end is None else int(end)]))
    return fixes


def _rewire_shape(graph: Graph, reader: Node, dims: list, x: str) -> list[Node]:
    """``reader`` (a Shape) made to compute its entries from x's shape: Shape(x), the ints
    appended, the entries gathered.  The nodes that now make its output, in order."""
    ints = [n for kind, n in dims if kind == "int"]
    rank = len(graph.types[x].shape)
    picks, k = [], 0
    for kind, n in dims:
        picks.append(n if kind == "x" else rank + k)
        k += kind == "int"
    out = reader.outputs[0]
    names = [graph.fresh_name(f"{out}/{part}") for part in ("input_shape", "ints", "entries", "picks")]
    arrays = {names[1]: np.array(ints, np.int64), names[3]: np.array(picks, np.int64)}
    for name, arr in arrays.items():
        graph.constants[name] = arr
        graph.types[name] = TensorType.of(arr)
    graph.types[names[0]] = TensorType("int64", (rank,))
    graph.types[names[2]] = TensorType("int64", (rank + len(ints),))
    reader.inputs, reader.outputs, reader.attrs = [x], [names[0]], {}
    return [reader,
            Node("Concat", [names[0], names[1]], [names[2]], {"axis": 0}, name=f"{reader.name}/concat",
                 version=reader.version),
            Node("Gather", [names[2], names[3]], [out], {"axis": 0}, name=f"{reader.name}/gather",
                 version=reader.version)]


@dataclass
class _Block:
    product: _Product
    scores: Node
    linears: list[Node]         # Q's, K's, V's projection (the same node when packed)
    heads: list[Heads]
    output: str
    seq_first_out: bool
    members: list[Node]
    shape_fixes: list[tuple[Node, list]]   # Shape readers to compute from x (see _shape_fixes)


def _match(graph: Graph, at: list[Probe], product: _Product, users, producers) -> Optional[_Block]:
    """The attention block that ends in ``product``, or None."""
    sc = producers.get(product.scores)
    if sc is None or not sc.is_plain("MatMul") or len(sc.inputs) != 2 or set(sc.attrs) - SCORES_ATTRS \
            or graph.number_readers(product.scores, users) != [product.members[0]]:
        return None
    chains = [find_chain(graph, v, producers) for v in (sc.inputs[0], sc.inputs[1], product.v)]
    if any(c is None for c in chains):
        return None
    linears = [c[0] for c in chains]
    x = linears[0].inputs[0]
    if any(n.inputs[0] != x or n.attrs.get("perm_a") != linears[0].attrs.get("perm_a") for n in linears):
        return None
    found = None
    for probe in at:
        heads = [heads_at(probe, linears[0], sc.inputs[0], sc.attrs.get("perm_a"), False),
                 heads_at(probe, linears[1], sc.inputs[1], sc.attrs.get("perm_b"), True),
                 heads_at(probe, linears[2], product.v, product.perm_v, False)]
        if any(h is None for h in heads) or len({(h.heads, h.head_dim, h.seq_first) for h in heads}) != 1:
            return None
        x_shape = probe.shape(x)
        perm_a = linears[0].attrs.get("perm_a")
        out = _context(probe, graph, product, heads[0], [x_shape[p] for p in perm_a] if perm_a else x_shape,
                       users)
        if out is None or (found is not None and (found[0], found[1][:2]) != (heads, out[:2])):
            return None
        found = (heads, out)
    if found is None:
        return None
    heads, (output, seq_first_out, after) = found
    members = list({n.name: n for c in chains for n in (c[0], *c[1])}.values())
    members += [sc, *product.members, *after]
    live = _live_readers(graph, members, {output, x} | ({product.mask} if product.mask else set()))
    fixes = None if live is None else _shape_fixes(at, live, x)
    if fixes is None:
        return None
    return _Block(product, sc, linears, heads, output, seq_first_out, members, fixes)


def _packed(graph: Graph, parts: list[np.ndarray], base: str) -> str:
    arr = np.ascontiguousarray(np.concatenate(parts, axis=-1))
    name = graph.fresh_name(base)
    graph.constants[name] = arr
    graph.types[name] = TensorType.of(arr)
    return name


def _attention(graph: Graph, block: _Block) -> Node:
    """The Attention node of a matched block, its packed weights added to the graph."""
    ws, bs = [], []
    for lin, h in zip(block.linears, block.heads):
        cols = slice(h.offset, h.offset + h.heads * h.head_dim)
        w = graph.constants[lin.inputs[1]]
        ws.append(w[:, cols])
        bs.append(graph.constants[lin.inputs[2]][cols] if lin.attrs.get("fused_add")
                  else np.zeros(h.heads * h.head_dim, w.dtype))
    factor = np.log2(np.e) * float(block.scores.attrs.get("fused_scale", 1.0))
    ws[0], bs[0] = ((a.astype(np.float64) * factor).astype(a.dtype) for a in (ws[0], bs[0]))
    name = block.product.node.name
    attrs = {"heads": block.heads[0].heads, "base2": 1}
    flipped = list(block.linears[0].attrs.get("perm_a", [0, 1, 2]))[:2] == [1, 0]   # x read as x^T
    seq_first_in = block.heads[0].seq_first != flipped
    for key, on in (("seq_first_in", seq_first_in), ("seq_first_out", block.seq_first_out),
                    ("nan_guard", block.product.nan_guard)):
        if on:
            attrs[key] = 1
    inputs = [block.linears[0].inputs[0], _packed(graph, ws, f"{name}/qkv.weight"),
              _packed(graph, bs, f"{name}/qkv.bias")] + ([block.product.mask] if block.product.mask else [])
    return Node("Attention", inputs, [block.output], attrs, name=f"{name}/attention", domain="aircc", version=1)


@compile_pass("fuse-attention", stats=("fused_attention",))
def fuse_attention(graph: Graph, ctx: CompileContext) -> Graph:
    fused = 0
    removed: set[str] = set()
    replaced: dict[str, Node] = {}
    rewired: dict[str, list[Node]] = {}
    users, producers = graph.consumers(), graph.producers()   # graph.nodes changes at the end only
    at: list[Probe] | None = None
    for node in graph.nodes:
        if node.name in removed:
            continue
        for product in _products(graph, node, users, producers):
            at = probes(graph, ctx) if at is None else at
            block = _match(graph, at, product, users, producers)
            if block is None or any(n.name in removed for n in block.members):
                continue
            attention = _attention(graph, block)
            replaced[node.name] = attention
            for reader, dims in block.shape_fixes:
                rewired[reader.name] = _rewire_shape(graph, reader, dims, block.linears[0].inputs[0])
            for n in block.members:
                removed.add(n.name)
                for out in n.outputs:
                    if out != block.output:
                        graph.types.pop(out, None)
            try:
                graph.types[block.output] = infer_node(graph, attention)[0]
            except AirccError:
                pass                      # typed by the next infer-shapes
            fused += 1
            break
    if fused:
        order = [replaced.get(n.name, n) for n in graph.nodes if n.name not in removed or n.name in replaced]
        graph.nodes = [m for n in order for m in rewired.get(n.name, [n])]
        eliminate_dead_code(graph, ctx)   # the Reshape targets' shape arithmetic, Q/K/V's own weights
    ctx.count("fused_attention", fused)
    return graph

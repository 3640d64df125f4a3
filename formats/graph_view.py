"""The graph an .om runs, as plain nodes and edges: what ``aircc inspect`` lists and
``--dot`` draws, read from the file alone (no ONNX, no kernels).

A static model's graph comes from its task lists and memory plan: a node per kernel,
copy and jump task; a data edge from each task that writes a buffer to each task that
reads the bytes it wrote (matched by operand address, so a Concat part written in place
leads to the Concat, and a buffer reused later links nothing across its lives); an event
edge from the task before each event record to the task after each wait on it; jump
edges from a goto or switch to its label, and the fall-through around them.  A dynamic
model's graph comes from its execute graph: a node per op (a host-placed op has no
stream), data edges by value name, an event edge from the op launched before a record to
the op launched after a wait on the same stream, and the bodies of If, Loop and Scan as
groups of their own.  What a fused node fused is read from the attributes the
compiler's fusion passes leave on it (:func:`fused_ops`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .contract import ModelContract, StaticPlan
from .exec_graph import Body, ExecGraphSection
from .kinds import HostKernelKind, Impl, Placement, Region, TaskKind
from .memory_plan import BufferRecord
from .tasks import CopyTask, EventTask, JumpTask, KernelTask, Operand

#: What a node of the view is.
KERNEL, HOST, INPUT, OUTPUT, COPY, JUMP, ANCHOR = (
    "kernel", "host", "input", "output", "copy", "jump", "anchor")
#: What an edge of the view is.
DATA, EVENT, ORDER, BRANCH, BODY = "data", "event", "order", "branch", "body"

#: Ops the fusion passes make, and the ops each stands for.
FUSED_OPS: dict[str, tuple[str, ...]] = {
    "SoftmaxMatMul": ("Softmax", "MatMul"),
    "ChannelShuffle": ("Reshape", "Transpose", "Reshape"),
    "Attention": ("MatMul (Q, K, V)", "MatMul (scores)", "Softmax", "MatMul (context)"),
}
#: Epilogue attributes of a fused node (``fuse-epilogues``, ``fuse-add-*``,
#: ``fuse-matmul-transpose``), and the op each one took in.
EPILOGUE_ATTRS = (("perm_a", "Transpose"), ("perm_b", "Transpose"), ("fused_scale", "Mul"),
                  ("fused_add", "Add"), ("fused_relu", "Relu"), ("perm_y", "Transpose"))


def fused_ops(op: str, domain: str, attrs: dict, name: str = "", inputs: int = 0) -> list[str]:
    """The ops a node stands for besides its own (empty: it fused nothing), from the
    attributes and names the fusion passes give it."""
    out: list[str] = []
    if op == "ElementwiseChain":
        out = [str(step[0]) for step in attrs.get("steps", [])]
    elif domain == "aircc" and op in FUSED_OPS:
        out = list(FUSED_OPS[op])
        mask = (op == "Attention" and inputs > 3) or (op == "SoftmaxMatMul" and inputs > 2)
        if mask:
            out.insert(out.index("Softmax"), "Add (mask)")
    elif op == "Gelu" and name.endswith("/gelu"):
        out = ["Div", "Erf", "Add", "Mul", "Mul"]          # fuse-gelu: the exported erf form
    for key, what in EPILOGUE_ATTRS:
        if attrs.get(key) is not None and attrs.get(key) != 0:
            out.append(what)
    act = attrs.get("fused_activation")
    if isinstance(act, dict) and act.get("op"):
        out.append(str(act["op"]))
    return out


@dataclass
class ViewNode:
    """One node of the picture: an op, a copy, a jump, or a stream's start or end."""

    id: str
    kind: str
    name: str
    op: str = ""
    domain: str = ""
    version: int = 0
    stream: int | None = None
    impl: Impl = Impl.NATIVE
    """Native, or the fallback (onnx's reference implementation)."""
    fused: list[str] = field(default_factory=list)
    backend: str = ""
    """The kernel backend a static task's tiling chose ("" where the file does not say)."""
    kernel: str = ""
    """The backend's implementation, as its tiling names it (a oneDNN primitive's, say)."""
    why: str = ""
    """Why the tiling chose another backend's kernel than the target's."""
    group: str = ""
    """The body (of an If, Loop or Scan) the node belongs to; "" for the main graph."""
    channels_last: bool = False
    detail: str = ""
    """Its outputs' types, where the file has them."""


@dataclass
class ViewEdge:
    """A data dependency, an event (record -> wait), stream order, a jump or a body."""

    src: str
    dst: str
    kind: str
    label: str = ""
    event: int | None = None


@dataclass
class GraphView:
    """The compiled graph of one model (one gear's plan for a gear model)."""

    name: str
    mode: str
    target: str
    streams: int
    events: int
    nodes: list[ViewNode] = field(default_factory=list)
    edges: list[ViewEdge] = field(default_factory=list)
    groups: dict[str, str] = field(default_factory=dict)
    """Body groups: id -> label."""
    batch: int | None = None
    """The gear drawn (its batch size); None for a model without gears."""
    gears: list[int] = field(default_factory=list)

    def node(self, node_id: str) -> ViewNode:
        return next(n for n in self.nodes if n.id == node_id)


def graph_view(contract: ModelContract) -> GraphView:
    """The graph of a model: a dynamic model's execute graph, a static model's plan (a
    gear model's largest gear's: the others differ only in their shapes)."""
    if contract.exec_graph is not None:
        return _dynamic(contract, contract.exec_graph)
    return _static(contract, contract.static_plans()[-1])


def _type(o: Operand | None) -> str:
    return "" if o is None else f"{o.dtype}{list(o.shape)}"


def _view(contract: ModelContract, streams: int, events: int) -> GraphView:
    m = contract.model
    gears = contract.gears.sizes if contract.gears is not None else []
    return GraphView(m.name, contract.mode, m.target.name, streams, events, gears=list(gears))


def _static(contract: ModelContract, plan: StaticPlan) -> GraphView:
    view = _view(contract, plan.tasks.streams, plan.tasks.events)
    view.batch = plan.batch
    writes: dict[int, list[Operand]] = {}
    reads: dict[int, list[Operand]] = {}
    record_at: dict[int, str] = {}
    waits: list[tuple[int, str]] = []
    for s, tasks in enumerate(plan.tasks.lists):
        before, pending = "", []
        drawn: list[tuple[str, object]] = []
        for t in tasks:
            if isinstance(t, EventTask):
                if t.kind is TaskKind.EVENT_RECORD:
                    record_at[t.event] = before or _anchor(view, s, "start")
                else:
                    pending.append(t.event)
                continue
            node = _static_node(plan, t, s)
            view.nodes.append(node)
            if isinstance(t, KernelTask):
                writes[t.id] = [o for o in t.outputs if o is not None]
                reads[t.id] = [o for o in t.inputs if o is not None]
            elif isinstance(t, CopyTask):
                (writes if t.kind is TaskKind.MEMCPY_H2D else reads)[t.id] = [t.operand]
            elif t.cond is not None:
                reads[t.id] = [t.cond]
            waits += [(e, node.id) for e in pending]
            pending, before = [], node.id
            drawn.append((node.id, t))
        waits += [(e, _anchor(view, s, "end")) for e in pending]
        _jump_edges(view, drawn)
    for event, dst in waits:
        view.edges.append(ViewEdge(record_at[event], dst, EVENT, f"e{event}", event))
    _buffer_edges(view, plan, writes, reads)
    return view


def _static_node(plan: StaticPlan, t, s: int) -> ViewNode:
    nid = f"t{t.id}"
    if isinstance(t, KernelTask):
        tiling = plan.tiling.entries[t.tiling] if t.tiling < len(plan.tiling.entries) else {}
        return ViewNode(nid, KERNEL, t.node, t.op, t.domain, t.version, s, t.impl,
                        fused_ops(t.op, t.domain, t.attrs, t.node, len(t.inputs)),
                        str(tiling.get("backend", "")), str(tiling.get("impl", "")),
                        str(tiling.get("why", "")),
                        channels_last=bool(t.attrs.get("channels_last")),
                        detail=", ".join(_type(o) for o in t.outputs if o is not None))
    if isinstance(t, CopyTask):
        if t.kind is TaskKind.MEMCPY_H2D:
            return ViewNode(nid, INPUT, plan.inputs[t.binding].name, "MemcpyH2D", "aircc", 1, s,
                            detail=_type(t.operand))
        return ViewNode(nid, OUTPUT, plan.outputs[t.binding].name, "MemcpyD2H", "aircc", 1, s,
                        detail=_type(t.operand))
    return ViewNode(nid, JUMP, f"{t.kind.value} L{t.label}", t.kind.value, "aircc", 1, s)


def _anchor(view: GraphView, stream: int, end: str) -> str:
    nid = f"s{stream}_{end}"
    if not any(n.id == nid for n in view.nodes):
        view.nodes.append(ViewNode(nid, ANCHOR, f"stream {stream} {end}", stream=stream))
    return nid


def _jump_edges(view: GraphView, drawn: list[tuple[str, object]]) -> None:
    """Jumps to their labels, and the fall-through into and out of jump tasks."""
    labels = {t.label: nid for nid, t in drawn
              if isinstance(t, JumpTask) and t.kind is TaskKind.LABEL}
    for k, (nid, t) in enumerate(drawn):
        if not isinstance(t, JumpTask):
            continue
        if t.kind in (TaskKind.GOTO, TaskKind.SWITCH):
            view.edges.append(ViewEdge(nid, labels[t.label], BRANCH,
                                       "false" if t.kind is TaskKind.SWITCH else "goto"))
        if k > 0 and not isinstance(drawn[k - 1][1], JumpTask):   # a jump draws its own
            view.edges.append(ViewEdge(drawn[k - 1][0], nid, ORDER))
        if k + 1 < len(drawn) and t.kind is not TaskKind.GOTO:
            view.edges.append(ViewEdge(nid, drawn[k + 1][0], ORDER,
                                       "true" if t.kind is TaskKind.SWITCH else ""))


def _overlap(a: Operand, b: Operand) -> bool:
    return a.region is b.region and a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes


def _contains(a: Operand, b: Operand) -> bool:
    return a.offset <= b.offset and b.offset + b.nbytes <= a.offset + a.nbytes


def _inside(o: Operand, b: BufferRecord) -> bool:
    return o.region is Region.ARENA and b.offset <= o.offset < b.offset + max(b.size, 1)


def _buffer_edges(view: GraphView, plan: StaticPlan, writes: dict, reads: dict) -> None:
    """A data edge from the writer of the bytes each operand reads: of the writers of its
    buffer that wrote them, the one whose output holds the operand most tightly (a Concat
    part's producer for a part, the Concat for the whole; of views in place, the last
    before the reader, task ids being in program order), else every one that wrote some.
    Labelled with the value: an alias's name for a part, an input's name for a feed's copy."""
    mp = plan.memory_plan
    base = {b.name: b.offset for b in mp.buffers}
    alias_at: dict[int, str] = {}
    for a in mp.aliases:
        root, off = a.of, a.offset
        for _ in range(len(mp.aliases) + 1):
            if root in base:
                alias_at.setdefault(base[root] + off, a.name)
                break
            up = next((x for x in mp.aliases if x.name == root), None)
            if up is None:
                break
            root, off = up.of, off + up.offset
    nodes = {n.id: n for n in view.nodes}
    seen: set[tuple[str, str, str]] = set()
    for b in mp.buffers:
        written = [(w, o) for w in b.writers for o in writes.get(w, []) if _inside(o, b)]
        for r in b.readers:
            for i in (x for x in reads.get(r, []) if _inside(x, b)):
                found = [(w, o) for w, o in written if w != r and _overlap(o, i)]
                whole = [(w, o) for w, o in found if _contains(o, i)]
                if whole:
                    tight = min(o.nbytes for _, o in whole)
                    found = [(w, o) for w, o in whole if o.nbytes == tight]
                    earlier = [w for w, _ in found if w < r]
                    if earlier:                 # views in place: the last to write before r
                        found = [(w, o) for w, o in found if w == max(earlier)]
                for w, o in found:
                    src = nodes[f"t{w}"]
                    label = (src.name if src.kind == INPUT else
                             alias_at[o.offset] if o.offset in alias_at and o.nbytes < b.size
                             else b.name)
                    key = (src.id, f"t{r}", label)
                    if key not in seen:
                        seen.add(key)
                        view.edges.append(ViewEdge(src.id, f"t{r}", DATA, label))


K = HostKernelKind
#: Host kernels that put their node's work on a stream.
_ON_STREAM = (K.LAUNCH, K.MEMCPY_H2D, K.MEMCPY_D2H, K.CONTROL)


def _dynamic(contract: ModelContract, eg: ExecGraphSection) -> GraphView:
    view = _view(contract, eg.streams, eg.events)
    outputs = [o.name for o in contract.model.outputs]
    for i, n in enumerate(eg.nodes):
        nid, binding = f"n{i}", n.attrs.get("binding")
        t = eg.values.get(n.outputs[0]) if n.outputs else None
        detail = f"{t.dtype}{list(t.shape) if t.shape is not None else '[*]'}" if t else ""
        if n.op == "MemcpyH2D" and n.domain == "aircc":
            kind, name = (INPUT, n.inputs[0]) if binding is not None else (COPY, n.inputs[0])
        elif n.op == "MemcpyD2H" and n.domain == "aircc":
            kind, name = OUTPUT, outputs[binding] if binding is not None else n.inputs[0]
        else:
            kind, name = (HOST if n.placement is Placement.HOST else KERNEL), n.name
        view.nodes.append(ViewNode(nid, kind, name, n.op, n.domain, n.version, n.stream,
                                   n.impl, fused_ops(n.op, n.domain, n.attrs, n.name,
                                                           len(n.inputs)),
                                   channels_last=bool(n.attrs.get("channels_last")),
                                   detail=detail))
    record_at: dict[int, str] = {}
    waits: list[tuple[int, str]] = []
    _walk_body(view, eg, eg.kernels, "", record_at, waits)
    for event, dst in waits:
        view.edges.append(ViewEdge(record_at[event], dst, EVENT, f"e{event}", event))
    made = {o: view.nodes[i] for i, n in enumerate(eg.nodes) for o in n.outputs if o}
    for i, n in enumerate(eg.nodes):
        for v in dict.fromkeys(x for x in n.inputs if x in made):
            src = made[v]
            label = src.name if src.kind in (INPUT, COPY) else v
            view.edges.append(ViewEdge(src.id, f"n{i}", DATA, label))
    return view


def _walk_body(view: GraphView, eg: ExecGraphSection, kernels: list, group: str,
               record_at: dict[int, str], waits: list[tuple[int, str]]) -> None:
    """Groups, events and body edges of one kernel list (and, recursively, its bodies)."""
    last: dict[int, str] = {}
    pending: dict[int, list[int]] = {}
    for k in kernels:
        if k.node is not None:
            view.nodes[k.node].group = view.nodes[k.node].group or group
        if k.kind is K.EVENT_RECORD:
            record_at[k.event] = last.get(k.stream) or _anchor(view, k.stream, "start")
        elif k.kind is K.EVENT_WAIT:
            pending.setdefault(k.stream, []).append(k.event)
        elif k.kind in _ON_STREAM and k.node is not None and k.stream is not None:
            nid = f"n{k.node}"
            waits += [(e, nid) for e in pending.pop(k.stream, [])]
            last[k.stream] = nid
        for attr, body in (k.bodies or {}).items():
            gid = f"n{k.node}_{attr}"
            view.groups[gid] = f"{eg.nodes[k.node].name}: {attr}"
            _walk_body(view, eg, body.kernels, gid, record_at, waits)
            first = _first_node(body)
            if first is not None:
                view.edges.append(ViewEdge(f"n{k.node}", f"n{first}", BODY, attr))
    for stream, events in pending.items():
        waits += [(e, _anchor(view, stream, "end")) for e in events]


def _first_node(body: Body) -> int | None:
    return next((k.node for k in body.kernels if k.node is not None), None)

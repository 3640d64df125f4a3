"""Static lowering of If, Loop and Scan into device-side control tasks.

As NPU task models do, control flow stays on the device, so a model with an
If or a Loop still runs with one host submission: each body gets its own
streams and events (the same data-flow analysis as the main graph), and the
body's nodes are spliced into the task lists between control tasks::

    Loop (home stream h, body streams B):
      h: LoopInit                        iteration, condition, trip, carried
      all: label HEAD
      h: LoopCheck -> flag; record E_t   (one event per body stream t)
      t: wait E_t
      all: switch flag -> EXIT           (stream switch on a device value)
      ... body tasks on h and B, with their own events ...
      t: record F_t;  h: wait F_t        (every stream is done with the iteration)
      h: LoopUpdate                      carried <- body results, iteration += 1
      all: goto HEAD
      all: label EXIT
      h: LoopFinish                      loop results <- carried

If is a switch on its condition with the else branch behind a label (a branch that
cannot run with the shapes compiled for is one ``BranchFail`` task); Scan is
a loop over the scan length with ScanSlice / ScanUpdate around the body.
Every iteration ends with all body streams joined on h, so buffers inside a
body may be reused along one iteration's happens-before.  Values from outside
that a body reads stay live until the whole construct ends (``spans``).
"""
from __future__ import annotations

from aircc.errors import CompileOptionError
from aircc.ops import Trait, device, has_trait

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType, device_node
from ..passes.base import compile_pass
from ..passes.control_flow import region
from ..schedule.events import insert_events
from ..schedule.streams import assign_streams

SCALAR_I64 = TensorType("int64", ())
SCALAR_BOOL = TensorType("bool", ())


def static_control_flow_problem(graph: Graph) -> str | None:
    """Why static mode cannot lower this graph's control flow, or None if it can."""
    for node in graph.walk():
        if not has_trait(node.op, Trait.CONTROL_FLOW, node.domain):
            continue
        if node.op == "Loop":
            body = region(node, "body")
            if len(body.outputs) > 1 + len(node.inputs) - 2:
                return (f"node '{node.name}' (Loop) has scan outputs, whose length is only "
                        f"known at run time")
        if node.op == "Scan" and node.version < 9:
            return f"node '{node.name}' (Scan-{node.version}) has batch semantics"
    return None


class _Expander:
    def __init__(self, graph: Graph, ctx: CompileContext):
        self.graph = graph
        self.ctx = ctx
        self.streams = graph.meta.get("streams", 1)
        self.events = graph.meta.get("events", 0)
        self.labels = 0
        self.spans: list[tuple[str, str]] = []

    # ------------------------------------------------------------ helpers
    def node(self, op: str, inputs, outputs, stream: int, name: str, **attrs) -> Node:
        return device_node(op, inputs, outputs, attrs, name, stream)

    def label(self) -> int:
        self.labels += 1
        return self.labels - 1

    def sync(self, src: int, dst: int, name: str) -> tuple[Node, Node]:
        e = self.events
        self.events += 1
        attrs = {"event": e, "src": name, "dst": name}
        return (device_node(device.EVENT_RECORD, [], [], attrs, f"record_e{e}", src),
                device_node(device.EVENT_WAIT, [], [], attrs, f"wait_e{e}", dst))

    def fan_out(self, h: int, others: list[int], name: str) -> list[Node]:
        pairs = [self.sync(h, t, name) for t in others]
        return [r for r, _ in pairs] + [w for _, w in pairs]

    def fan_in(self, h: int, others: list[int], name: str) -> list[Node]:
        pairs = [self.sync(t, h, name) for t in others]
        return [r for r, _ in pairs] + [w for _, w in pairs]

    def type(self, name: str, t: TensorType) -> None:
        self.graph.types[name] = t

    # ------------------------------------------------------------ bodies
    def body(self, body: Graph, h: int) -> list[Node]:
        """Schedule a body on h plus fresh streams; returns its expanded nodes."""
        insert_events(assign_streams(body, self.ctx), self.ctx)
        mapping = {0: h}
        for n in body.nodes:
            s = n.meta["stream"]
            if s not in mapping:
                mapping[s] = self.streams
                self.streams += 1
        for n in body.nodes:
            n.meta["stream"] = mapping[n.meta["stream"]]
            if n.domain == device.DOMAIN and n.op in device.SYNC_OPS:
                n.attrs["event"] += self.events
                n.name = f"{n.name}_{body.name}_{self.events}"
        self.events += body.meta.get("events", 0)
        self.graph.types.update(body.types)
        self.graph.constants.update(body.constants)
        return self.expand(body.nodes)

    def expand(self, nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        lower = {"If": self.lower_if, "Loop": self.lower_loop, "Scan": self.lower_scan}
        for n in nodes:
            if has_trait(n.op, Trait.CONTROL_FLOW, n.domain):
                out.extend(lower[n.op](n))
            else:
                out.append(n)
        return out

    @staticmethod
    def streams_of(nodes: list[Node], h: int) -> list[int]:
        return sorted({n.meta["stream"] for n in nodes} - {h})

    # ------------------------------------------------------------ If
    def lower_if(self, c: Node) -> list[Node]:
        h, name = c.meta["stream"], c.name
        then_b, else_b = region(c, "then_branch"), region(c, "else_branch")
        dead = c.meta.get("infeasible_branch")
        then_nodes, else_nodes = (
            [self.node("BranchFail", [], [], h, f"{name}#{attr.split('_')[0]}_fail",
                       message=c.meta["infeasible_reason"])] if attr == dead else self.body(b, h)
            for attr, b in (("then_branch", then_b), ("else_branch", else_b)))
        others = self.streams_of(then_nodes + else_nodes, h)
        every = [h, *others]
        else_l, end_l = self.label(), self.label()
        seq = [self.node("IfInit", [], c.outputs, h, f"{name}#init")]
        seq += self.fan_out(h, others, name)
        seq += [self.node(device.STREAM_SWITCH, [c.inputs[0]], [], s, f"{name}#switch{s}", label=else_l)
                for s in every]
        for branch, nodes, tag in ((then_b, then_nodes, "then"), (else_b, else_nodes, "else")):
            if tag == "else":
                seq += [self.node(device.LABEL, [], [], s, f"{name}#else{s}", label=else_l) for s in every]
            seq += nodes
            seq += self.fan_in(h, self.streams_of(nodes, h), name)
            if f"{tag}_branch" != dead:          # a dead branch's task fails the run first
                seq.append(self.node("BranchOut", [*branch.outputs, *c.outputs], [], h,
                                     f"{name}#{tag}_out"))
            if tag == "then":
                seq += [self.node(device.GOTO, [], [], s, f"{name}#goto{s}", label=end_l) for s in every]
        seq += [self.node(device.LABEL, [], [], s, f"{name}#end{s}", label=end_l) for s in every]
        self.spans.append((seq[0].name, seq[-1].name))
        return seq

    # ------------------------------------------------------------ Loop and Scan
    def _loop(self, c: Node, init: Node, before_body: list[Node], body_nodes: list[Node],
              update: Node, finish: Node, flag_inputs: list[str]) -> list[Node]:
        h, name = c.meta["stream"], c.name
        others = self.streams_of(body_nodes + before_body, h)
        every = [h, *others]
        head, exit_ = self.label(), self.label()
        flag = f"{name}#flag"
        self.type(flag, SCALAR_BOOL)
        seq = [init]
        seq += [self.node(device.LABEL, [], [], s, f"{name}#head{s}", label=head) for s in every]
        seq.append(self.node("LoopCheck", flag_inputs, [flag], h, f"{name}#check"))
        seq += before_body          # on h, before the body streams are let go
        seq += self.fan_out(h, others, name)
        seq += [self.node(device.STREAM_SWITCH, [flag], [], s, f"{name}#switch{s}", label=exit_)
                for s in every]
        seq += body_nodes
        seq += self.fan_in(h, self.streams_of(body_nodes, h), name)
        seq.append(update)
        seq += [self.node(device.GOTO, [], [], s, f"{name}#goto{s}", label=head) for s in every]
        seq += [self.node(device.LABEL, [], [], s, f"{name}#exit{s}", label=exit_) for s in every]
        seq.append(finish)
        self.spans.append((seq[0].name, seq[-1].name))
        return seq

    def lower_loop(self, c: Node) -> list[Node]:
        h, name = c.meta["stream"], c.name
        body = region(c, "body")
        n = len(c.inputs) - 2
        it, cond, carried = body.inputs[0], body.inputs[1], body.inputs[2:]
        trip = f"{name}#trip"
        for v, t in ((it, SCALAR_I64), (cond, SCALAR_BOOL), (trip, SCALAR_I64)):
            self.type(v, t)
        init = self.node("LoopInit", c.inputs[:2] + c.inputs[2:], [it, cond, trip, *carried], h,
                         f"{name}#init")
        if len(init.inputs) < 2:
            init.inputs += [""] * (2 - len(init.inputs))
        body_nodes = self.body(body, h)
        update = self.node("LoopUpdate", [it, cond, *carried, *body.outputs[:1 + n]], [], h,
                           f"{name}#update", carried=n)
        finish = self.node("LoopFinish", carried, c.outputs[:n], h, f"{name}#finish")
        return self._loop(c, init, [], body_nodes, update, finish, [it, cond, trip])

    def lower_scan(self, c: Node) -> list[Node]:
        h, name = c.meta["stream"], c.name
        body = region(c, "body")
        m = int(c.attrs["num_scan_inputs"])
        n = len(c.inputs) - m
        k = len(body.outputs) - n
        scan_in = c.inputs[n:]
        in_axes = [a % len(self.graph.types[x].shape)
                   for a, x in zip(c.attrs.get("scan_input_axes") or [0] * m, scan_in)]
        out_axes = [a % len(self.graph.types[o].shape)
                    for a, o in zip(c.attrs.get("scan_output_axes") or [0] * k, c.outputs[n:])]
        length = int(self.graph.types[scan_in[0]].shape[in_axes[0]]) if m else 0
        it, trip = f"{name}#iteration", f"{name}#trip"
        self.type(it, SCALAR_I64)
        self.type(trip, SCALAR_I64)
        states, slices = body.inputs[:n], body.inputs[n:]
        init = self.node("ScanInit", c.inputs[:n], [it, trip, *states, *slices, *c.outputs[n:]], h,
                         f"{name}#init", length=length)
        slicer = self.node("ScanSlice", [it, *scan_in, *slices], [], h, f"{name}#slice",
                           length=length, axes=in_axes,
                           directions=list(c.attrs.get("scan_input_directions") or [0] * m))
        body_nodes = self.body(body, h)
        update = self.node("ScanUpdate", [it, *states, *c.outputs[n:], *body.outputs], [], h,
                           f"{name}#update", states=n, scans=k, length=length, axes=out_axes,
                           directions=list(c.attrs.get("scan_output_directions") or [0] * k))
        finish = self.node("LoopFinish", states, c.outputs[:n], h, f"{name}#finish")
        return self._loop(c, init, [slicer], body_nodes, update, finish, [it, "", trip])


@compile_pass("expand-control-flow")
def expand_control_flow(graph: Graph, ctx: CompileContext) -> Graph:
    """Splice If/Loop/Scan bodies and their control tasks into the task order."""
    problem = static_control_flow_problem(graph)
    if problem:
        raise CompileOptionError(f"static mode cannot lower this model: {problem}; "
                                 f"compile it with --mode dynamic")
    x = _Expander(graph, ctx)
    graph.nodes = x.expand(graph.nodes)
    graph.meta["streams"], graph.meta["events"] = x.streams, x.events
    graph.meta["spans"] = x.spans
    return graph

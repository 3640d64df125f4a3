"""The order of a dynamic model's host kernels: each node's work in its own order.

The runtime does, per device node, InferShape (its output types), Tiling (from those
types), Alloc (of its outputs) and Launch (reading its inputs, writing its outputs);
a MemcpyH2D node is InferShape, Alloc, copy.  A Free gives back only what was
allocated (by an Alloc, or by the control kernel whose results they are).  Every event
a kernel waits on is recorded by some kernel, and every event of the model is recorded
(so ``events`` is at most the number of recording kernels).

Values flow forward: a node's InferShape, HostCompute or Control reads only values
typed before it (the graph's inputs, the weights, its body's inputs, outputs of nodes
typed earlier), and a body's outputs are values it makes or is given, as many as its op
says; a Launch or a copy reads and writes only values whose data exist there (allocated
and not yet freed, made on the host, or weights); a MemcpyH2D copies
a host value into its node's allocated output; copy kernels run copy nodes
(:data:`COPY_NODES`), and only they do.  Checked before anything runs, so that a forged
order is a ModelFormatError naming the kernel, not a KeyError in the middle of a run.
"""
from __future__ import annotations

from collections.abc import Iterable

from .checks import Checker
from .exec_graph import Body, ExecGraphSection, ExecNode, HostKernel
from .kinds import HostKernelKind as K

#: What must have happened to a node, in its body, before each kind of host kernel.
NEEDS = {K.TILING: (K.INFER_SHAPE,), K.ALLOC: (K.INFER_SHAPE,),
         K.LAUNCH: (K.TILING, K.ALLOC), K.MEMCPY_H2D: (K.ALLOC,)}
#: The copy nodes (domain ``aircc``) and the host kernel that runs each.
COPY_DOMAIN = "aircc"
COPY_NODES = {"MemcpyH2D": K.MEMCPY_H2D, "MemcpyD2H": K.MEMCPY_D2H}
#: Host kernels that read their node's inputs' types, and those that touch their data.
TYPE_READERS = frozenset({K.INFER_SHAPE, K.HOST_COMPUTE, K.CONTROL})
DATA_READERS = frozenset({K.LAUNCH, K.MEMCPY_H2D, K.MEMCPY_D2H})


def copy_kind(node: ExecNode) -> K | None:
    """The host kernel that runs ``node`` if it is a copy node, else None."""
    return COPY_NODES.get(node.op) if node.domain == COPY_DOMAIN else None


def _check_copy(k: HostKernel, node: ExecNode, w: str, c: Checker) -> None:
    """Copy kernels run copy nodes of one input (and one output, H2D), and only they do."""
    copy = copy_kind(node)
    if k.kind in (K.MEMCPY_H2D, K.MEMCPY_D2H) and copy is not k.kind:
        c.fail(f"{w}.node", f"is {k.kind.value} of node {k.node} ('{node.name}', op {node.op}), "
                            f"which is not a {'MemcpyH2D' if k.kind is K.MEMCPY_H2D else 'MemcpyD2H'} node")
    if copy is not None and k.kind in (K.TILING, K.LAUNCH, K.HOST_COMPUTE):
        c.fail(f"{w}.node", f"is {k.kind.value} of node {k.node} ('{node.name}'), a copy node "
                            f"(run by {copy.value} only)")
    outs = 1 if copy is K.MEMCPY_H2D else 0
    if copy is not None and (len(node.inputs) != 1 or len(node.outputs) != outs
                             or not all(node.inputs + node.outputs)):
        c.fail(f"{w}.node", f"is node {k.node} ('{node.name}', {node.op}) with inputs "
                            f"{node.inputs} and outputs {node.outputs}: a copy reads one value "
                            f"and writes {outs}")


def _check_bodies(k: HostKernel, node: ExecNode, w: str, c: Checker) -> None:
    """Each body has the inputs and outputs onnx gives its op: an If's branches none and the
    node's outputs; a Loop's body the node's inputs (iteration, condition, state) and one
    output more (the condition); a Scan's body the node's inputs (but opset 8's sequence
    lengths) and outputs."""
    n_in, n_out = len(node.inputs), len(node.outputs)
    scan_in = n_in - 1 if 0 < node.version < 9 else n_in
    want = {"If": (0, n_out), "Loop": (n_in, n_out + 1), "Scan": (scan_in, n_out)}.get(node.op)
    for name, b in (k.bodies or {}).items():
        if want is not None and not node.domain and (len(b.inputs), len(b.outputs)) != want:
            c.fail(f"{w}.bodies[{name!r}]", f"has {len(b.inputs)} inputs and {len(b.outputs)} "
                                            f"outputs, but the body of {node.op} node "
                                            f"'{node.name}' (with {n_in} inputs and {n_out} "
                                            f"outputs) has {want[0]} and {want[1]}")


class _Scope:
    """A set of names seen through nested bodies: what a body adds or removes stays in it
    (memory in the kernels walked, not in bodies times names)."""

    def __init__(self, outer: "_Scope | None" = None, names: Iterable[str] = ()):
        self.outer, self.added, self.removed = outer, set(names), set()

    def __contains__(self, name: str) -> bool:
        s = self
        while s is not None:
            if name in s.added:
                return True
            if name in s.removed:
                return False
            s = s.outer
        return False

    def add(self, names: Iterable[str]) -> None:
        for n in names:
            self.added.add(n)
            self.removed.discard(n)

    def remove(self, names: Iterable[str]) -> None:
        for n in names:
            self.added.discard(n)
            self.removed.add(n)


def check_host_order(graph: ExecGraphSection, c: Checker, weights: Iterable[str] = ()) -> None:
    """Each node's kernels in order, values used where they exist, every event recorded."""
    recorded: set[int] = set()
    waited: list[tuple[str, int]] = []

    def walk(body: Body, where: str, outer: tuple[_Scope, ...]) -> None:
        done: dict[int, set[K]] = {}
        allocated, typed, data, host = (_Scope(s, body.inputs if n else ()) for n, s in enumerate(outer))
        for i, k in enumerate(body.kernels):
            w = f"{where}kernels[{i}]"
            if k.kind is K.EVENT_RECORD:
                recorded.add(k.event)
            elif k.kind is K.EVENT_WAIT:
                waited.append((w, k.event))
            node = graph.nodes[k.node] if k.node is not None else None
            if node is not None:
                missing = [n.value for n in NEEDS.get(k.kind, ()) if n not in done.get(k.node, ())]
                if missing:
                    c.fail(w, f"is {k.kind.value} of node {k.node} ('{node.name}') "
                              f"before its {' and '.join(missing)}")
                done.setdefault(k.node, set()).add(k.kind)
                _check_copy(k, node, w, c)
                outs = [o for o in node.outputs if o]
                ins = [v for v in node.inputs if v]
                if k.kind in TYPE_READERS:
                    absent = [v for v in ins if v not in typed]
                    if absent:
                        c.fail(w, f"is {k.kind.value} of node {k.node} ('{node.name}'), which "
                                  f"reads {absent} before anything makes them")
                    typed.add(outs)
                if k.kind in DATA_READERS:
                    need = [(v, host if k.kind is K.MEMCPY_H2D else data) for v in ins]
                    need += [(v, data) for v in outs]
                    absent = [v for v, have in need if v not in have]
                    if absent:
                        c.fail(w, f"is {k.kind.value} of node {k.node} ('{node.name}'), whose "
                                  f"{absent} hold no data there (not allocated, or freed)")
                if k.kind is K.HOST_COMPUTE:
                    data.add(outs)
                    host.add(outs)
            if k.kind is K.ALLOC:
                outputs = [o for o in node.outputs if o]
                if k.values != outputs:
                    c.fail(f"{w}.values", f"are {k.values}, but node {k.node} ('{node.name}') "
                                          f"writes {outputs}")
                allocated.add(k.values)
                data.add(k.values)
            elif k.kind is K.FREE:
                stray = [v for v in k.values if v not in allocated]
                if stray:
                    c.fail(f"{w}.values", f"free {stray}, which nothing allocated before")
                allocated.remove(k.values)
                data.remove(k.values)
            if k.kind is K.CONTROL:
                _check_bodies(k, node, w, c)
            for name, b in (k.bodies or {}).items():
                walk(b, f"{w}.bodies[{name!r}].", (allocated, typed, data, host))
            if k.kind is K.CONTROL:          # the control flow makes its results itself
                outs = [o for o in node.outputs if o]
                for scope in (allocated, data, host):
                    scope.add(outs)
        if where:                            # a body's results: made by it, or given to it
            absent = [v for v in body.outputs if v not in typed or (v not in data and v not in host)]
            if absent:
                c.fail(f"{where}outputs", f"name {absent[:4]}, which the body neither makes nor "
                                          f"is given")

    known = set(graph.inputs) | set(weights)
    walk(Body(graph.inputs, graph.outputs, graph.kernels, graph.device_values), "",
         (_Scope(), _Scope(None, known), _Scope(None, known), _Scope(None, graph.inputs)))
    for w, e in waited:
        if e not in recorded:
            c.fail(f"{w}.event", f"waits on event {e}, which no kernel records")
    if len(recorded) < graph.events:      # recorded is inside [0, events): some event is not
        first = next(e for e in range(graph.events) if e not in recorded)
        c.fail("events", f"is {graph.events}, but no kernel records event {first} "
                         f"({len(recorded)} events are recorded)")

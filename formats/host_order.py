"""The order of a dynamic model's host kernels: each node's work in its own order.

The runtime does, per device node, InferShape (its output types), Tiling (from those
types), Alloc (of its outputs) and Launch (reading its inputs, writing its outputs);
a MemcpyH2D node is InferShape, Alloc, copy.  A Free gives back only what was
allocated (by an Alloc, or by the control kernel whose results they are).  Every event
a kernel waits on is recorded by some kernel, and every
event of the model is recorded.  Checked before anything runs, so that a forged
order is a ModelFormatError naming the kernel, not a KeyError in the middle of a run.
"""
from __future__ import annotations

from .checks import Checker
from .exec_graph import Body, ExecGraphSection
from .kinds import HostKernelKind as K

#: What must have happened to a node, in its body, before each kind of host kernel.
NEEDS = {K.TILING: (K.INFER_SHAPE,), K.ALLOC: (K.INFER_SHAPE,),
         K.LAUNCH: (K.TILING, K.ALLOC), K.MEMCPY_H2D: (K.ALLOC,)}


def check_host_order(graph: ExecGraphSection, c: Checker) -> None:
    recorded: set[int] = set()
    waited: list[tuple[str, int]] = []

    def walk(body: Body, where: str, allocated: set[str]) -> None:
        done: dict[int, set[K]] = {}
        allocated = set(allocated)
        for i, k in enumerate(body.kernels):
            w = f"{where}kernels[{i}]"
            if k.kind is K.EVENT_RECORD:
                recorded.add(k.event)
            elif k.kind is K.EVENT_WAIT:
                waited.append((w, k.event))
            if k.node is not None:
                missing = [n.value for n in NEEDS.get(k.kind, ()) if n not in done.get(k.node, ())]
                if missing:
                    c.fail(w, f"is {k.kind.value} of node {k.node} ('{graph.nodes[k.node].name}') "
                              f"before its {' and '.join(missing)}")
                done.setdefault(k.node, set()).add(k.kind)
            if k.kind is K.ALLOC:
                node = graph.nodes[k.node]
                outputs = [o for o in node.outputs if o]
                if k.values != outputs:
                    c.fail(f"{w}.values", f"are {k.values}, but node {k.node} ('{node.name}') "
                                          f"writes {outputs}")
                allocated.update(k.values)
            elif k.kind is K.FREE:
                stray = [v for v in k.values if v not in allocated]
                if stray:
                    c.fail(f"{w}.values", f"free {stray}, which nothing allocated before")
                allocated.difference_update(k.values)
            for name, b in (k.bodies or {}).items():
                walk(b, f"{w}.bodies[{name!r}].", allocated)
            if k.kind is K.CONTROL:          # the control flow makes its results itself
                allocated.update(o for o in graph.nodes[k.node].outputs if o)

    walk(Body(graph.inputs, graph.outputs, graph.kernels, graph.device_values), "", set())
    for w, e in waited:
        if e not in recorded:
            c.fail(f"{w}.event", f"waits on event {e}, which no kernel records")
    unrecorded = sorted(set(range(graph.events)) - recorded)
    if unrecorded:
        c.fail("events", f"is {graph.events}, but no kernel records event {unrecorded[0]}")



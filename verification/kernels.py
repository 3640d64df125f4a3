"""The ONNX graph as nodes in order, and the compiled model's kernels mapped back to it.

The compiler keeps the user's names: a node it leaves alone keeps its ONNX name, a value
its ONNX name (a copy or a re-laid-out form adds a suffix: ``x.dev``, ``y.nhwc``), and a
fused kernel takes the name of its first node (``mul1/chain``).  So the ONNX nodes a
kernel runs are those between the values it reads and the values it writes.
"""
from __future__ import annotations

from dataclasses import dataclass

import onnx

from aircc.compiler.assemble import CompiledModel
from aircc.formats.kinds import Placement
from aircc.ops import Trait, has_trait, kernel_backend, resolve_target
from aircc.ops.catalog import kernel_source


@dataclass(frozen=True)
class OnnxNode:
    """A node of the ONNX model's main graph, under the name the compiler gives it."""

    index: int
    name: str
    op: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


class OnnxGraph:
    """The main graph of an ONNX model: its nodes in order (named as the importer names
    them: their own name, else ``<op>_<index>``), the producer of each value."""

    def __init__(self, model: onnx.ModelProto):
        g = model.graph
        self.weights = {t.name for t in g.initializer}
        self.inputs = [i.name for i in g.input if i.name not in self.weights]
        self.outputs = [o.name for o in g.output]
        self.nodes: list[OnnxNode] = []
        taken: set[str] = set()
        for k, n in enumerate(g.node):
            base = n.name or f"{n.op_type}_{k}"
            name, j = base, 1
            while name in taken:
                name, j = f"{base}_{j}", j + 1
            taken.add(name)
            self.nodes.append(OnnxNode(k, name, n.op_type, n.domain, tuple(n.input),
                                       tuple(n.output)))
        self.producer = {o: n for n in self.nodes for o in n.outputs if o}
        self.by_name = {n.name: n for n in self.nodes}
        self.variable = self._variable_nodes()

    def _variable_nodes(self) -> set[str]:
        """Nodes that depend on a graph input (the others are constant: folded away)."""
        live, out = set(self.inputs), set()
        for n in self.nodes:
            if any(i in live for i in n.inputs):
                out.add(n.name)
                live.update(n.outputs)
        return out

    def source(self, value: str) -> str:
        """Where ``value`` comes from: ``input``, ``initializer`` or ``node 'n'``."""
        if value in self.weights:
            return "initializer"
        if value in self.producer:
            return f"node '{self.producer[value].name}'"
        return "input"

    def value_of(self, compiled_value: str) -> str | None:
        """The ONNX value a compiled value stands for (``y.nhwc`` -> ``y``); None: none."""
        name = compiled_value
        while True:
            if name in self.producer or name in self.weights or name in self.inputs:
                return name
            cut = max(name.rfind("."), name.rfind("/"))
            if cut <= 0:
                return None
            name = name[:cut]

    def between(self, reads: list[str], writes: list[str]) -> list[OnnxNode]:
        """The (variable) ONNX nodes that turn the values ``reads`` into ``writes``, in order."""
        stop, seen, stack = set(reads), set(), list(writes)
        while stack:
            value = stack.pop()
            node = self.producer.get(value)
            if value in stop or node is None or node.name in seen or node.name not in self.variable:
                continue
            seen.add(node.name)
            stack.extend(i for i in node.inputs if i)
        return [n for n in self.nodes if n.name in seen]


@dataclass(frozen=True)
class Kernel:
    """A kernel of a compiled model: its node's name, op and domain, the backend that runs
    it (and the implementation, where the tiling recorded one), and the ONNX nodes it runs."""

    name: str
    op: str
    domain: str
    backend: str
    impl: str | None
    onnx_nodes: tuple[str, ...]
    reads: tuple[str, ...]
    """The ONNX values it reads (inputs and weights included)."""
    writes: tuple[str, ...]
    """The ONNX values it writes."""


def kernels(compiled: CompiledModel, graph: OnnxGraph) -> list[Kernel]:
    """Every kernel of ``compiled``'s main graph in order, mapped back to ``graph``."""
    backend = kernel_backend(resolve_target(compiled.report.target).backend)
    out = []
    for n in compiled.graph.nodes:
        if has_trait(n.op, Trait.DEVICE_TASK, n.domain):
            continue
        reads = [v for i in n.inputs if i and (v := graph.value_of(i)) is not None]
        writes = [v for o in n.outputs if o and (v := graph.value_of(o)) is not None]
        covered = tuple(m.name for m in graph.between(reads, writes))
        tiling = n.meta.get("tiling") or {}
        name = tiling.get("backend") or kernel_source(backend, n.op, n.version, n.domain,
                                                      n.on_fallback) or ""
        if n.placement is Placement.HOST:
            name = "host"
        out.append(Kernel(n.name, n.op, n.domain, name, tiling.get("impl"), covered,
                          tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes))))
    return out


def kernel_running(node: str, found: list[Kernel]) -> Kernel | None:
    """The kernel that runs ONNX node ``node`` (its own, or a fused one); None: no kernel
    does (folded into a constant, or removed)."""
    return next((k for k in found if node in k.onnx_nodes), None) or \
        next((k for k in found if k.name == node or k.name.startswith(node + "/")), None)


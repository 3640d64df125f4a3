"""The AIR IR: a typed SSA graph of ops.

Values are named; every value is defined exactly once (a graph input, a
constant, or one output of one node).  A value's type is a dtype plus a shape
whose dims are ints or symbols (strings).  Nodes keep their ops' attributes in
``attrs`` and the results of passes (stream, events, ...) in ``meta``.
Subgraph bodies (If/Loop/Scan) live in ``Node.regions``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from aircc.formats.kinds import Impl, Placement
from aircc.ops import OpDef, Trait, device, has_trait, node_def
from aircc.ops.types import Dim, TensorType, is_host_only  # noqa: F401  (the IR's types)


@dataclass(eq=False)
class Node:
    """One op application."""

    op: str
    """Op type, e.g. ``Conv``."""
    inputs: list[str]
    """Names of the input values; ``""`` marks an omitted optional input."""
    outputs: list[str]
    """Names of the values this node defines."""
    attrs: dict = field(default_factory=dict)
    """Op attributes as plain Python values (ints, floats, str, lists, ndarrays)."""
    name: str = ""
    """Unique node name (from ONNX, or made up by the importer)."""
    domain: str = ""
    """Op domain; ``""`` is the default ONNX domain."""
    version: int = 0
    """Opset version of ``domain`` this node was imported under."""
    regions: list["Graph"] = field(default_factory=list)
    """Nested bodies of control-flow ops, in the op's attribute order."""
    meta: dict = field(default_factory=dict)
    """Pass results: ``stream``, ``event``, ``task`` index and so on."""

    @property
    def impl(self) -> Impl:
        """Which kernel runs it (``meta["impl"]``): native unless shape inference found that
        the native kernel does not cover this use of its op."""
        return Impl(self.meta.get("impl", Impl.NATIVE))

    @impl.setter
    def impl(self, value: Impl) -> None:
        self.meta["impl"] = Impl(value)

    @property
    def placement(self) -> Placement:
        """Where a dynamic model runs it (``meta["placement"]``, set by ``place-host-ops``):
        the device unless placed on the host."""
        return Placement(self.meta.get("placement", Placement.DEVICE))

    @placement.setter
    def placement(self, value: Placement) -> None:
        self.meta["placement"] = Placement(value)

    @property
    def definition(self) -> OpDef:
        """The op definition it is typed with: the fallback one when :attr:`impl` says so."""
        return node_def(self, self.impl is Impl.FALLBACK)

    @property
    def has_side_effects(self) -> bool:
        """Dead-code elimination must keep it (synchronisation, copies, loop state)."""
        return has_trait(self.op, Trait.SIDE_EFFECT, self.domain)

    @property
    def on_fallback(self) -> bool:
        """Its kernel is the fallback (onnx's reference implementation): the native kernels
        do not cover this use of its op (``meta["impl"]``), or its op has none."""
        return self.impl is Impl.FALLBACK or not self.definition.native

    @property
    def live_regions(self) -> list["Graph"]:
        """Its bodies but an If's branch that cannot run with the shapes compiled for
        (``meta["infeasible_branch"]``, set by shape inference): nothing there is planned."""
        dead = self.meta.get("infeasible_branch")
        return [r for r in self.regions if r.meta.get("attribute") != dead]

    def is_plain(self, op: str) -> bool:
        """A default-domain ``op`` node run by its native kernel: what fusions rewrite."""
        return self.op == op and not self.domain and self.impl is Impl.NATIVE

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.op}, {self.inputs} -> {self.outputs})"


def device_node(op: str, inputs: list[str], outputs: list[str], attrs: dict, name: str,
                stream: int | None = None, **meta) -> Node:
    """A node of the device's own dialect (:mod:`aircc.ops.device`: events, copies, jumps,
    control kernels), on ``stream`` when given."""
    if stream is not None:
        meta["stream"] = stream
    return Node(op, list(inputs), list(outputs), dict(attrs), name=name, domain=device.DOMAIN,
                version=device.VERSION, meta=meta)


@dataclass(eq=False)
class Graph:
    """A region: ordered nodes, typed values, inputs, outputs and constants."""

    name: str = "main"
    nodes: list[Node] = field(default_factory=list)
    """Nodes in a topological order."""
    inputs: list[str] = field(default_factory=list)
    """Runtime inputs (constants are not inputs)."""
    outputs: list[str] = field(default_factory=list)
    types: dict[str, TensorType] = field(default_factory=dict)
    """Type of every value defined in this region."""
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    """Values known at compile time (weights and folded results)."""
    opsets: dict[str, int] = field(default_factory=dict)
    """Opset version per domain of the model this graph came from."""
    meta: dict = field(default_factory=dict)

    # ---------------------------------------------------------- queries
    def producers(self) -> dict[str, Node]:
        """Map each node-defined value to the node that defines it."""
        return {out: n for n in self.nodes for out in n.outputs if out}

    def consumers(self) -> dict[str, list[Node]]:
        """Map each value to the nodes of this region that read it."""
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    users.setdefault(i, []).append(n)
        return users

    def only_reader(self, value: str, users: dict[str, list[Node]]) -> Node | None:
        """The one node that reads ``value`` (``users`` from :meth:`consumers`), if exactly
        one does and it is not a graph output: what a fusion may fold ``value`` into."""
        readers = users.get(value, [])
        if len(readers) != 1 or value in self.outputs:
            return None
        return readers[0]

    def number_readers(self, value: str, users: dict[str, list[Node]]) -> list[Node]:
        """The nodes that read ``value``'s numbers: every reader but those that read only its
        shape (Shape, Size: dynamic graphs keep them)."""
        return [n for n in users.get(value, []) if not has_trait(n.op, Trait.SHAPE_ONLY, n.domain)]

    def adds_read_only_by(self, op: str) -> list[tuple[Node, Node]]:
        """(Add, reader) pairs: a plain two-input Add (native kernel) whose result one
        ``op`` node (of the default domain) reads alone, as an Add fusion wants them."""
        users = self.consumers()
        pairs = []
        for add in self.nodes:
            if not add.is_plain("Add") or len(add.inputs) != 2:
                continue
            reader = self.only_reader(add.outputs[0], users)
            if reader is not None and reader.is_plain(op):
                pairs.append((add, reader))
        return pairs

    def walk(self) -> Iterator[Node]:
        """Every node, nested regions included (pre-order)."""
        for n in self.nodes:
            yield n
            for r in n.regions:
                yield from r.walk()

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r}")

    def type_of(self, value: str) -> TensorType:
        return self.types[value]

    def fresh_name(self, base: str) -> str:
        """A value or node name not used in this graph yet."""
        used = set(self.types) | {n.name for n in self.nodes}
        if base not in used:
            return base
        k = 1
        while f"{base}_{k}" in used:
            k += 1
        return f"{base}_{k}"

"""The op registry: one definition per (domain, op, since-version).

A definition says what the toolchain knows about an op whatever runs it: its
shape rule (the compiler's shape inference and the dynamic runtime's
InferShape use the same one), the inputs whose values decide its output
shapes, its traits, and the engine it runs on.  Kernels are not here: a
kernel backend (:mod:`aircc.ops.backend`) registers kernels, their tiling and
their ``prepare`` hooks against these names.

Define an op with :func:`define` on its shape rule::

    @define("Relu", since=6, traits={Trait.ELEMENTWISE})
    def relu(ctx: InferContext) -> list[TensorType]:
        return [ctx.input_type(0)]

Look definitions up with :func:`aircc.ops.op_def` (:mod:`aircc.ops.lookup`), which
also gives an op no definition covers its fallback definition (onnx's own node shape
inference, :mod:`aircc.ops.fallback`) when the onnx package knows it.
"""
from __future__ import annotations

import importlib
import pkgutil
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Literal, Optional

import numpy as np

from aircc.errors import ShapeInferenceError, UnsupportedVariantError

from .traits import Trait
from .types import TensorType

Engine = Literal["cube", "vector"]
"""``cube``: the op runs on the device's one matrix engine (GEMM-based kernels, which
streams take turns on); ``vector``: the rest, run concurrently."""


@dataclass
class InferContext:
    """What a shape rule sees: input types, attributes, and any input values known."""

    types: list[Optional[TensorType]]
    attrs: dict
    values: list[Optional[np.ndarray]]
    node: str = ""
    op: str = ""
    num_outputs: int = 1
    """How many outputs the node has (trailing optional outputs omitted)."""

    @property
    def num_inputs(self) -> int:
        return len(self.types)

    def has_input(self, i: int) -> bool:
        return i < len(self.types) and self.types[i] is not None

    def input_type(self, i: int) -> TensorType:
        t = self.types[i] if i < len(self.types) else None
        if t is None:
            self.fail(f"input {i} is required")
        return t  # type: ignore[return-value]

    def input_shape(self, i: int) -> tuple:
        t = self.input_type(i)
        if t.shape is None:
            self.fail(f"input {i} has unknown rank")
        return t.shape  # type: ignore[return-value]

    def value(self, i: int) -> Optional[np.ndarray]:
        """The compile-time value of input ``i``, or None when it is only known at run time."""
        return self.values[i] if i < len(self.values) else None

    def sym(self, k) -> str:
        """A fresh symbolic dim name for a dim of this node that cannot be known."""
        return f"{self.node}_d{k}"

    def fail(self, message: str):
        raise ShapeInferenceError(f"node '{self.node}' ({self.op}): {message}")

    def unsupported(self, message: str):
        """The native kernels do not cover this use of the op (the fallback kernel may)."""
        raise UnsupportedVariantError(f"node '{self.node}' ({self.op}): {message}")


ShapeRule = Callable[[InferContext], list[TensorType]]


@dataclass
class OpDef:
    """Everything known about one version range of one op, whatever kernel runs it."""

    name: str
    since: int
    domain: str = ""
    infer: Optional[ShapeRule] = None
    """Shape rule: input types (+ known values) -> output types."""
    value_inputs: tuple[int, ...] = ()
    """Inputs whose values (not only shapes) decide the output shapes."""
    traits: frozenset[Trait] = frozenset()
    engine: Engine = "vector"
    foldable: bool = True
    """Whether constant folding may evaluate this op at compile time."""
    broadcast_inputs: tuple[int, ...] = ()
    """Inputs the op broadcasts against a larger shape of its own (an attention mask):
    an Expand feeding one of them may be dropped."""
    native: bool = True
    """False for the fallback definition (onnx's node shape inference)."""
    doc: str = ""
    run: Optional[Callable] = field(default=None, repr=False)
    """Fallback definitions only: ``run(values, attrs, n_out)`` evaluates the op with
    onnx's reference implementation (host values: sequences, strings)."""

    def has(self, trait: Trait) -> bool:
        return trait in self.traits


_REGISTRY: dict[tuple[str, str], list[OpDef]] = {}
_TRAITS: dict[tuple[str, str], frozenset[Trait]] = {}
#: Memos of lookups every pass makes once per node, dropped when an op is registered.
MEMO: dict = {}
_load_lock = threading.RLock()
_loaded = False
_loading = False


def register_op(definition: OpDef) -> OpDef:
    """Add a definition (kept sorted by ``since`` among the op's versions)."""
    key = (definition.domain, definition.name)
    versions = _REGISTRY.setdefault(key, [])
    if any(d.since == definition.since for d in versions):
        raise ValueError(f"op {definition.domain or 'ai.onnx'}::{definition.name} version "
                         f"{definition.since} is defined twice")
    versions.append(definition)
    versions.sort(key=lambda d: d.since)
    _TRAITS[key] = _TRAITS.get(key, frozenset()) | definition.traits
    MEMO.clear()
    return definition


def define(name: str, since: int = 1, domain: str = "", *, value_inputs: tuple[int, ...] = (),
           traits: Iterable[Trait] = (), engine: Engine = "vector", foldable: bool = True,
           broadcast_inputs: tuple[int, ...] = (), doc: str = "") -> Callable[[ShapeRule], ShapeRule]:
    """Decorator: register the decorated shape rule as op ``name`` from opset ``since``;
    ``doc`` (default: the rule's docstring) says what the op computes."""

    def register(rule: ShapeRule) -> ShapeRule:
        register_op(OpDef(name, since, domain, rule, tuple(value_inputs), frozenset(traits),
                          engine, foldable, tuple(broadcast_inputs),
                          doc=doc or (rule.__doc__ or "").strip()))
        return rule

    return register


def version_at(versions: list, version: int | None):
    """Of ``versions`` (anything with a ``since``, oldest first), the one that applies at
    opset ``version``: the newest ``since`` at or below it, the newest of all for None or 0;
    None when every one is newer."""
    if version is None or version <= 0:
        return versions[-1]
    chosen = None
    for v in versions:
        if v.since <= version:
            chosen = v
    return chosen


def canonical_domain(domain: str) -> str:
    """``ai.onnx`` and ``""`` are the same (default) domain."""
    return "" if domain in ("", "ai.onnx") else domain


_NONE: tuple = ()


def versions_of(name: str, domain: str = "") -> list[OpDef] | tuple:
    """The native definitions of an op, oldest first, as the registry keeps them (do not
    modify); empty when it has none.  Asked once per node by every pass: kept lean."""
    if not _loaded:
        load_definitions()
    if domain == "ai.onnx":
        domain = ""
    return _REGISTRY.get((domain, name), _NONE)


def definitions(name: str, domain: str = "") -> list[OpDef]:
    """Every native definition of an op, oldest first (empty when it has none)."""
    return list(versions_of(name, domain))


def has_trait(op: str, trait: Trait, domain: str = "") -> bool:
    """Whether any version of ``op`` (in ``domain``) has ``trait``."""
    found = MEMO.get((op, trait, domain))
    if found is None:
        if not _loaded:
            load_definitions()
        traits = _TRAITS.get((canonical_domain(domain), op))
        found = MEMO[(op, trait, domain)] = traits is not None and trait in traits
    return found


def ops_with(trait: Trait, domain: str | None = "") -> frozenset[str]:
    """Names of the ops of ``domain`` (every domain: None) that have ``trait``."""
    load_definitions()
    return frozenset(name for (dom, name), traits in _TRAITS.items()
                     if trait in traits and (domain is None or dom == canonical_domain(domain)))


def native_ops() -> list[str]:
    """Every op with a native definition, by name."""
    load_definitions()
    return sorted({name for (_, name) in _REGISTRY})


def user_ops() -> list[str]:
    """Every op with a native definition that a model may use (not ``INTERNAL``), by name."""
    load_definitions()
    return sorted({name for (dom, name) in _REGISTRY
                   if Trait.INTERNAL not in _TRAITS.get((dom, name), ())})


def all_definitions() -> list[OpDef]:
    """Every native definition."""
    load_definitions()
    return [d for versions in _REGISTRY.values() for d in versions]


def load_definitions() -> None:
    """Import the device dialect and every module of :mod:`aircc.ops.defs` once (their
    ``define`` calls run)."""
    global _loaded, _loading
    if _loaded:
        return
    with _load_lock:
        if _loaded or _loading:       # done, or this thread is importing them right now
            return
        _loading = True
        try:
            importlib.import_module(f"{__package__}.device")        # the device's own ops
            defs = importlib.import_module(f"{__package__}.defs")
            for info in pkgutil.iter_modules(defs.__path__):
                importlib.import_module(f"{defs.__name__}.{info.name}")
            _loaded = True
        finally:
            _loading = False

"""TRANSITION: the old one-class-per-op registry, kept while kernel modules move.

An ``@op`` class holds an op's shape rule and its numpy kernel together.  This
shim splits it: the shape rule becomes an :class:`aircc.ops.OpDef` (with the traits
of :data:`TRAITS`), the kernel, tiling and prepare a :class:`aircc.ops.KernelImpl`
of the numpy backend.  :func:`lookup` gives the old combined view.  Removed once
every kernel module registers with ``NUMPY.kernel`` and every op is defined in
:mod:`aircc.ops.defs`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from aircc.ops.backend import KernelImpl
from aircc.ops.registry import InferContext, OpDef, all_definitions, op_def, register_op  # noqa: F401
from aircc.ops.targets import resolve_target
from aircc.ops.traits import Trait

from .numpy_backend import NUMPY

E, V, L, H, S = Trait.ELEMENTWISE, Trait.VIEW, Trait.LAYOUT, Trait.HOST_CAPABLE, Trait.SHAPE_ONLY
TRAITS: dict[str, set] = {}
for _n in ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "LessOrEqual",
           "GreaterOrEqual", "And", "Or", "Xor", "Where", "Cast", "Not", "Neg", "Abs", "Relu",
           "Exp", "Sqrt", "Tanh", "Sigmoid"):
    TRAITS.setdefault(_n, set()).add(E)
for _n in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
    TRAITS.setdefault(_n, set()).update({V, L})
TRAITS.setdefault("Transpose", set()).add(L)
for _n in ("Shape", "Size"):
    TRAITS.setdefault(_n, set()).add(S)
for _n in ("Gather", "Concat", "Unsqueeze", "Squeeze", "Range", "Slice", "Cast", "Reshape",
           "Identity", "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Min", "Max", "Floor",
           "Ceil", "Sqrt", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
           "And", "Or", "Where", "ConstantOfShape", "Expand", "ReduceProd", "ReduceSum",
           "ReduceMax", "ReduceMin", "Tile", "Flatten", "Sign", "Transpose"):
    TRAITS.setdefault(_n, set()).add(H)
for _n in ("If", "Loop", "Scan"):
    TRAITS.setdefault(_n, set()).add(Trait.CONTROL_FLOW)
BROADCAST_INPUTS = {"Attention": (3,), "SoftmaxMatMul": (2,)}


def op(name: str, since: int = 1, domain: str = "", value_inputs: tuple[int, ...] = (),
       foldable: bool = True, engine: str = "vector"):
    """Old-style class decorator: registers the shape rule and the numpy kernel."""

    def register(cls):
        register_op(OpDef(name, since, domain, getattr(cls, "infer", None), tuple(value_inputs),
                          frozenset(TRAITS.get(name, ()) if not domain else ()), engine, foldable,
                          BROADCAST_INPUTS.get(name, ()) if domain == "aircc" else ()))
        tiling = getattr(cls, "tiling", None)
        if getattr(cls, "kernel", None) is not None:
            NUMPY.register(KernelImpl(name, since, domain, cls.kernel,
                                      None if tiling is None else _accepting_target(tiling),
                                      getattr(cls, "prepare", None)))
        cls.spec = _Spec(cls, name, since, domain)
        return cls

    return register


def _accepting_target(tiling):
    def tile(types, attrs, target=None):
        return tiling(types, attrs)
    return tile


class _Spec:
    """What old code read as ``cls.spec``."""

    def __init__(self, cls, name, since, domain):
        self.name, self.since, self.domain = name, since, domain
        self.extra: dict = {}


@dataclass
class OpSpec:
    """A definition and the numpy backend's kernel for it, as one record."""

    name: str
    since: int
    domain: str = ""
    infer: Optional[Callable] = None
    kernel: Optional[Callable] = None
    tiling: Optional[Callable] = None
    prepare: Optional[Callable] = None
    value_inputs: tuple[int, ...] = ()
    foldable: bool = True
    native: bool = True
    engine: str = "vector"
    extra: dict[str, Any] = field(default_factory=dict)


def lookup(name: str, version: int | None = None, domain: str = "", node: str = "",
           impl: str | None = None) -> OpSpec:
    d = op_def(name, version, domain, node, fallback=impl == "fallback")
    try:
        k = NUMPY.impl(name, version, domain, node, fallback=not d.native)
    except Exception:
        k = None
    tiling = None
    if k is not None and k.tiling is not None:
        target = resolve_target(None)
        kt = k.tiling

        def tiling(types, attrs):
            return kt(types, attrs, target)
    spec = OpSpec(d.name, d.since, d.domain, d.infer, k.kernel if k else None, tiling,
                  k.prepare if k else None, d.value_inputs, d.foldable, d.native, d.engine)
    if d.run is not None:
        spec.extra["run"] = d.run
    if d.has(Trait.CONTROL_FLOW) or d.domain == "aircc" and d.name in _CONTROL:
        spec.extra["control_flow"] = True
    return spec


_CONTROL = {"LoopInit", "LoopCheck", "LoopUpdate", "LoopFinish", "IfInit", "BranchOut",
            "ScanInit", "ScanSlice", "ScanUpdate"}


def supported_ops() -> list[str]:
    NUMPY.load()
    return NUMPY.native_ops()


def all_specs() -> list[OpSpec]:
    NUMPY.load()
    return [lookup(d.name, d.since, d.domain) for d in all_definitions()
            if not d.has(Trait.DEVICE_TASK)]


def node_spec(node) -> OpSpec:
    return lookup(node.op, node.version, node.domain, node.name, node.meta.get("impl"))

"""The op registry: one entry per (op, since-version), keyed by op name.

Each entry holds, in one place, everything the toolchain knows about an op:
its shape rule (used by the compiler's shape inference and by the dynamic
runtime's InferShape), its tiling function (shape-dependent launch
preparation, computed at compile time in static mode), and its kernel (a
numpy function that writes its results into device memory).

Register an op with the :func:`op` decorator on a class::

    @op("Relu", since=6)
    class Relu:
        @staticmethod
        def infer(ctx): return [ctx.input_type(0)]
        @staticmethod
        def kernel(ins, outs, attrs, tiling, ws): np.maximum(ins[0], 0, out=outs[0])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from aircc.compiler.ir.graph import TensorType
from aircc.errors import ShapeInferenceError, UnsupportedOpError, UnsupportedVariantError


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

    def sym(self, k: int) -> str:
        """A fresh symbolic dim name for a dim of this node that cannot be known."""
        return f"{self.node}_d{k}"

    def fail(self, message: str):
        raise ShapeInferenceError(f"node '{self.node}' ({self.op}): {message}")

    def unsupported(self, message: str):
        """The native kernel does not cover this case (the fallback kernel may)."""
        raise UnsupportedVariantError(f"node '{self.node}' ({self.op}): {message}")


Kernel = Callable[[list, list, dict, dict, Optional[np.ndarray]], None]


@dataclass
class OpSpec:
    """Everything known about one version range of one op."""

    name: str
    since: int
    domain: str = ""
    infer: Callable[[InferContext], list[TensorType]] | None = None
    """Shape rule: input types (+ known values) -> output types."""
    kernel: Kernel | None = None
    """``kernel(ins, outs, attrs, tiling, workspace)``: reads ``ins``, writes ``outs`` in place."""
    tiling: Callable[[list[TensorType], dict], dict] | None = None
    """``tiling(input_types, attrs) -> dict``; may set ``workspace`` (bytes)."""
    prepare: Callable[..., Optional[Callable[[], None]]] | None = None
    """``prepare(ins, outs, attrs, tiling, workspace, constant, prepared=None) -> run() | None``:
    the kernel bound once to operands that stay where they are (a static task, a replayed
    launch), with whatever follows from their shapes, strides and the values of the
    inputs ``constant`` marks (weights) worked out ahead; ``run()`` then does only the
    arithmetic.  An operand derived from weights (transformed, repacked) goes in device
    memory through ``prepared`` (a :class:`~aircc.executor.device.prepared.PreparedConstants`;
    None: host arrays).  None: this use is left to ``kernel``."""
    value_inputs: tuple[int, ...] = ()
    """Inputs whose values (not only shapes) decide the output shapes."""
    foldable: bool = True
    """Whether constant folding may evaluate this op at compile time."""
    native: bool = True
    engine: str = "vector"
    """``"cube"``: the kernel runs on the device's one matrix engine (the BLAS thread
    pool, which spans every core), so cube kernels of different streams take turns;
    ``"vector"`` kernels run concurrently."""
    extra: dict[str, Any] = field(default_factory=dict)


_REGISTRY: dict[tuple[str, str], list[OpSpec]] = {}


def op(name: str, since: int = 1, domain: str = "", value_inputs: tuple[int, ...] = (),
       foldable: bool = True, engine: str = "vector"):
    """Class decorator: register ``infer``/``kernel``/``tiling``/``prepare`` static methods as an op."""

    def register(cls):
        spec = OpSpec(name=name, since=since, domain=domain,
                      infer=getattr(cls, "infer", None),
                      kernel=getattr(cls, "kernel", None),
                      tiling=getattr(cls, "tiling", None),
                      prepare=getattr(cls, "prepare", None),
                      value_inputs=value_inputs, foldable=foldable, engine=engine)
        versions = _REGISTRY.setdefault((domain, name), [])
        versions.append(spec)
        versions.sort(key=lambda s: s.since)
        cls.spec = spec
        return cls

    return register


def lookup(name: str, version: int | None = None, domain: str = "", node: str = "",
           impl: str | None = None) -> OpSpec:
    """The entry for ``name`` that applies at opset ``version`` (newest ``since`` <= version).

    ``impl="fallback"`` asks for the fallback kernel (the onnx reference
    implementation run in device memory); an op with no native kernel gets it too.
    """
    _load_all()
    if domain == "ai.onnx":
        domain = ""
    versions = _REGISTRY.get((domain, name))
    if impl == "fallback" or not versions:
        from .fallback import fallback_spec

        spec = fallback_spec(name, version, domain)
        if spec is not None:
            return spec
    if not versions:
        raise UnsupportedOpError(name, domain, version, node, known=supported_ops())
    if version is None or version <= 0:
        return versions[-1]
    chosen = None
    for spec in versions:
        if spec.since <= version:
            chosen = spec
    if chosen is None:
        raise UnsupportedOpError(name, domain, version, node,
                                 reason=f"earliest supported version is {versions[0].since}")
    return chosen


def supported_ops() -> list[str]:
    """Ops with a native kernel (fallback kernels: :func:`fallback_ops`)."""
    _load_all()
    return sorted({name for (_, name) in _REGISTRY})


def all_specs() -> list[OpSpec]:
    """Every native entry."""
    _load_all()
    return [s for versions in _REGISTRY.values() for s in versions]


def node_spec(node) -> OpSpec:
    """The entry an IR node runs with (its ``meta["impl"]`` may ask for the fallback)."""
    return lookup(node.op, node.version, node.domain, node.name, node.meta.get("impl"))


_loaded = False


def _load_all() -> None:
    """Import every kernel module once so that their decorators run."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib
    import pkgutil

    import aircc.executor.kernels as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in ("registry", "fallback") and not info.name.startswith("_"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")

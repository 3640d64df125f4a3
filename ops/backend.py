"""Kernel backends: named sets of kernels, found by the compile target.

A kernel backend is a registry, not a branch: it maps (domain, op, since) to a
:class:`KernelImpl` (the kernel, its tiling function and its ``prepare``
hook), says which weight layout it wants for an op (the compiler's
``pack-weights`` pass asks), and names the vector classes it can be tuned for.
The op's definition (shape rule, traits) stays in :mod:`aircc.ops.registry`;
the backend only runs it.

Backends are plugins: a package declares one under the entry-point group
``aircc.kernel_backends`` (aircc's own numpy backend is declared in its
``pyproject.toml``), and :func:`kernel_backend` loads it by name the first time a
compile or a load asks for it.  Neither the compiler nor the runtime imports a
backend's module.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from aircc.errors import CompileOptionError, UnsupportedOpError

from .registry import has_trait, version_at
from .targets import Target
from .traits import Trait
from .types import TensorType

ENTRY_POINT_GROUP = "aircc.kernel_backends"

Kernel = Callable[[list, list, dict, dict, Optional[np.ndarray]], None]
"""``kernel(ins, outs, attrs, tiling, workspace)``: reads ``ins``, writes ``outs`` in place."""
Tiling = Callable[[list, dict, Target], dict]
"""``tiling(input_types, attrs, target) -> dict``: shape-dependent launch data, msgpack-able;
may set ``workspace`` (bytes of scratch the kernel needs).  ``target`` is the compile
target (:class:`aircc.ops.targets.Target`)."""
Prepare = Callable[..., Optional[Callable[[], None]]]
"""``prepare(ins, outs, attrs, tiling, workspace, constant, prepared=None) -> run() | None``:
the kernel bound once to operands that stay where they are (a static task, a replayed
launch), with whatever follows from their shapes and from the inputs ``constant`` marks
(weights) worked out ahead; ``run()`` then does only the arithmetic.  An operand derived
from weights goes in device memory through ``prepared``.  None: this use is left to
``kernel``."""
LayoutRule = Callable[[list, dict, Target], str]
"""``layout(input_types, attrs, target) -> weight layout name`` the backend wants."""
ChannelsLastRule = Callable[[list, dict, Target], bool]
"""``rule(input_types, attrs, target) -> bool``: the backend wants this use of the op to
run channels-last (``plan-layouts`` plans its activations NHWC)."""


@dataclass
class KernelImpl:
    """One backend's kernel for one version range of one op."""

    op: str
    since: int
    domain: str = ""
    kernel: Optional[Kernel] = None
    tiling: Optional[Tiling] = None
    prepare: Optional[Prepare] = None
    native: bool = True
    """False for the fallback kernel (onnx's reference implementation in device memory)."""
    channels_last: bool = False
    """The kernel runs a node marked ``channels_last`` itself (:mod:`aircc.ops.layout`);
    otherwise it is run through channels-first copies of its activations."""
    epilogues: frozenset = frozenset()
    """Fused attributes beyond the common ones that the kernel runs (``fused_activation``:
    the fusion passes fuse them only into kernels that do)."""

    def tile(self, types: list, attrs: dict, target: Target) -> dict:
        """The tiling data for these input types ({} for a kernel without tiling)."""
        return self.tiling(types, attrs, target) if self.tiling is not None else {}


class KernelBackend:
    """A named set of kernels (see the module doc)."""

    def __init__(self, name: str, description: str, vector_classes: tuple[str, ...],
                 loader: Callable[[], None] | None = None,
                 fallback: Callable[[str, int | None, str], Optional[KernelImpl]] | None = None,
                 host_vector_class: Callable[[], str] | None = None,
                 base: str | None = None, unavailable: Callable[[], str | None] | None = None,
                 kernels_span_cores: bool = False):
        self.name = name
        self.description = description
        self.vector_classes = tuple(vector_classes)
        """The classes of vector instructions this backend has tunings for."""
        self.base = base
        """The backend whose kernels run the ops this one has none for (and its fallback)."""
        self.kernels_span_cores = kernels_span_cores
        """Every kernel (not only the matrix engine's) spreads one op over every core, so
        a branch on a second stream would only queue for the cores (``assign-streams``)."""
        self._unavailable = unavailable
        self._loader = loader
        self._fallback = fallback
        self._host_vector_class = host_vector_class
        self._impls: dict[tuple[str, str], list[KernelImpl]] = {}
        self._layouts: dict[tuple[str, str], LayoutRule] = {}
        self._channels_last: dict[tuple[str, str], ChannelsLastRule] = {}
        self._loaded = loader is None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"KernelBackend({self.name!r})"

    def unavailable_reason(self) -> str | None:
        """Why this backend cannot run here (its library is missing, say); None if it can."""
        return self._unavailable() if self._unavailable is not None else None

    # ------------------------------------------------------------ registering
    def register(self, impl: KernelImpl) -> KernelImpl:
        versions = self._impls.setdefault((impl.domain, impl.op), [])
        if any(i.since == impl.since for i in versions):
            raise ValueError(f"backend {self.name}: kernel {impl.op}-{impl.since} registered twice")
        versions.append(impl)
        versions.sort(key=lambda i: i.since)
        return impl

    def kernel(self, op: str, since: int = 1, domain: str = "", *, channels_last: bool = False):
        """Class decorator: register the class's ``kernel``, ``tiling`` and ``prepare``
        static methods as this backend's kernel for ``op`` from opset ``since``
        (``channels_last``: they run channels-last nodes themselves)."""

        def register(cls):
            cls.impl = self.register(KernelImpl(op, since, domain,
                                                getattr(cls, "kernel", None),
                                                getattr(cls, "tiling", None),
                                                getattr(cls, "prepare", None),
                                                channels_last=channels_last,
                                                epilogues=frozenset(getattr(cls, "FUSED", ()))))
            return cls

        return register

    def channels_last(self, op: str, domain: str = ""):
        """Decorator: the rule saying when this backend wants ``op`` run channels-last."""

        def register(rule: ChannelsLastRule) -> ChannelsLastRule:
            self._channels_last[(domain, op)] = rule
            return rule

        return register

    def layout(self, op: str, domain: str = ""):
        """Decorator: the rule that picks the weight layout this backend wants for ``op``."""

        def register(rule: LayoutRule) -> LayoutRule:
            self._layouts[(domain, op)] = rule
            return rule

        return register

    # ------------------------------------------------------------ looking up
    def load(self) -> "KernelBackend":
        """Import the backend's kernel modules (once)."""
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    self._loaded = True
                    self._loader()                      # type: ignore[misc]
        return self

    def impl(self, op: str, version: int | None = None, domain: str = "", node: str = "",
             fallback: bool = False) -> KernelImpl:
        """The kernel for ``op`` at opset ``version`` (newest ``since`` at or below it);
        ``fallback=True``, or an op with no native kernel, gets the fallback kernel."""
        self.load()
        domain = "" if domain == "ai.onnx" else domain
        versions = self._impls.get((domain, op))
        if self.base is not None and (fallback or not versions):
            return kernel_backend(self.base).impl(op, version, domain, node, fallback)
        if (fallback or not versions) and self._fallback is not None:
            found = self._fallback(op, version, domain)
            if found is not None:
                return found
        if not versions:
            raise UnsupportedOpError(op, domain, version, node,
                                     reason=f"kernel backend '{self.name}' has no kernel for it",
                                     known=self.native_ops(user_only=True))
        chosen = version_at(versions, version)
        if chosen is None and self.base is not None:
            return kernel_backend(self.base).impl(op, version, domain, node, fallback)
        if chosen is None:
            raise UnsupportedOpError(op, domain, version, node,
                                     reason=f"backend '{self.name}' has kernels from version "
                                            f"{versions[0].since}")
        return chosen

    def weight_layout(self, op: str, types: list[TensorType | None], attrs: dict,
                      target: Target, domain: str = "") -> str | None:
        """The weight layout the backend wants for this use of ``op``; None: no preference."""
        self.load()
        rule = self._layouts.get((domain, op))
        return None if rule is None else rule(types, attrs, target)

    def wants_channels_last(self, op: str, types: list[TensorType | None], attrs: dict,
                            target: Target, domain: str = "") -> bool:
        """Whether this backend wants this use of ``op`` run channels-last."""
        self.load()
        rule = self._channels_last.get((domain, op))
        return rule is not None and bool(rule(types, attrs, target))

    def plans_layouts(self) -> bool:
        """Whether any op of this backend runs channels-last (``plan-layouts`` has work)."""
        self.load()
        return bool(self._channels_last)

    def native_ops(self, user_only: bool = False) -> list[str]:
        """The ops this backend (or its base) has kernels for; ``user_only``: only those a
        model may use (not the compiler's ``INTERNAL`` ops)."""
        self.load()
        own = {op for (dom, op) in self._impls
               if not (user_only and has_trait(op, Trait.INTERNAL, dom))}
        return sorted(own | set(kernel_backend(self.base).native_ops(user_only))
                      if self.base else own)

    def all_impls(self) -> list[KernelImpl]:
        """This backend's own kernels (not its base's)."""
        self.load()
        return [i for versions in self._impls.values() for i in versions]

    def host_vector_class(self) -> str:
        """The vector class this backend's kernels run with on this machine."""
        return self._host_vector_class() if self._host_vector_class else self.vector_classes[0]


_BACKENDS: dict[str, KernelBackend] = {}
_discovered = False
_registry_lock = threading.Lock()


def register_backend(backend: KernelBackend) -> KernelBackend:
    """Make ``backend`` known by its name (plugins found by entry point are added too)."""
    _BACKENDS[backend.name] = backend
    return backend


def _discover() -> None:
    global _discovered
    with _registry_lock:
        if _discovered:
            return
        _discovered = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name not in _BACKENDS:
                _BACKENDS[ep.name] = _EntryPoint(ep)      # loaded on first use


class _EntryPoint:
    """A declared backend not imported yet."""

    def __init__(self, ep):
        self.ep = ep

    def load(self) -> KernelBackend:
        backend = self.ep.load()
        if not isinstance(backend, KernelBackend):
            raise CompileOptionError(f"entry point '{self.ep.name}' of group {ENTRY_POINT_GROUP} "
                                     f"({self.ep.value}) is not a KernelBackend")
        return backend


def available_backends() -> list[str]:
    """Names of the kernel backends installed and able to run here (registered, or
    declared by entry point)."""
    _discover()
    return sorted(n for n in list(_BACKENDS) if backend_unavailable(n) is None)


def backend_unavailable(name: str) -> str | None:
    """Why backend ``name`` cannot run here (not installed, its library missing); None
    when it can."""
    _discover()
    found = _BACKENDS.get(name)
    if found is None:
        return f"no kernel backend '{name}' is installed"
    if isinstance(found, _EntryPoint):
        try:
            found = _BACKENDS[name] = found.load()
        except Exception as e:          # a broken plugin is reported, not raised here
            return f"kernel backend '{name}' cannot be loaded: {type(e).__name__}: {e}"
    return found.unavailable_reason()


def kernel_backend(name: str) -> KernelBackend:
    """The kernel backend called ``name``, loaded; CompileOptionError naming the installed
    ones when there is none, or saying why it cannot run here."""
    _discover()
    found = _BACKENDS.get(name)
    if found is None:
        raise CompileOptionError(f"no kernel backend '{name}' is installed; installed: "
                                 f"{', '.join(available_backends()) or 'none'}")
    if isinstance(found, _EntryPoint):
        found = _BACKENDS[name] = found.load()
    reason = found.unavailable_reason()
    if reason is not None:
        raise CompileOptionError(f"kernel backend '{name}' cannot run here: {reason}")
    return found.load()

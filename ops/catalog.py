"""The op catalogue: every op a model may use, its opset ranges, and what runs it on a backend.

``aircc ops`` prints it.  An op version runs ``native`` (a kernel of the backend),
``control`` (an op with bodies, run as control tasks), or ``fallback`` (onnx's
reference implementation in the device path, for ops of the default, ``ai.onnx.ml``
and ``ai.onnx.preview.training`` domains the backend has no kernel for).  The ops the
compiler makes itself (trait ``INTERNAL``: events, copies, control kernels, fused ops)
are not in it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import onnx

from aircc.errors import CompileOptionError, UnsupportedOpError

from .backend import KernelBackend, kernel_backend
from .fallback import fallback_ops
from .registry import all_definitions
from .traits import Trait

#: The oldest opset of the default domain aircc imports.
OLDEST_OPSET = 1


def supported_opsets() -> tuple[int, int]:
    """The opsets of the default domain aircc compiles (first, last): from
    :data:`OLDEST_OPSET` to the newest the installed onnx defines, whose schemas the
    fallback kernels, their shape inference and the checker follow (no native definition
    is newer)."""
    return OLDEST_OPSET, onnx.defs.onnx_opset_version()


def domain_opsets(domain: str) -> tuple[int, int | None]:
    """The opsets of ``domain`` aircc imports (first, last): the default domain's
    :func:`supported_opsets`; another domain onnx defines (``ai.onnx.ml``,
    ``ai.onnx.preview.training``), the range the installed onnx gives it; a domain onnx
    does not know (a custom one), (1, None): its ops say what they support."""
    if domain in ("", "ai.onnx"):
        return supported_opsets()
    first, last = onnx.defs.C.schema_version_map().get(domain, (1, None))
    return first, last


@dataclass(frozen=True)
class OpRow:
    """One version range of one op."""

    domain: str
    op: str
    since: int
    until: int | None
    """The last opset of this range (None: still current)."""
    kind: str

    def span(self) -> str:
        return f"{self.since}-{self.until}" if self.until is not None else f"{self.since}+"


def op_table(backend: KernelBackend) -> list[OpRow]:
    """Every op version range, sorted by domain, op and version."""
    rows: list[tuple[str, str, int, str]] = []
    for d in all_definitions():
        if d.has(Trait.DEVICE_TASK) or d.has(Trait.INTERNAL):
            continue
        kind = "control" if d.has(Trait.CONTROL_FLOW) else "native"
        rows.append((d.domain, d.name, d.since, kind))
    first_native: dict[tuple[str, str], int] = {}
    for domain, name, since, _ in rows:
        first_native[(domain, name)] = min(since, first_native.get((domain, name), since))
    rows += [(domain, name, since, "fallback") for domain, name, since in fallback_ops()
             if since < first_native.get((domain, name), 10**9)]
    rows.sort()
    starts: dict[tuple[str, str], list[int]] = {}
    for domain, name, since, _ in rows:
        starts.setdefault((domain, name), []).append(since)
    out = []
    for domain, name, since, kind in rows:
        later = [v for v in starts[(domain, name)] if v > since]
        if kind == "native" and backend.impl(name, since, domain).native is False:
            kind = "fallback"
        out.append(OpRow(domain, name, since, later[0] - 1 if later else None, kind))
    return out


#: What :func:`kernel_source` names onnx's reference implementation.
REFERENCE = "onnx-reference"


def kernel_source(backend: KernelBackend, op: str, version: int, domain: str = "",
                  fallback: bool = False) -> str | None:
    """The name of the backend whose kernel runs ``op`` for ``backend`` (itself, or its
    base for an op it has no kernel of), :data:`REFERENCE` for a fallback kernel, None for
    an op neither knows.  Per op, not per shape: a kernel may still hand a use it does not
    cover to its base at run time (a static model's tiling records that)."""
    try:
        impl = backend.impl(op, version, domain, fallback=fallback)
    except UnsupportedOpError:              # an op neither the backend nor onnx knows
        return None
    if not impl.native:
        return REFERENCE
    if backend.base is not None and not fallback:
        base = kernel_backend(backend.base)
        try:
            if base.impl(op, version, domain) is impl:
                return base.name
        except UnsupportedOpError:
            pass
    return backend.name


def kernel_sources(backend_name: str) -> Callable[[str, int, str, bool], str | None] | None:
    """:func:`kernel_source` for the backend called ``backend_name`` (a model's target's),
    as ``(op, version, domain, fallback) -> name``; None when that backend cannot load here."""
    try:
        backend = kernel_backend(backend_name)
    except CompileOptionError:
        return None
    return lambda op, version, domain, fallback: kernel_source(backend, op, version, domain,
                                                               fallback)

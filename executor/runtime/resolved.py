"""An op as the runtime runs it: its definition (shape rule, value inputs, engine) and the
model's kernel backend's kernel for it (kernel, tiling, prepare)."""
from __future__ import annotations

from dataclasses import dataclass

from aircc.formats.kinds import Impl
from aircc.ops import KernelBackend, KernelImpl, OpDef, op_def
from aircc.ops.layout import adapt_kernel


@dataclass(frozen=True)
class ResolvedOp:
    """One node's op, resolved once when its model loads."""

    definition: OpDef
    impl: KernelImpl

    @property
    def engine(self) -> str:
        return self.definition.engine


def resolve_op(backend: KernelBackend, op: str, version: int, domain: str, node: str,
               impl: Impl, attrs: dict) -> ResolvedOp:
    """The definition and the backend's kernel for a node of a loaded model with these
    ``attrs`` (``UnsupportedOpError`` naming the node when either is missing)."""
    fallback = impl is Impl.FALLBACK
    return ResolvedOp(op_def(op, version, domain, node, fallback),
                      adapt_kernel(backend.impl(op, version, domain, node, fallback), attrs))

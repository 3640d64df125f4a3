"""Finding an op's definition: the native one for an opset version, or the fallback.

:func:`op_def` is what the compiler's shape inference and the runtime's InferShape
ask; an op no native definition covers gets its fallback definition (onnx's schema
and reference implementation) when onnx knows it, else ``UnsupportedOpError``
listing the ops that do exist.
"""
from __future__ import annotations

from typing import Protocol

from aircc.errors import UnsupportedOpError

from .fallback import fallback_def
from .registry import MEMO, OpDef, canonical_domain, user_ops, version_at, versions_of


class NodeLike(Protocol):
    """What :func:`node_def` reads of an IR node or a node record of an .om."""

    op: str
    domain: str
    version: int
    name: str


def op_def(name: str, version: int | None = None, domain: str = "", node: str = "",
           fallback: bool = False) -> OpDef:
    """The definition of ``name`` that applies at opset ``version`` (the newest ``since``
    at or below it; the newest of all when ``version`` is None or 0).

    ``fallback=True`` asks for the fallback definition (onnx's shape inference, for a
    node whose use the native kernels do not cover); an op with no native definition
    gets it too when onnx knows the op.  Raises :class:`UnsupportedOpError` listing the
    known ops otherwise.
    """
    key = (name, version, domain, fallback)
    found = MEMO.get(key)
    if found is not None:
        return found
    MEMO[key] = found = _resolve(name, version, canonical_domain(domain), node, fallback)
    return found


def _resolve(name: str, version: int | None, domain: str, node: str, fallback: bool) -> OpDef:
    versions = versions_of(name, domain)
    if fallback or not versions:
        found = fallback_def(name, version, domain)
        if found is not None:
            return found
    if not versions:
        raise UnsupportedOpError(name, domain, version, node, known=user_ops())
    chosen = version_at(versions, version)
    if chosen is None:
        raise UnsupportedOpError(name, domain, version, node,
                                 reason=f"earliest supported version is {versions[0].since}")
    return chosen


def node_def(node: NodeLike, fallback: bool = False) -> OpDef:
    """The definition an IR node (or an .om node record) is typed with; ``fallback``: the
    fallback one (the IR's ``Node.definition`` says which)."""
    return op_def(node.op, node.version, node.domain, node.name, fallback)

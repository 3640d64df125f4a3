"""Primitive attributes: post-ops fused after a primitive, the scratchpad mode.

Post-ops run in order on the primitive's result before it is stored:

- :class:`Eltwise` ``alg`` in :data:`ELTWISE` (``relu`` with ``alpha`` the negative
  slope, ``clip``/``clip_v2`` to [alpha, beta], ``linear`` alpha*x+beta, ``swish``
  x*sigmoid(alpha*x), ``elu`` alpha, ``hardswish`` x*min(max(alpha*x+beta, 0), 1)...);
- :class:`Binary` ``alg`` in :data:`BINARY` with a second tensor ``src1`` (numpy-style
  broadcast of dims of size 1), given at execution as ``post_op_arg(index)``;
- :class:`Sum`: ``dst = scale * dst_before + result`` (the destination buffer holds the
  addend when the primitive runs).

With ``scratchpad="user"`` the primitive takes its scratch memory from the caller
(argument ``Arg.scratchpad``, :meth:`PrimitiveDesc.scratchpad_md` bytes): the compiler
plans it as the kernel's workspace.
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from .enums import AlgKind, DataType, FpmathMode, ScratchpadMode
from .library import lib
from .memory import MemoryDesc

ELTWISE = {name[len("eltwise_"):]: alg for name, alg in AlgKind.__members__.items()
           if name.startswith("eltwise_")}
"""Eltwise algorithm names (``relu``, ``gelu_erf``...) -> :class:`AlgKind`."""
BINARY = {name[len("binary_"):]: alg for name, alg in AlgKind.__members__.items()
          if name.startswith("binary_")}
"""Binary algorithm names (``add``, ``mul``, ``sub``, ``div``, ``max``, ``min``, compares)."""


def eltwise_alg(alg: Union[str, AlgKind]) -> AlgKind:
    """The :class:`AlgKind` of an eltwise name (ValueError for an unknown one)."""
    if isinstance(alg, AlgKind):
        return alg
    if alg not in ELTWISE:
        raise ValueError(f"unknown oneDNN eltwise algorithm {alg!r} (known: {', '.join(ELTWISE)})")
    return ELTWISE[alg]


def binary_alg(alg: Union[str, AlgKind]) -> AlgKind:
    """The :class:`AlgKind` of a binary name (ValueError for an unknown one)."""
    if isinstance(alg, AlgKind):
        return alg
    if alg not in BINARY:
        raise ValueError(f"unknown oneDNN binary algorithm {alg!r} (known: {', '.join(BINARY)})")
    return BINARY[alg]


@dataclass(frozen=True)
class Eltwise:
    """Post-op: an elementwise function of the result."""

    alg: Union[str, AlgKind]
    alpha: float = 0.0
    beta: float = 0.0


@dataclass(frozen=True)
class Binary:
    """Post-op: result (op) src1; src1's memory is bound as ``post_op_arg(index)``."""

    alg: Union[str, AlgKind]
    src1: MemoryDesc


@dataclass(frozen=True)
class Sum:
    """Post-op: result + scale * what the destination held before."""

    scale: float = 1.0


PostOp = Union[Eltwise, Binary, Sum]


class _Handle:
    """An owned attr / post-ops handle."""

    def __init__(self, destroy: str):
        self.handle = ctypes.c_void_p()
        self._destroy = destroy

    def __del__(self):
        if self.handle:
            try:
                getattr(lib().dll, self._destroy)(self.handle)
            except Exception:               # interpreter shutting down
                pass


def _post_ops(ops: Sequence[PostOp]) -> _Handle:
    dll = lib().dll
    po = _Handle("dnnl_post_ops_destroy")
    dll.dnnl_post_ops_create(ctypes.byref(po.handle))
    for op in ops:
        if isinstance(op, Eltwise):
            dll.dnnl_post_ops_append_eltwise(po.handle, eltwise_alg(op.alg), op.alpha, op.beta)
        elif isinstance(op, Binary):
            dll.dnnl_post_ops_append_binary(po.handle, binary_alg(op.alg), op.src1.handle)
        elif isinstance(op, Sum):
            dll.dnnl_post_ops_append_sum(po.handle, op.scale, 0, DataType.undef)
        else:
            raise TypeError(f"{op!r} is not a post-op (Eltwise, Binary or Sum)")
    return po


class Attr:
    """Primitive attributes (owns a ``dnnl_primitive_attr_t``)."""

    def __init__(self, post_ops: Sequence[PostOp] = (), scratchpad: str = "library",
                 fpmath: str | None = None):
        """``scratchpad``: ``library`` (the primitive keeps its own) or ``user`` (the
        caller binds one); ``fpmath``: ``strict`` (default), ``bf16``, ``tf32``, ``any``:
        down-conversions the primitive may do on f32 data."""
        if scratchpad not in ("library", "user"):
            raise ValueError(f"scratchpad={scratchpad!r}: 'library' or 'user'")
        self.post_ops = tuple(post_ops)
        self.scratchpad = scratchpad
        self._attr = _Handle("dnnl_primitive_attr_destroy")
        dll = lib().dll
        dll.dnnl_primitive_attr_create(ctypes.byref(self._attr.handle))
        dll.dnnl_primitive_attr_set_scratchpad_mode(self._attr.handle,
                                                    ScratchpadMode[scratchpad])
        if fpmath is not None:
            dll.dnnl_primitive_attr_set_fpmath_mode(self._attr.handle, FpmathMode[fpmath])
        if self.post_ops:
            po = _post_ops(self.post_ops)
            dll.dnnl_primitive_attr_set_post_ops(self._attr.handle, po.handle)

    @property
    def handle(self) -> ctypes.c_void_p:
        return self._attr.handle

    def binary_inputs(self) -> list[tuple[int, MemoryDesc]]:
        """(post-op index, src1 descriptor) of every binary post-op."""
        return [(i, op.src1) for i, op in enumerate(self.post_ops) if isinstance(op, Binary)]

    def __repr__(self) -> str:
        return f"Attr(post_ops={list(self.post_ops)!r}, scratchpad={self.scratchpad!r})"


def as_attr(attr: Attr | Sequence[PostOp] | None, scratchpad: str = "library") -> Attr:
    """An :class:`Attr` from an Attr, a list of post-ops or None."""
    if isinstance(attr, Attr):
        return attr
    return Attr(tuple(attr or ()), scratchpad=scratchpad)

"""Scratch memory of kernels: workspaces carved into arrays, views that never copy,
shared read-only constants (a column of ones, a block of zeros)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from aircc.formats.alignment import ALIGNMENT, align_up
from aircc.ops.shapes import prod
from aircc.ops.machine import resolve_target
from aircc.ops.types import types_of

#: Bytes the im2col / scratch block buffers aim to stay under.
BLOCK_BYTES = 32 << 20
#: Alignment of the sections carved out of a workspace.
WS_ALIGN = ALIGNMENT


def align(n: int) -> int:
    """``n`` rounded up to where the next workspace section may start."""
    return align_up(n, WS_ALIGN)


def carve(ws: np.ndarray, offset: int, shape: Sequence[int], dtype) -> np.ndarray:
    """A C-contiguous array of ``shape``/``dtype`` at byte ``offset`` of workspace ``ws``."""
    dt = np.dtype(dtype)
    n = prod(shape) * dt.itemsize
    return ws[offset:offset + n].view(dt).reshape(tuple(shape))


_COLUMNS: dict = {}


def constant_column(n: int, value: float, dtype) -> np.ndarray:
    """A read-only (n, 1) column of ``value``, made once per (n, value, dtype): the right
    operand of a GEMM that sums (1) or averages (1/n) rows."""
    key = (n, value, np.dtype(dtype))
    col = _COLUMNS.get(key)
    if col is None:
        col = _COLUMNS[key] = np.full((n, 1), value, dtype)
        col.flags.writeable = False
    return col


def workspace(ws: Optional[np.ndarray], nbytes: int) -> np.ndarray:
    """``ws`` when the runtime supplied it, else a fresh buffer (kernels called directly)."""
    if ws is not None and ws.nbytes >= nbytes:
        return ws
    return np.empty(int(nbytes), dtype=np.uint8)


def ensure_tiling(kernel_cls, tiling: dict, ins, attrs) -> dict:
    """The tiling dict, computed on the spot (for the default target) when the caller
    passed none: a kernel called directly, outside a compiled model."""
    if tiling:
        return tiling
    return kernel_cls.tiling(types_of(ins), attrs, resolve_target(None))


def view(a: np.ndarray, shape) -> np.ndarray:
    """Reshape that never copies (so results written into it land in ``a``)."""
    v = a.reshape(shape)
    if v.size and not np.may_share_memory(v, a):
        raise ValueError(f"cannot view an array of shape {a.shape} as {shape} without a copy")
    return v


_ZEROS: dict = {}


def zeros(shape, dtype) -> np.ndarray:
    """A read-only C-contiguous array of zeros of ``shape``: a view of one block per dtype,
    allocated zeroed (calloc) and never written, so the OS backs it with its shared zero
    page: it takes no memory and reads from cache."""
    n, dt = prod(shape), np.dtype(dtype)
    block = _ZEROS.get(dt)
    if block is None or block.size < n:
        block = np.zeros(max(n, 1 << 16), dt)
        block.flags.writeable = False
        _ZEROS[dt] = block
    return block[:n].reshape(tuple(shape))


def lowest(dtype) -> float | int:
    """The smallest value of ``dtype`` (-inf for floats): the identity of a max."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return -np.inf
    if dt.kind == "b":
        return False
    return np.iinfo(dt).min

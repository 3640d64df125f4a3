"""Helpers of shape rules: dims that may be symbols, broadcasting, axes, sliding windows.

Shared by the op definitions (:mod:`aircc.ops.defs`) and by kernel backends'
tiling functions, which work out the same geometry on static shapes.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

Dim = Union[int, str]
Shape = tuple


# ------------------------------------------------------------------ dims
def is_int(d) -> bool:
    return isinstance(d, (int, np.integer)) and not isinstance(d, bool)


def static(shape) -> bool:
    """Whether ``shape`` is known and all its dims are ints."""
    return shape is not None and all(is_int(d) for d in shape)


def prod(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def prod_dims(ctx, dims: Sequence[Dim], k: int) -> Dim:
    """Product of dims; a symbol survives if it is the only non-1 factor."""
    ints = [d for d in dims if is_int(d)]
    syms = [d for d in dims if not is_int(d)]
    p = prod(ints)
    if not syms:
        return p
    if p == 0:
        return 0
    if len(syms) == 1 and p == 1:
        return syms[0]
    return ctx.sym(k)


def broadcast_shapes(ctx, *shapes, k0: int = 0) -> Optional[tuple]:
    """Multidirectional (numpy) broadcasting of shapes whose dims may be symbols."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = []
        for s in shapes:
            j = i - (rank - len(s))
            if j >= 0:
                dims.append(s[j])
        ints = {int(d) for d in dims if is_int(d) and d != 1}
        syms = {d for d in dims if not is_int(d)}
        if len(ints) > 1:
            ctx.fail(f"shapes {[tuple(s) for s in shapes]} cannot be broadcast (axis {i})")
        if ints:
            out.append(ints.pop())
        elif len(syms) == 1:
            out.append(syms.pop())
        elif syms:
            out.append(ctx.sym(k0 + i))
        else:
            out.append(1)
    return tuple(out)


def norm_axis(ctx, axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in ``[-rank, rank)`` mapped to ``[0, rank)``."""
    a = int(axis)
    if not -rank <= a < rank:
        ctx.fail(f"{what} {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def norm_axes(ctx, axes, rank: int, what: str = "axes") -> list[int]:
    out = [norm_axis(ctx, a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        ctx.fail(f"{what} {list(axes)} has duplicates")
    return out


def axis_plain(axis: int, rank: int) -> int:
    """Axis normalisation without a context (kernels, tiling)."""
    a = int(axis)
    return a + rank if a < 0 else a


def ints(v) -> list[int]:
    """A compile-time value (array or list) as a list of Python ints."""
    return [int(x) for x in np.asarray(v).reshape(-1)]


def sym_shape(ctx, rank: int, k0: int = 0) -> tuple:
    """A shape of ``rank`` unknown dims."""
    return tuple(ctx.sym(k0 + i) for i in range(rank))


def vector_len(ctx, i: int) -> Optional[int]:
    """Length of 1-D input ``i`` (e.g. a shape or axes input) if known statically."""
    t = ctx.types[i] if i < len(ctx.types) else None
    if t is None or t.shape is None:
        return None
    if len(t.shape) == 0:
        return 1
    d = t.shape[0]
    return int(d) if is_int(d) else None


# ----------------------------------------------------- windows and pads
def window_geometry(in_sp: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                    dilations: Sequence[int], pads: Sequence[int], auto_pad: str,
                    ceil_mode: bool = False) -> tuple[list[int], list[int], list[int]]:
    """Output spatial dims and begin/end pads of a sliding-window op (Conv, pools).

    Follows the ONNX rules: explicit ``pads`` for NOTSET, computed pads for SAME_UPPER
    (extra pad at the end) / SAME_LOWER (extra at the start), none for VALID; with
    ``ceil_mode`` the last window must start inside the (begin-padded) input.
    """
    n = len(in_sp)
    out, pb, pe = [], [], []
    for i in range(n):
        size, k, s, d = int(in_sp[i]), int(kernel[i]), int(strides[i]), int(dilations[i])
        span = (k - 1) * d + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // s)
            total = max(0, (o - 1) * s + span - size)
            small = total // 2
            b, e = (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)
        elif auto_pad == "VALID":
            b = e = 0
            o = (size - span) // s + 1
        else:
            b, e = int(pads[i]), int(pads[i + n])
            num = size + b + e - span
            if ceil_mode:
                o = -(-num // s) + 1
                if (o - 1) * s >= size + b:
                    o -= 1
            else:
                o = num // s + 1
        out.append(max(o, 0))
        pb.append(b)
        pe.append(e)
    return out, pb, pe


def window_attrs(attrs: dict, nsp: int, kernel: Sequence[int]) -> tuple:
    """(strides, dilations, pads, auto_pad) of a windowed op with ONNX defaults."""
    strides = list(attrs.get("strides") or [1] * nsp)
    dilations = list(attrs.get("dilations") or [1] * nsp)
    pads = list(attrs.get("pads") or [0] * (2 * nsp))
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    return strides, dilations, pads, auto_pad or "NOTSET"


def check_window_attrs(ctx, nsp: int, kernel, strides, dilations, pads) -> None:
    if len(kernel) != nsp:
        ctx.fail(f"kernel_shape {list(kernel)} does not match {nsp} spatial dims")
    if len(strides) != nsp or len(dilations) != nsp or len(pads) != 2 * nsp:
        ctx.fail(f"strides {strides} / dilations {dilations} / pads {pads} do not match "
                 f"{nsp} spatial dims")
    if any(int(s) < 1 for s in strides) or any(int(d) < 1 for d in dilations):
        ctx.fail("strides and dilations must be >= 1")


def window_out_dims(ctx, in_sp, kernel, strides, dilations, pads, auto_pad,
                    ceil_mode: bool = False, k0: int = 2) -> list:
    """Output spatial dims for infer: ints where the input dim is known, else symbols."""
    out = []
    for i, d in enumerate(in_sp):
        if is_int(d):
            o, _, _ = window_geometry([d], [kernel[i]], [strides[i]], [dilations[i]],
                                      [pads[i], pads[i + len(in_sp)]], auto_pad, ceil_mode)
            if o[0] <= 0:
                ctx.fail(f"spatial dim {i} of size {d} is too small for kernel {kernel[i]} "
                         f"(dilation {dilations[i]}, pads {pads[i]}/{pads[i + len(in_sp)]})")
            out.append(o[0])
        else:
            out.append(ctx.sym(k0 + i))
    return out


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)

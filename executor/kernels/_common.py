"""Helpers shared by the kernel modules: shape rules with symbols, axes, pads, workspaces.

Not auto-imported by the registry (leading underscore); kernel modules import it.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.compiler.ir.graph import TensorType

Dim = Union[int, str]
Shape = tuple

#: Bytes the im2col / scratch block buffers aim to stay under.
BLOCK_BYTES = 32 << 20
#: Alignment of the sections carved out of a workspace.
WS_ALIGN = 64


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


# ---------------------------------------------------------------- dtypes
def onnx_to_np(elem_type) -> str:
    """ONNX TensorProto data type (enum int or name) -> numpy dtype name."""
    from onnx import TensorProto, helper

    if isinstance(elem_type, str):
        elem_type = TensorProto.DataType.Value(elem_type.upper())
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(elem_type))).name


def lowest(dtype) -> float | int:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return -np.inf
    if dt.kind == "b":
        return False
    return np.iinfo(dt).min


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


# ------------------------------------------------------------- workspace
def align(n: int) -> int:
    return (int(n) + WS_ALIGN - 1) // WS_ALIGN * WS_ALIGN


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


def types_of(arrays: Sequence[Optional[np.ndarray]]) -> list[Optional[TensorType]]:
    return [None if a is None else TensorType.of(np.asarray(a)) for a in arrays]


def ensure_tiling(spec_cls, tiling: dict, ins, attrs) -> dict:
    """The tiling dict, computed on the spot when the caller passed none."""
    if tiling:
        return tiling
    return spec_cls.tiling(types_of(ins), attrs)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def view(a: np.ndarray, shape) -> np.ndarray:
    """Reshape that never copies (so results written into it land in ``a``)."""
    v = a.reshape(shape)
    if v.size and not np.may_share_memory(v, a):
        raise ValueError(f"cannot view an array of shape {a.shape} as {shape} without a copy")
    return v


# ------------------------------------------------- 2-D stride-phase layout
# A 2-D sliding window with strides (sh, sw) reads, for kernel tap (a, b), the padded
# input at rows oh*sh + a*dh and columns ow*sw + b*dw.  Splitting the padded input into
# its sh*sw stride phases (plane (pa, pb) holds rows pa::sh and columns pb::sw, Hq x Wq)
# turns every tap into one contiguous run of a plane: computing output rows Wq wide,
# output (oh, ow) of tap (a, b) is plane element (oh + qa) * Wq + ow + qb.  The Wq - Wo
# extra columns are dropped when storing.  Runs may read up to ``slack`` elements past
# the end of a plane (into the next plane, or the zeroed slack after the last one);
# that only ever lands in dropped columns.
def phase_plan(in_sp, out_sp, kernel, strides, dilations, pb) -> dict:
    """Geometry of the phase layout of a 2-D window op (ints only, msgpack-able)."""
    (sh, sw), (dh, dw), (kh, kw) = strides, dilations, kernel
    hp = max((out_sp[0] - 1) * sh + (kh - 1) * dh + 1, in_sp[0] + pb[0])
    wp = max((out_sp[1] - 1) * sw + (kw - 1) * dw + 1, in_sp[1] + pb[1])
    hq, wq = ceil_div(hp, sh), ceil_div(wp, sw)
    phases, taps = [], []
    for a in range(kh):
        for b in range(kw):
            ph = [(a * dh) % sh, (b * dw) % sw]
            if ph not in phases:
                phases.append(ph)
            taps.append([phases.index(ph), (a * dh // sh) * wq + b * dw // sw])
    return dict(hq=hq, wq=wq, phases=phases, taps=taps, pb2=list(pb[:2]),
                slack=max(b * dw // sw for b in range(kw)), plane=hq * wq,
                ho=out_sp[0], wo=out_sp[1], sh=sh, sw=sw)


def phase_bytes(plan: dict, planes_per_phase: int, itemsize: int) -> int:
    return align((len(plan["phases"]) * planes_per_phase * plan["plane"] + plan["slack"])
                 * itemsize)


def pad_into(dst: np.ndarray, src: np.ndarray, pb, pe, fill=0) -> None:
    """Copy ``src`` (C, *sp) into ``dst`` (C, *padded) with ``fill`` in the borders."""
    nsp = len(pb)
    for i in range(nsp):
        size = dst.shape[1 + i]
        for sl in (slice(0, pb[i]), slice(size - pe[i], size)):
            if sl.stop > sl.start:
                idx = [slice(None)] * (1 + nsp)
                idx[1 + i] = sl
                dst[tuple(idx)] = fill
    interior = (slice(None),) + tuple(slice(pb[i], pb[i] + src.shape[1 + i]) for i in range(nsp))
    dst[interior] = src


def pad_into_phases(x: np.ndarray, ws: np.ndarray, offset: int, plan: dict, fill) -> np.ndarray:
    """Write the padded ``x`` (lead..., H, W) into its stride phases in the workspace.

    Returns a read-only view (phase, planes, plane + slack), planes = prod(lead).
    """
    lead = x.shape[:-2]
    npl = prod(lead)
    hq, wq, sh, sw = plan["hq"], plan["wq"], plan["sh"], plan["sw"]
    nph, plane, slack = len(plan["phases"]), plan["plane"], plan["slack"]
    flat = carve(ws, offset, (nph * npl * plane + slack,), x.dtype)
    if slack:
        flat[-slack:] = 0
    dst = view(flat[:nph * npl * plane], (nph, npl, hq, wq))
    x3 = x.reshape(npl, *x.shape[-2:])
    h, w = x.shape[-2:]
    t0, l0 = plan["pb2"]
    for j, (pa, pb) in enumerate(plan["phases"]):
        # plane rows r hold padded row r*sh + pa = input row r*sh + pa - t0
        r_lo, c_lo = ceil_div(max(t0 - pa, 0), sh), ceil_div(max(l0 - pb, 0), sw)
        r_hi = min(hq, ceil_div(h + t0 - pa, sh)) if h + t0 - pa > 0 else 0
        c_hi = min(wq, ceil_div(w + l0 - pb, sw)) if w + l0 - pb > 0 else 0
        d = dst[j]
        if r_hi <= r_lo or c_hi <= c_lo:
            d[...] = fill
            continue
        d[:, :r_lo] = fill
        d[:, r_hi:] = fill
        d[:, r_lo:r_hi, :c_lo] = fill
        d[:, r_lo:r_hi, c_hi:] = fill
        xr, xc = r_lo * sh + pa - t0, c_lo * sw + pb - l0
        d[:, r_lo:r_hi, c_lo:c_hi] = x3[:, xr:xr + (r_hi - r_lo - 1) * sh + 1:sh,
                                        xc:xc + (c_hi - c_lo - 1) * sw + 1:sw]
    it = flat.itemsize
    return as_strided(flat, shape=(nph, npl, plane + slack),
                      strides=(npl * plane * it, plane * it, it), writeable=False)


_ZEROS: dict = {}

#: Tensors below this many elements take numpy's scalar Relu (the zeros view costs more).
RELU_ZEROS_MIN = 4096


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


def relu_zero(x: np.ndarray):
    """The zero to compare ``x`` with in a Relu: numpy's maximum runs its SIMD loop only
    when both operands are arrays of the full shape, against a scalar a scalar loop 3x
    slower (238 against 75 us for 800k float32 here), so a :func:`zeros` view, except for
    small or non-float tensors."""
    if x.size < RELU_ZEROS_MIN or x.dtype.kind != "f":
        return 0
    return zeros(x.shape, x.dtype)


def relu(x: np.ndarray, out: np.ndarray) -> None:
    """out = max(x, 0), NaN kept (see :func:`relu_zero`)."""
    np.maximum(x, relu_zero(x), out=out)


def epilogue(y: np.ndarray, extra: Optional[np.ndarray], attrs: dict) -> None:
    """Fused work after a Conv/MatMul wrote ``y``: + ``extra`` (fused_add), then Relu."""
    if attrs.get("fused_add"):
        np.add(y, extra, out=y)
    if attrs.get("fused_relu"):
        relu(y, y)


#: A constant operand of at most this many elements, once broadcast to the result, is
#: kept expanded by a bound kernel: a same-shape ufunc skips numpy's broadcasting
#: iterator (0.3 instead of 0.85 us per call on 16 x 64).
EXPANDED_MAX = 16384


def expanded(a: np.ndarray, shape: tuple, is_constant: bool) -> np.ndarray:
    """``a`` broadcast to ``shape`` as a small array of its own when it is a constant (a
    weight: its values never change), else ``a`` as is."""
    if is_constant and a.shape != tuple(shape) and prod(shape) <= EXPANDED_MAX:
        return np.ascontiguousarray(np.broadcast_to(a, shape))
    return a


def bound_epilogue(product, y_full: np.ndarray, y: np.ndarray, extra: Optional[np.ndarray],
                   extra_constant: bool, attrs: dict):
    """``product()`` (which writes ``y``, a view of ``y_full``) followed by the fused
    scale, Add and Relu of ``attrs``, as one call with the operands worked out once."""
    scale = y.dtype.type(attrs["fused_scale"]) if "fused_scale" in attrs else None
    with_relu = bool(attrs.get("fused_relu"))
    target = y
    if attrs.get("fused_add"):
        if extra is None:
            return None
        if extra.shape == y_full.shape and y.shape != y_full.shape:
            extra = extra.reshape(y.shape) if extra.flags.c_contiguous else extra
            target = y if extra.shape == y.shape else y_full
        elif extra.ndim > 1 and y.shape != y_full.shape:
            target = y_full
        extra = expanded(extra, target.shape, extra_constant)
    else:
        extra = None
    mul, add, maximum = np.multiply, np.add, np.maximum
    zero = relu_zero(y)
    if scale is None and not with_relu:
        if extra is None:
            return product

        def run():
            product()
            add(target, extra, target)
        return run

    def run():
        product()
        if scale is not None:
            mul(y, scale, y)
        if extra is not None:
            add(target, extra, target)
        if with_relu:
            maximum(y, zero, out=y)
    return run

"""Spatial ops: ConvTranspose, Resize (nearest / n-linear), DepthToSpace, SpaceToDepth."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import check_window_attrs, ints, is_int, window_attrs
from aircc.ops.types import TensorType


# ------------------------------------------------------------ ConvTranspose
def conv_transpose_geometry(in_sp: Sequence[int], kernel: Sequence[int],
                            attrs: dict) -> tuple[list[int], list[int], list[int]]:
    """(output spatial dims, begin pads, end pads) of a ConvTranspose (ints)."""
    nsp = len(in_sp)
    strides, dilations, pads, auto_pad = window_attrs(attrs, nsp, kernel)
    opad = list(attrs.get("output_padding") or [0] * nsp)
    full = [strides[i] * (in_sp[i] - 1) + opad[i] + (kernel[i] - 1) * dilations[i] + 1
            for i in range(nsp)]
    out_shape = attrs.get("output_shape")
    if out_shape:
        out_shape = list(out_shape)[-nsp:]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [in_sp[i] * strides[i] for i in range(nsp)]
    if out_shape:
        total = [full[i] - out_shape[i] for i in range(nsp)]
        if auto_pad == "SAME_UPPER":
            pb = [t // 2 for t in total]
        else:
            pb = [t - t // 2 for t in total]
        pe = [total[i] - pb[i] for i in range(nsp)]
        return list(out_shape), pb, pe
    pb, pe = list(pads[:nsp]), list(pads[nsp:])
    return [full[i] - pb[i] - pe[i] for i in range(nsp)], pb, pe


@define("ConvTranspose", since=1, engine="cube")
def conv_transpose(ctx: InferContext) -> list[TensorType]:
    """Transposed convolution: X (N, C, ...), W (C, M/group, k...), optional B (M)."""
    xt = ctx.input_type(0)
    xs, ws = ctx.input_shape(0), ctx.input_shape(1)
    if len(xs) < 3 or len(ws) != len(xs):
        ctx.fail(f"X {xs} and W {ws} must have the same rank >= 3")
    nsp = len(xs) - 2
    kernel = list(ctx.attrs.get("kernel_shape") or ws[2:])
    strides, dilations, pads, _ = window_attrs(ctx.attrs, nsp, kernel)
    check_window_attrs(ctx, nsp, kernel, strides, dilations, pads)
    g = int(ctx.attrs.get("group", 1))
    if is_int(xs[1]) and is_int(ws[0]) and xs[1] != ws[0]:
        ctx.fail(f"X has {xs[1]} channels but W {ws} expects {ws[0]}")
    m = ws[1] * g if is_int(ws[1]) else ctx.sym(1)
    in_sp = list(xs[2:])
    out, _, _ = conv_transpose_geometry([d if is_int(d) else 1 for d in in_sp], kernel, ctx.attrs)
    fixed = bool(ctx.attrs.get("output_shape"))
    out = [o if fixed or is_int(d) else ctx.sym(2 + i)
           for i, (o, d) in enumerate(zip(out, in_sp))]
    if any(is_int(o) and o <= 0 for o in out):
        ctx.fail(f"output spatial dims would be {out}")
    return [TensorType(xt.dtype, (xs[0], m, *out))]


# ------------------------------------------------------------------ Resize
def _resize_out_shape(ctx, xs, scales, sizes, axes) -> tuple:
    r = len(xs)
    axes = list(range(r)) if axes is None else [a + r if a < 0 else a for a in axes]
    out = list(xs)
    if sizes is not None:
        if len(sizes) != len(axes):
            ctx.fail(f"sizes {sizes} do not match axes {axes}")
        policy = ctx.attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            ctx.unsupported(f"keep_aspect_ratio_policy={policy} is not supported")
        for a, s in zip(axes, sizes):
            out[a] = int(s)
    elif scales is not None:
        if len(scales) != len(axes):
            ctx.fail(f"scales {scales} do not match axes {axes}")
        for a, s in zip(axes, scales):
            out[a] = int(math.floor(xs[a] * s)) if is_int(xs[a]) else (
                xs[a] if s == 1 else ctx.sym(a))
    else:
        ctx.fail("one of scales or sizes is required")
    return tuple(out)


def _opt_vector(ctx: InferContext, i: int):
    """An optional 1-D input: its value, None when absent or empty, False when unknown."""
    if not ctx.has_input(i):
        return None
    v = ctx.value(i)
    if v is not None:
        return v if v.size else None
    t = ctx.types[i]
    if t.shape is not None and len(t.shape) == 1 and t.shape[0] == 0:
        return None
    return False


def _resize(ctx: InferContext, v10: bool) -> list[TensorType]:
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    mode = ctx.attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        ctx.unsupported(f"mode {mode!r} is not supported (nearest and linear are)")
    ctm = ctx.attrs.get("coordinate_transformation_mode", "half_pixel")
    if ctm == "tf_crop_and_resize":
        ctx.unsupported("coordinate_transformation_mode tf_crop_and_resize is not supported")
    if int(ctx.attrs.get("antialias", 0)):
        ctx.unsupported("antialias is not supported")
    policy = ctx.attrs.get("keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
        ctx.unsupported(f"keep_aspect_ratio_policy={policy} is not supported")
    if v10:
        v = ctx.value(1)
        if v is None:
            return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs))))]
        return [TensorType(xt.dtype, _resize_out_shape(ctx, xs, [float(s) for s in
                                                                 np.asarray(v).reshape(-1)],
                                                       None, None))]
    sc, sz = _opt_vector(ctx, 2), _opt_vector(ctx, 3)
    if sc is False or sz is False:
        return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs))))]
    axes = ctx.attrs.get("axes")
    return [TensorType(xt.dtype, _resize_out_shape(
        ctx, xs, None if sc is None else [float(v) for v in sc.reshape(-1)],
        None if sz is None else ints(sz), None if axes is None else list(axes)))]


@define("Resize", since=10, value_inputs=(1,))
def resize10(ctx: InferContext) -> list[TensorType]:
    """Resize with a scales input; asymmetric coordinates, nearest rounds down."""
    return _resize(ctx, v10=True)


@define("Resize", since=11, value_inputs=(2, 3))
def resize11(ctx: InferContext) -> list[TensorType]:
    """Resize with roi/scales/sizes inputs, coordinate_transformation_mode, nearest_mode
    (axes since 18); modes nearest and linear."""
    return _resize(ctx, v10=False)


# ------------------------------------------------- DepthToSpace / SpaceToDepth
@define("DepthToSpace", since=1)
def depth_to_space(ctx: InferContext) -> list[TensorType]:
    """Move blocks of channels to spatial blocks (mode DCR default, CRD since 11)."""
    xs = ctx.input_shape(0)
    bs = int(ctx.attrs["blocksize"])
    if len(xs) != 4:
        ctx.fail(f"input must be 4-D, got {xs}")
    n, c, h, w = xs
    if is_int(c) and c % (bs * bs):
        ctx.fail(f"{c} channels are not divisible by blocksize^2={bs * bs}")
    dims = [c // (bs * bs) if is_int(c) else ctx.sym(1),
            h * bs if is_int(h) else ctx.sym(2), w * bs if is_int(w) else ctx.sym(3)]
    return [TensorType(ctx.input_type(0).dtype, (n, *dims))]


@define("SpaceToDepth", since=1)
def space_to_depth(ctx: InferContext) -> list[TensorType]:
    """Move spatial blocks into channels."""
    xs = ctx.input_shape(0)
    bs = int(ctx.attrs["blocksize"])
    if ctx.attrs.get("mode", "DCR") != "DCR":
        ctx.unsupported(f"mode {ctx.attrs['mode']!r} is not supported (DCR is)")
    if len(xs) != 4:
        ctx.fail(f"input must be 4-D, got {xs}")
    n, c, h, w = xs
    for d in (h, w):
        if is_int(d) and d % bs:
            ctx.fail(f"spatial dims {h}x{w} are not divisible by blocksize={bs}")
    dims = [c * bs * bs if is_int(c) else ctx.sym(1),
            h // bs if is_int(h) else ctx.sym(2), w // bs if is_int(w) else ctx.sym(3)]
    return [TensorType(ctx.input_type(0).dtype, (n, *dims))]

"""Spatial ops: ConvTranspose (GEMM + col2im), Resize (nearest / n-linear), DepthToSpace,
SpaceToDepth."""
from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import (
    align, carve, check_window_attrs, ensure_tiling, ints, is_int, prod, view, window_attrs,
    workspace)
from aircc.executor.kernels.registry import InferContext, op


# ------------------------------------------------------------ ConvTranspose
def _convt_geometry(in_sp, kernel, attrs) -> tuple[list[int], list[int], list[int]]:
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


@op("ConvTranspose", since=1, engine="cube")
class ConvTranspose:
    """Transposed convolution: X (N, C, ...), W (C, M/group, k...), optional B (M)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
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
        out, _, _ = _convt_geometry([d if is_int(d) else 1 for d in in_sp], kernel, ctx.attrs)
        fixed = bool(ctx.attrs.get("output_shape"))
        out = [o if fixed or is_int(d) else ctx.sym(2 + i)
               for i, (o, d) in enumerate(zip(out, in_sp))]
        if any(is_int(o) and o <= 0 for o in out):
            ctx.fail(f"output spatial dims would be {out}")
        return [TensorType(xt.dtype, (xs[0], m, *out))]

    @staticmethod
    def tiling(types, attrs) -> dict:
        xs, wsh = [int(d) for d in types[0].shape], [int(d) for d in types[1].shape]
        nsp = len(xs) - 2
        kernel = [int(k) for k in (attrs.get("kernel_shape") or wsh[2:])]
        strides, dilations, _, _ = window_attrs(attrs, nsp, kernel)
        out_sp, pb, pe = _convt_geometry(xs[2:], kernel, attrs)
        g = int(attrs.get("group", 1))
        c, m = xs[1], wsh[1] * g
        # the full (uncropped) result: every tap lands inside it
        full = [max((xs[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1,
                    pb[i] + out_sp[i]) for i in range(nsp)]
        item = np.dtype(types[0].dtype).itemsize
        cols = align(m * prod(kernel) * prod(xs[2:]) * item)
        return dict(n=xs[0], c=c, m=m, g=g, kernel=kernel, strides=strides,
                    dilations=dilations, out=out_sp, pb=pb, full=full, cols_bytes=cols,
                    workspace=cols + align(m * prod(full) * item))

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, w = ins[0], ins[1]
        b = ins[2] if len(ins) > 2 else None
        y = outs[0]
        t = ensure_tiling(ConvTranspose, tiling, ins, attrs)
        ws = workspace(ws, t["workspace"])
        n, c, m, g, kernel = t["n"], t["c"], t["m"], t["g"], t["kernel"]
        cg, mg, kk = c // g, m // g, prod(kernel)
        in_sp, nsp = x.shape[2:], len(kernel)
        l = prod(in_sp)
        cols = carve(ws, 0, (g, mg * kk, l), x.dtype)
        full = carve(ws, t["cols_bytes"], (m, *t["full"]), x.dtype)
        w3 = w.reshape(g, cg, mg * kk).transpose(0, 2, 1)
        st = full.strides
        for i in range(n):
            np.matmul(w3, x[i].reshape(g, cg, l), out=cols)
            c5 = view(cols, (m, kk, *in_sp))
            full[...] = 0
            for k, kpos in enumerate(itertools.product(*(range(kd) for kd in kernel))):
                base = full[(slice(None),) + tuple(slice(kpos[j] * t["dilations"][j], None)
                                                   for j in range(nsp))]
                dst = as_strided(base, shape=(m, *in_sp),
                                 strides=(st[0], *(st[1 + j] * t["strides"][j]
                                                   for j in range(nsp))))
                np.add(dst, c5[:, k], out=dst)
            crop = full[(slice(None),) + tuple(slice(t["pb"][j], t["pb"][j] + t["out"][j])
                                               for j in range(nsp))]
            if b is None:
                np.copyto(y[i], crop)
            else:
                np.add(crop, b.reshape((m,) + (1,) * nsp), out=y[i])


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


def _source_coords(mode: str, out_len: int, in_len: int, scale: float) -> np.ndarray:
    y = np.arange(out_len, dtype=np.float64)
    out_w = scale * in_len
    if mode == "asymmetric":
        return y / scale
    if mode == "align_corners":
        return np.zeros(out_len) if out_w == 1 else y * (in_len - 1) / (out_w - 1)
    if mode == "pytorch_half_pixel":
        return np.full(out_len, -0.5) if out_w == 1 else (y + 0.5) / scale - 0.5
    if mode == "tf_half_pixel_for_nearest":
        return (y + 0.5) / scale
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / out_w)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5  # half_pixel


def _nearest_index(xo: np.ndarray, mode: str, in_len: int) -> np.ndarray:
    if mode == "floor":
        i = np.floor(xo)
    elif mode == "ceil":
        i = np.ceil(xo)
    elif mode == "round_prefer_ceil":
        i = np.floor(xo + 0.5)
    else:  # round_prefer_floor
        i = np.ceil(xo - 0.5)
    return np.clip(i, 0, in_len - 1).astype(np.int64)


class _ResizeBase:
    V10 = False

    @classmethod
    def params(cls, ins, attrs, x_shape):
        """(scales per axis, output shape) from the runtime inputs."""
        r = len(x_shape)
        if cls.V10:
            scales = [float(s) for s in np.asarray(ins[1]).reshape(-1)]
            return scales
        axes = attrs.get("axes")
        axes = list(range(r)) if axes is None else [a + r if a < 0 else a for a in axes]
        scales = [1.0] * r
        sc = ins[2] if len(ins) > 2 and ins[2] is not None and ins[2].size else None
        sz = ins[3] if len(ins) > 3 and ins[3] is not None and ins[3].size else None
        for j, a in enumerate(axes):
            scales[a] = float(sc.reshape(-1)[j]) if sc is not None else \
                int(sz.reshape(-1)[j]) / x_shape[a]
        return scales

    @classmethod
    def infer(cls, ctx: InferContext) -> list[TensorType]:
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
        if cls.V10:
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

    @classmethod
    def kernel(cls, ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        scales = cls.params(ins, attrs, x.shape)
        mode = attrs.get("mode", "nearest")
        ctm = "asymmetric" if cls.V10 else attrs.get("coordinate_transformation_mode",
                                                     "half_pixel")
        nmode = "floor" if cls.V10 else attrs.get("nearest_mode", "round_prefer_floor")
        cur = x
        for a in range(x.ndim):
            if y.shape[a] == x.shape[a] and scales[a] == 1.0:
                continue
            xo = _source_coords(ctm, y.shape[a], x.shape[a], scales[a])
            if mode == "nearest":
                cur = np.take(cur, _nearest_index(xo, nmode, x.shape[a]), axis=a)
                continue
            xo = np.clip(xo, 0, x.shape[a] - 1)
            lo = np.floor(xo).astype(np.int64)
            hi = np.minimum(lo + 1, x.shape[a] - 1)
            shape = [1] * x.ndim
            shape[a] = -1
            wgt = (xo - lo).reshape(shape)
            lo_v, hi_v = np.take(cur, lo, axis=a), np.take(cur, hi, axis=a)
            cur = lo_v + (hi_v - lo_v) * wgt.astype(x.dtype if x.dtype.kind == "f" else
                                                    np.float64)
        np.copyto(y, cur, casting="unsafe")


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


@op("Resize", since=10, value_inputs=(1,))
class Resize10(_ResizeBase):
    """Resize with a scales input; asymmetric coordinates, nearest rounds down."""

    V10 = True


@op("Resize", since=11, value_inputs=(2, 3))
class Resize11(_ResizeBase):
    """Resize with roi/scales/sizes inputs, coordinate_transformation_mode, nearest_mode
    (axes since 18); modes nearest and linear."""


# ------------------------------------------------- DepthToSpace / SpaceToDepth
@op("DepthToSpace", since=1)
class DepthToSpace:
    """Move blocks of channels to spatial blocks (mode DCR default, CRD since 11)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
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

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        bs = int(attrs["blocksize"])
        n, c, h, w = x.shape
        if attrs.get("mode", "DCR") == "CRD":
            v = x.reshape(n, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
        else:
            v = x.reshape(n, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
        np.copyto(view(y, v.shape), v)


@op("SpaceToDepth", since=1)
class SpaceToDepth:
    """Move spatial blocks into channels."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
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

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        bs = int(attrs["blocksize"])
        n, c, h, w = x.shape
        v = x.reshape(n, c, h // bs, bs, w // bs, bs).transpose(0, 3, 5, 1, 2, 4)
        np.copyto(view(y, v.shape), v)

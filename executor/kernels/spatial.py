"""Spatial kernels: ConvTranspose (GEMM + col2im), Resize (nearest / n-linear), DepthToSpace,
SpaceToDepth."""
from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.ops.defs.spatial import conv_transpose_geometry
from aircc.ops.shapes import prod, window_attrs
from aircc.ops.targets import Target

from .numpy_backend import NUMPY
from .scratch import align, carve, ensure_tiling, view, workspace


# ------------------------------------------------------------ ConvTranspose
@NUMPY.kernel("ConvTranspose", since=1)
class ConvTranspose:
    """One GEMM per sample into columns (M * k taps, input positions), each tap then
    added into the full result at its stride, the result cropped by the pads, plus B."""

    @staticmethod
    def tiling(types, attrs: dict, target: Target) -> dict:
        xs, wsh = [int(d) for d in types[0].shape], [int(d) for d in types[1].shape]
        nsp = len(xs) - 2
        kernel = [int(k) for k in (attrs.get("kernel_shape") or wsh[2:])]
        strides, dilations, _, _ = window_attrs(attrs, nsp, kernel)
        out_sp, pb, pe = conv_transpose_geometry(xs[2:], kernel, attrs)
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
    """One axis at a time: gather (nearest) or blend two gathers (linear)."""

    V10 = False

    @classmethod
    def params(cls, ins, attrs, x_shape):
        """The scale of every axis, from the runtime inputs."""
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


@NUMPY.kernel("Resize", since=10)
class Resize10(_ResizeBase):
    """Scales from input 1; asymmetric coordinates, nearest rounds down."""

    V10 = True


@NUMPY.kernel("Resize", since=11)
class Resize11(_ResizeBase):
    """Scales from input 2 or sizes from input 3, over ``axes``."""


# ------------------------------------------------- DepthToSpace / SpaceToDepth
@NUMPY.kernel("DepthToSpace", since=1)
class DepthToSpace:
    """A reshape, a transpose and one copy (DCR or CRD order)."""

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


@NUMPY.kernel("SpaceToDepth", since=1)
class SpaceToDepth:
    """A reshape, a transpose and one copy."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, y = ins[0], outs[0]
        bs = int(attrs["blocksize"])
        n, c, h, w = x.shape
        v = x.reshape(n, c, h // bs, bs, w // bs, bs).transpose(0, 3, 5, 1, 2, 4)
        np.copyto(view(y, v.shape), v)

"""Winograd convolution F(m x m, 3 x 3) for Conv's ``winograd`` mode (m = 2 or 4).

A 3x3, stride-1 convolution computes each m x m output tile from an (m+2) x (m+2)
input tile.  In the Winograd domain the tile's convolution is an elementwise product,
so per tile position f (one of (m+2)^2) the whole layer is one GEMM
``U[f] (M x C) @ V[f] (C x tiles)``: (m+2)^2 / (9 m^2) of the direct multiply-adds,
0.44 for m = 2 and 0.25 for m = 4 (Lavin and Gray, "Fast Algorithms for Convolutional
Neural Networks", 2016).  Every transform is itself a small GEMM, so no pass runs an
elementwise Python loop:

1. the padded input (C, Hp, Wp) is copied once as its overlapping tiles
   D (a, a, C, tiles), a = m + 2;
2. ``V = B^T D B``: one GEMM over the tile rows (K = a), one batched over the columns;
3. ``Mo[f] = U[f] @ V[f]`` for the a*a positions (numpy loops the BLAS calls in C);
4. ``Y = A^T Mo A``: the row transform, then the column transform with the result
   laid out (m rows, M, tiles, m columns), so the last copy into Y (with the bias
   added on the way) moves whole output rows.

U = G g G^T, (a*a, M, C), is made once per weight (``weights``), in float64.  The
transforms' points are 0, +-1, +-2 and infinity: m = 4 keeps float32 results within
about 1e-5 of the largest output (m = 2 within 5e-7).  The tile size per shape is
``choose_tile``'s, from per-shape sweeps of this kernel against the GEMM modes, one set
of thresholds per class of BLAS kernels (AVX2, AVX-512): the compile target's vector
class picks them, so a .om carries the choice made for the machines it was compiled for.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.executor.device.prepared import prepared_array
from aircc.ops.defs.conv import HWOI, OIHW

from ..epilogue import epilogue
from ..phases import pad_into
from ..scratch import align, carve, workspace


@dataclass(frozen=True)
class Thresholds:
    """Which 3x3 stride-1 convs the Winograd mode takes, for one class of BLAS kernels.

    The transforms cost per element of the input and output and are memory-bound; the
    GEMM work they save costs what the BLAS's GEMM costs.  Found by per-shape sweeps of
    this kernel against the GEMM modes on the light models' shapes (an AMD EPYC)."""

    min_channels: int
    """Both operand channel counts at least this."""
    f4_min_tiles: int
    """F(4x4, 3x3) when the output has at least this many 4 x 4 tiles: below, the
    GEMMs' N (the tile count) runs far from peak and partial tiles waste more."""
    f4_max_tiles: int | None
    """... and at most this many (None: no limit): on bigger planes the transforms'
    passes leave the caches."""
    f2_min_channels: int
    """F(2x2, 3x3) on smaller outputs when both channel counts are at least this, ..."""
    f2_min_reduced: float
    """... C M / (C + M) at least this (GEMM work saved per element transformed), ..."""
    f2_min_tiles: int
    """... and the output has at least this many 2 x 2 tiles."""


THRESHOLDS = {
    # AVX2 GEMMs (about 265 GFLOP/s on 2 cores here): F4 0.46-0.95 of the GEMM modes'
    # time (0.46 at 512 channels, 28 x 28; 0.95 at 64 channels, 224 x 224); F2 0.79-0.93
    # at 13 x 13 and 14 x 14; 64 -> 64 and 64 -> 96 at 14 x 14 lose (1.19-1.26).  At 7 x 7
    # F2 wins only with warm caches (0.62-0.92): in a network, where every layer's
    # weights come from memory, its transformed weights (16/9 the size) make it 0.99 at
    # 512 channels and 1.10-1.20 at 160-256 (weights and caches flushed before each
    # call); ResNet-50 0.999 and Inception-v2 0.98 without it, A/B in one process.
    "avx2": Thresholds(min_channels=64, f4_min_tiles=36, f4_max_tiles=None,
                       f2_min_channels=96, f2_min_reduced=0, f2_min_tiles=36),
    # AVX-512 GEMMs (about 480 GFLOP/s): the same transforms against GEMMs twice as
    # fast.  F4 still 0.58-0.97 up to 56 x 56 but 1.04-1.37 at 112 x 112 and 224 x 224;
    # F2 0.76-0.92 at 13-14 with C M / (C + M) >= 74, 1.05-1.12 below 66 and at 7 x 7.
    "avx512": Thresholds(min_channels=64, f4_min_tiles=36, f4_max_tiles=256,
                         f2_min_channels=96, f2_min_reduced=70, f2_min_tiles=36),
}


def thresholds(vector_class: str) -> Thresholds:
    """The thresholds for BLAS kernels of ``vector_class`` ("avx2" or "avx512": a compile
    target's)."""
    try:
        return THRESHOLDS[vector_class]
    except KeyError:
        raise ValueError(f"vector class {vector_class!r} is not a class of BLAS kernels; "
                         f"known: {', '.join(sorted(THRESHOLDS))}") from None


def _tiles(out_sp, m: int) -> int:
    return -(-int(out_sp[0]) // m) * -(-int(out_sp[1]) // m)


def choose_tile(c: int, m: int, g: int, kernel, strides, dilations, out_sp, dtype,
                limits: Thresholds) -> int:
    """The Winograd output tile (4 or 2) for a 2-D conv of these parameters, or 0 when
    the conv is not a 3x3 stride-1 undilated ungrouped float conv worth it (by
    ``limits``: :func:`thresholds` of the target's vector class)."""
    if (g != 1 or list(kernel) != [3, 3] or list(strides) != [1, 1]
            or list(dilations) != [1, 1] or np.dtype(dtype) not in (np.float32, np.float64)
            or min(c, m) < limits.min_channels):
        return 0
    t4 = _tiles(out_sp, 4)
    if t4 >= limits.f4_min_tiles and (limits.f4_max_tiles is None or t4 <= limits.f4_max_tiles):
        return 4
    if (t4 < limits.f4_min_tiles and min(c, m) >= limits.f2_min_channels
            and c * m / (c + m) >= limits.f2_min_reduced and _tiles(out_sp, 2) >= limits.f2_min_tiles):
        return 2
    return 0


@functools.lru_cache(maxsize=None)
def matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B^T, G, A^T) of F(m, 3) in float64, points 0, +-1, (+-2), infinity."""
    if m == 2:
        bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
        g = [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]
        at = [[1, 1, 1, 0], [0, 1, -1, -1]]
    elif m == 4:
        bt = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
              [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
        g = [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
             [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
        at = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
    else:
        raise ValueError(f"Winograd F({m}, 3) is not implemented (tiles 2 and 4 are)")
    return tuple(np.array(v, np.float64) for v in (bt, g, at))


@functools.lru_cache(maxsize=None)
def _transforms(m: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(B^T, A^T) of F(m, 3) in ``dtype``, made once."""
    bt, _, at = matrices(m)
    return bt.astype(dtype), at.astype(dtype)


#: Weight rows (output x input channel pairs) transformed per block: each block's
#: product stays in cache until it is stored transposed (512 x 512 weights in 11 ms,
#: against 60-150 ms for one GEMM over all of them or an einsum).
WEIGHT_BLOCK = 8192


def weights_shape(w_shape, m: int) -> tuple[int, int, int]:
    """The shape of :func:`weights`' result for ONNX-layout weights of ``w_shape``."""
    return ((m + 2) ** 2, int(w_shape[0]), int(w_shape[1]))


def weights(w: np.ndarray, m: int, out: np.ndarray | None = None) -> np.ndarray:
    """U = G w G^T for ONNX-layout weights (M, C, 3, 3), as (a*a, M, C) in w's dtype
    (into ``out`` when given): per block of (M, C) pairs, their taps (pairs x 9) times
    kron(G, G)^T, in float64."""
    _, g, _ = matrices(m)
    a = m + 2
    n_out, c = w.shape[:2]
    taps = w.reshape(n_out * c, 9)
    k = np.ascontiguousarray(np.kron(g, g).T)
    if out is None:
        out = np.empty(weights_shape(w.shape, m), w.dtype)
    u = out.reshape(a * a, n_out * c)
    for s in range(0, n_out * c, WEIGHT_BLOCK):
        u[:, s:s + WEIGHT_BLOCK] = (taps[s:s + WEIGHT_BLOCK].astype(np.float64) @ k).T
    return out


def geometry(c: int, m_out: int, out_sp, m: int, itemsize: int) -> dict:
    """Tile counts and workspace layout of one image: the padded input, two buffers
    for the transforms (each reused twice) and the GEMMs' products."""
    a = m + 2
    th, tw = -(-int(out_sp[0]) // m), -(-int(out_sp[1]) // m)
    tiles = th * tw
    hp, wp = th * m + 2, tw * m + 2
    first = align(max(a * a * c, m * a * m_out) * tiles * itemsize)
    second = align(max(a * a * c, m * m * m_out) * tiles * itemsize)
    pad_bytes = align(c * hp * wp * itemsize)
    return dict(tile=m, th=th, tw=tw, hp=hp, wp=wp, first_off=pad_bytes,
                second_off=pad_bytes + first, prod_off=pad_bytes + first + second,
                workspace=pad_bytes + first + second + align(a * a * m_out * tiles * itemsize))


def run(x: np.ndarray, u: np.ndarray, y: np.ndarray, bias, pb, t: dict, ws: np.ndarray) -> None:
    """One image: x (C, H, W) -> y (M, Ho, Wo) = conv(x) + bias, via the tiles of ``t``
    (``geometry``); ``pb`` is the top and left padding."""
    m, th, tw, hp, wp = t["tile"], t["th"], t["tw"], t["hp"], t["wp"]
    a, tiles, dt = m + 2, th * tw, x.dtype
    c, n_out = x.shape[0], y.shape[0]
    ho, wo = y.shape[1:]
    bt, at = _transforms(m, dt)
    padded = carve(ws, 0, (c, hp, wp), dt)
    pad_into(padded, x, pb, [hp - x.shape[1] - pb[0], wp - x.shape[2] - pb[1]])
    it = padded.itemsize
    src = as_strided(padded, shape=(a, a, c, th, tw),
                     strides=(wp * it, it, hp * wp * it, m * wp * it, m * it), writeable=False)
    first = carve(ws, t["first_off"], (a, a, c, th, tw), dt)
    second = carve(ws, t["second_off"], (a, a, c * tiles), dt)
    np.copyto(first, src)
    np.matmul(bt, first.reshape(a, a * c * tiles), out=second.reshape(a, a * c * tiles))
    v = first.reshape(a, a, c * tiles)
    np.matmul(bt, second, out=v)
    prod = carve(ws, t["prod_off"], (a * a, n_out, tiles), dt)
    np.matmul(u, v.reshape(a * a, c, tiles), out=prod)
    rows = carve(ws, t["first_off"], (m, a, n_out * tiles), dt)
    np.matmul(at, prod.reshape(a, a * n_out * tiles), out=rows.reshape(m, a * n_out * tiles))
    out = carve(ws, t["second_off"], (m, n_out * tiles, m), dt)
    np.matmul(rows.transpose(0, 2, 1), at.T, out=out)
    # out[r, M, i, j, s] is y[M, i*m + r, j*m + s]: (M, i, r, j*m + s) views
    res = out.reshape(m, n_out, th, tw * m).transpose(1, 2, 0, 3)
    full = ho // m
    b4 = None if bias is None else bias.reshape(n_out, 1, 1, 1)
    if full:
        _store(res[:, :full, :, :wo], y[:, :full * m].reshape(n_out, full, m, wo), b4)
    if ho > full * m:
        _store(res[:, full, :ho - full * m, :wo], y[:, full * m:],
               None if b4 is None else b4[..., 0])


def _store(src: np.ndarray, dst: np.ndarray, bias) -> None:
    if bias is None:
        np.copyto(dst, src)
    else:
        np.add(src, bias, out=dst)


def onnx_weights(w: np.ndarray, attrs: dict) -> np.ndarray:
    """Conv weights in ONNX's (M, C/group, kH, kW) layout (a view of packed ones)."""
    return w.transpose(2, 3, 0, 1) if attrs.get("weight_layout", OIHW) == HWOI else w


def conv(ins, outs, attrs: dict, t: dict, ws, u: np.ndarray | None = None) -> None:
    """Conv's ``winograd`` mode: F(m, 3) per image (:func:`run`: bias added in its last
    copy), then the fused residual and Relu.  Unprepared (``u`` None: weights not
    constant), the weights are transformed on every call."""
    x, y = ins[0], outs[0]
    b = ins[2] if len(ins) > 2 else None
    if not np.isfinite(np.add.reduce(x, axis=None)):    # NaN or +-inf in x (or a sum past
        direct(x, onnx_weights(ins[1], attrs), b, t["pb"], y)          # the float range)
    else:
        if u is None:
            u = weights(onnx_weights(ins[1], attrs), t["tile"])
        ws = workspace(ws, t["workspace"])
        for i in range(t["n"]):
            run(x[i], u, y[i], b, t["pb"], t, ws)
    epilogue(y, ins[3] if len(ins) > 3 else None, attrs)


def direct(x: np.ndarray, w: np.ndarray, bias, pb, y: np.ndarray) -> None:
    """y = conv(x) + bias, the 3x3 stride-1 conv as nine products, one per tap: for an x
    with NaN or an infinity, where the transforms, which add and subtract a tile's inputs,
    would make NaN of every output of its tile."""
    n, c, h, wd = x.shape
    ho, wo = y.shape[2:]
    padded = np.zeros((n, c, ho + 2, wo + 2), x.dtype)
    padded[:, :, pb[0]:pb[0] + h, pb[1]:pb[1] + wd] = x[:, :, :ho + 2 - pb[0], :wo + 2 - pb[1]]
    acc = np.zeros((n, w.shape[0], ho * wo), y.dtype)
    for r in range(3):
        for s in range(3):
            tap = np.ascontiguousarray(padded[:, :, r:r + ho, s:s + wo]).reshape(n, c, ho * wo)
            acc += np.matmul(w[:, :, r, s], tap)
    if bias is not None:
        acc += bias.reshape(1, -1, 1)
    np.copyto(y, acc.reshape(y.shape))


def prepare(ins, outs, attrs: dict, t: dict, ws, prepared=None):
    """:func:`conv` bound to constant weights: U made once, in device memory (``prepared``)."""
    w = ins[1]
    m, wo = t["tile"], onnx_weights(w, attrs)
    u = prepared_array(prepared, ("winograd", m, w.ctypes.data, w.shape, w.dtype.str),
                       weights_shape(wo.shape, m), w.dtype,
                       lambda out: weights(wo, m, out))
    return lambda: conv(ins, outs, attrs, t, ws, u)

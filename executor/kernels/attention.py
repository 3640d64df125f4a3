"""aircc.Attention kernel: multi-head self-attention from its input to its heads' context
(:mod:`aircc.ops.defs.attention`)."""
from __future__ import annotations

import math

import numpy as np

from aircc.ops.shapes import prod
from aircc.ops.targets import Target
from aircc.ops.types import TensorType

from .epilogue import expanded
from .fused import LN2, softmax_matmul
from .numpy_backend import NUMPY
from .scratch import align, carve, ensure_tiling, workspace
from .softmax import softmax_exact

#: The axes of a [B, S, ...] (or, seq-first, [S, B, ...]) head tensor in [B, H, S, D] order.
HEADS_ORDER = {False: (0, 2, 1, 3), True: (1, 2, 0, 3)}


def _geometry(x_shape, w_shape, heads: int, seq_first: bool) -> tuple[int, int, int, int, int]:
    """(B, S, E, H, D) of an input [B, S, E] (or [S, B, E]) and packed weights [E, 3 H D]."""
    d0, d1, e = (int(d) for d in x_shape)
    hd = int(w_shape[1]) // 3
    b, s = (d1, d0) if seq_first else (d0, d1)
    return b, s, e, heads, hd // heads


def _sections(b: int, s: int, h: int, d: int, e_shape, itemsize: int) -> list[int]:
    """Byte offsets in the workspace of Q|K|V, the scores, their exponentials and the
    unnormalised context, and the end."""
    sizes = [b * s * 3 * h * d, b * h * s * s, prod(e_shape), b * h * s * d]
    offsets = [0]
    for n in sizes:
        offsets.append(offsets[-1] + align(n * itemsize))
    return offsets


def _guarded(q, kt, m, v, y, scores, base2: bool) -> None:
    """y = p @ v with p = softmax(q kt + m) and its NaNs counted as 0 (the exact path, for
    the rare run whose context came out NaN)."""
    np.matmul(q, kt, out=scores)
    z = scores * LN2 if base2 else scores.copy()
    if m is not None:
        z = z + m
    with np.errstate(invalid="ignore"):
        softmax_exact(z, z, z.ndim - 1)
    z[np.isnan(z)] = 0
    np.matmul(z, v, out=y)


@NUMPY.kernel("Attention", 1, "aircc")
class Attention:
    """softmax(Q K^T + M) V for ``heads`` heads, with [Q | K | V] = X @ W + b in one GEMM.

    Inputs: X [B, S, E] (``seq_first_in``: [S, B, E]), W [E, 3 H D] (Wq, Wk, Wv side by
    side), b [3 H D], and optionally the additive mask M (broadcast to [B, H, S, S]).
    Output: the context [B, S, H, D] (``seq_first_out``: [S, B, H, D]).  ``base2=1``
    (set by the fuse-attention pass): Wq and bq carry a factor log2 e, so the scores
    are in units of log2 and are exponentiated with exp2 (twice as fast as exp in
    numpy); the mask stays in natural units.  Q, K^T and V are read as strided views
    of the one product, whichever layout X has (BLAS takes K^T as a transposed
    operand: 166 against 176 us with a copy at (8, 128)); the softmax and the product
    with V are :func:`softmax_matmul` (normalisation deferred to the result, which it
    writes into the output's layout in the same pass).  ``nan_guard=1``: a context
    that came out NaN (one sum over it tells) is made again the exact way with the
    NaN probabilities as 0."""

    @staticmethod
    def tiling(types: list[TensorType], attrs: dict, target: Target) -> dict:
        if not all(t.is_static for t in types if t is not None):
            return {}
        b, s, _, h, d = _geometry(types[0].shape, types[1].shape, int(attrs["heads"]),
                                  bool(attrs.get("seq_first_in")))
        e_shape = (b, h, s, s)
        if len(types) > 3 and types[3] is not None:
            e_shape = np.broadcast_shapes(e_shape, types[3].shape)
        offsets = _sections(b, s, h, d, e_shape, 4)
        return {"workspace": offsets[-1], "e_shape": list(e_shape), "offsets": offsets}

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        x, w, bias = ins[0], ins[1], ins[2]
        if not tiling or ws is None or ws.nbytes < tiling["offsets"][-1] or not x.flags.c_contiguous:
            return None
        m = ins[3] if len(ins) > 3 else None
        b, s, e, h, d = _geometry(x.shape, w.shape, int(attrs["heads"]), bool(attrs.get("seq_first_in")))
        off, dt = tiling["offsets"], x.dtype
        x2 = x.reshape(b * s, e)
        qkv = carve(ws, off[0], (b * s, 3 * h * d), dt)
        bias = expanded(bias, qkv.shape, constant[2])
        heads = qkv.reshape(x.shape[0], x.shape[1], 3, h, d)
        order = HEADS_ORDER[bool(attrs.get("seq_first_in"))]
        q, k, v = (heads[:, :, i].transpose(order) for i in range(3))
        kt = k.swapaxes(2, 3)
        scores = carve(ws, off[1], (b, h, s, s), dt)
        ex = carve(ws, off[2], tuple(tiling["e_shape"]), dt)
        product = carve(ws, off[3], (b, h, s, d), dt)
        y = outs[0].transpose(HEADS_ORDER[bool(attrs.get("seq_first_out"))])
        mm, add, base2 = np.matmul, np.add, bool(attrs.get("base2"))
        flat = outs[0].reshape(-1) if attrs.get("nan_guard") and outs[0].flags.c_contiguous else None

        def run():
            mm(x2, w, qkv)
            add(qkv, bias, qkv)
            mm(q, kt, scores)
            softmax_matmul(scores, m, v, y, ex, base2, product)
            if flat is not None and math.isnan(add.reduce(flat)):
                _guarded(q, kt, m, v, y, scores, base2)
        return run

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        """Called directly (not bound): the bound form, made on the spot and run once."""
        tiling = ensure_tiling(Attention, tiling, ins, attrs)
        ins = [np.ascontiguousarray(ins[0]), *ins[1:]]
        y = outs[0] if outs[0].flags.c_contiguous else np.empty_like(outs[0])
        run = Attention.prepare(ins, [y], attrs, tiling, workspace(ws, tiling["offsets"][-1]),
                                [False] * len(ins))
        run()
        if y is not outs[0]:
            outs[0][...] = y

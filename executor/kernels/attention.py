"""aircc.Attention kernel: multi-head self-attention from its input to its heads' context
(:mod:`aircc.ops.defs.attention`)."""
from __future__ import annotations

import numpy as np

from aircc.ops.shapes import prod
from aircc.ops.targets import Target
from aircc.ops.types import TensorType

from .epilogue import expanded
from .fused import softmax_matmul
from .numpy_backend import NUMPY
from .scratch import align, carve, ensure_tiling, workspace


def _geometry(x_shape, w_shape, heads: int) -> tuple[int, int, int, int, int]:
    """(B, S, E, H, D) of an input [B, S, E] and packed weights [E, 3 H D]."""
    b, s, e = (int(d) for d in x_shape)
    hd = int(w_shape[1]) // 3
    return b, s, e, heads, hd // heads


def _sections(b: int, s: int, h: int, d: int, e_shape, itemsize: int) -> list[int]:
    """Byte offsets in the workspace of Q|K|V, the scores, their exponentials and the
    unnormalised context, and the end."""
    sizes = [b * s * 3 * h * d, b * h * s * s, prod(e_shape), b * h * s * d]
    offsets = [0]
    for n in sizes:
        offsets.append(offsets[-1] + align(n * itemsize))
    return offsets


@NUMPY.kernel("Attention", 1, "aircc")
class Attention:
    """softmax(Q K^T + M) V for ``heads`` heads, with [Q | K | V] = X @ W + b in one GEMM.

    Inputs: X [B, S, E], W [E, 3 H D] (Wq, Wk, Wv side by side), b [3 H D], and
    optionally the additive mask M (broadcast to [B, H, S, S]).  Output: the context
    [B, S, H, D] (heads next to each other per position, as the exporters' final
    Reshape to [B, S, H D] wants).  ``base2=1`` (set by the fuse-attention pass): Wq
    and bq carry a factor log2 e, so the scores are in units of log2 and are
    exponentiated with exp2 (twice as fast as exp in numpy); the mask stays in natural
    units.  Q, K^T and V are read as
    strided views of the one product (BLAS takes K^T as a transposed operand: 166
    against 176 us with a copy at (8, 128)); the softmax and the product with V are
    :func:`softmax_matmul` (normalisation deferred to the result, which it writes
    into the output's head layout in the same pass)."""

    @staticmethod
    def tiling(types: list[TensorType], attrs: dict, target: Target) -> dict:
        if not all(t.is_static for t in types if t is not None):
            return {}
        b, s, _, h, d = _geometry(types[0].shape, types[1].shape, int(attrs["heads"]))
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
        b, s, e, h, d = _geometry(x.shape, w.shape, int(attrs["heads"]))
        off, dt = tiling["offsets"], x.dtype
        x2 = x.reshape(b * s, e)
        qkv = carve(ws, off[0], (b * s, 3 * h * d), dt)
        bias = expanded(bias, qkv.shape, constant[2])
        heads = qkv.reshape(b, s, 3, h, d)
        q, k, v = (heads[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        kt = k.swapaxes(2, 3)
        scores = carve(ws, off[1], (b, h, s, s), dt)
        ex = carve(ws, off[2], tuple(tiling["e_shape"]), dt)
        product = carve(ws, off[3], (b, h, s, d), dt)
        y = outs[0].transpose(0, 2, 1, 3)
        mm, add, base2 = np.matmul, np.add, bool(attrs.get("base2"))

        def run():
            mm(x2, w, qkv)
            add(qkv, bias, qkv)
            mm(q, kt, scores)
            softmax_matmul(scores, m, v, y, ex, base2, product)
        return run

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        """Called directly (not bound): the bound form, made on the spot and run once."""
        tiling = ensure_tiling(Attention, tiling, ins, attrs)
        ins = [np.ascontiguousarray(ins[0]), *ins[1:]]
        run = Attention.prepare(ins, outs, attrs, tiling, workspace(ws, tiling["offsets"][-1]),
                                [False] * len(ins))
        run()


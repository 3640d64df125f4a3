"""aircc.Attention: multi-head self-attention from its input to its heads' context (made by
the fuse-attention pass)."""
from __future__ import annotations

import numpy as np

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import (align, broadcast_shapes, carve, expanded, is_int, prod,
                                            workspace)
from aircc.executor.kernels.fused import softmax_matmul
from aircc.executor.kernels.registry import InferContext, op


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


@op("Attention", since=1, domain="aircc", foldable=False, engine="cube")
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
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        x, w, b = ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)
        heads = int(ctx.attrs.get("heads", 0))
        if len(x) != 3 or len(w) != 2 or len(b) != 1:
            ctx.fail(f"X {x} must be [B, S, E], W {w} [E, 3 H D] and b {b} [3 H D]")
        if xt.dtype != "float32" or any(ctx.input_type(i).dtype != xt.dtype for i in (1, 2)):
            ctx.fail("X, W and b must be float32")
        if not is_int(w[1]) or heads <= 0 or w[1] % (3 * heads):
            ctx.fail(f"W's {w[1]} columns are not 3 x {heads} heads x a head size")
        if is_int(x[2]) and is_int(w[0]) and x[2] != w[0]:
            ctx.fail(f"X has {x[2]} features but W {w[0]} rows")
        if b[0] != w[1]:
            ctx.fail(f"b {b} does not match W's {w[1]} columns")
        d = w[1] // (3 * heads)
        if ctx.num_inputs > 3 and ctx.has_input(3):
            if ctx.input_type(3).dtype != xt.dtype:
                ctx.fail(f"the mask is {ctx.input_type(3).dtype}, X {xt.dtype}")
            broadcast_shapes(ctx, (x[0], heads, x[1], x[1]), ctx.input_shape(3))
        return [TensorType(xt.dtype, (x[0], x[1], heads, d))]

    @staticmethod
    def tiling(types, attrs) -> dict:
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
        if not tiling:
            tiling = Attention.tiling([None if a is None else TensorType.of(a) for a in ins], attrs)
        ins = [np.ascontiguousarray(ins[0]), *ins[1:]]
        run = Attention.prepare(ins, outs, attrs, tiling, workspace(ws, tiling["offsets"][-1]),
                                [False] * len(ins))
        run()


Attention.spec.extra["tested_by"] = "tests/test_fusion.py"

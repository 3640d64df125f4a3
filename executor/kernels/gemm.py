"""Matrix products: MatMul (numpy semantics, batched, 1-D operands) and Gemm."""
from __future__ import annotations

import numpy as np

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import (bound_epilogue, broadcast_shapes, epilogue, is_int,
                                            view)
from aircc.executor.kernels.registry import InferContext, op


def _same_dim(ctx: InferContext, a, b, what: str) -> None:
    if is_int(a) and is_int(b) and a != b:
        ctx.fail(f"{what}: {a} != {b}")


def permuted_shape(ctx: InferContext, shape, perm, what: str):
    """``shape`` seen through the axis permutation ``perm`` (None: as it is)."""
    if perm is None:
        return shape
    if sorted(perm) != list(range(len(shape))):
        ctx.fail(f"{what} {list(perm)} is not a permutation of the {len(shape)} axes of {shape}")
    return tuple(shape[p] for p in perm)


def permuted_views(attrs: dict, a, b, y):
    """The operands read through ``perm_a`` / ``perm_b``, and the result written through
    the inverse of ``perm_y`` (views; an absent operand stays None)."""
    if "perm_a" in attrs:
        a = a.transpose(attrs["perm_a"])
    if "perm_b" in attrs:
        b = b.transpose(attrs["perm_b"])
    if "perm_y" in attrs:
        y = y.transpose(np.argsort(attrs["perm_y"]))
    return a, b, y


@op("MatMul", since=1, engine="cube")
class MatMul:
    """numpy.matmul: batch dims broadcast, 1-D operands get a dim added then removed.

    ``perm_a`` / ``perm_b`` / ``perm_y`` (set by the fuse-matmul-transpose pass): the
    operands are read, and the result written, through these axis permutations."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        at, bt = ctx.input_type(0), ctx.input_type(1)
        if at.dtype != bt.dtype:
            ctx.fail(f"operand types differ: {at.dtype} vs {bt.dtype}")
        a = permuted_shape(ctx, ctx.input_shape(0), ctx.attrs.get("perm_a"), "perm_a")
        b = permuted_shape(ctx, ctx.input_shape(1), ctx.attrs.get("perm_b"), "perm_b")
        if len(a) == 0 or len(b) == 0:
            ctx.fail("MatMul operands must have rank >= 1")
        a2 = (1, *a) if len(a) == 1 else a
        b2 = (*b, 1) if len(b) == 1 else b
        _same_dim(ctx, a2[-1], b2[-2], f"inner dims of {a} and {b} differ")
        batch = broadcast_shapes(ctx, a2[:-2], b2[:-2])
        out = list(batch) + ([] if len(a) == 1 else [a2[-2]]) + ([] if len(b) == 1 else [b2[-1]])
        return [TensorType(at.dtype, permuted_shape(ctx, tuple(out), ctx.attrs.get("perm_y"), "perm_y"))]

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        a, b, y = permuted_views(attrs, ins[0], ins[1], outs[0])
        full = y
        if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous and y.flags.c_contiguous:
            a, y = a.reshape(-1, a.shape[-1]), view(y, (-1, y.shape[-1]))
        return bound_epilogue(lambda mm=np.matmul: mm(a, b, y), full, y,
                              ins[2] if len(ins) > 2 else None, constant[2] if len(ins) > 2 else False,
                              attrs)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        a, b, y = permuted_views(attrs, ins[0], ins[1], outs[0])
        if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous and y.flags.c_contiguous:
            # (..., M, K) @ (K, N): one GEMM over every row; numpy would make one per matrix
            np.matmul(a.reshape(-1, a.shape[-1]), b, out=view(y, (-1, y.shape[-1])))
        else:
            np.matmul(a, b, out=y)
        if "fused_scale" in attrs:
            np.multiply(y, y.dtype.type(attrs["fused_scale"]), out=y)
        epilogue(y, ins[2] if len(ins) > 2 else None, attrs)


@op("Gemm", since=1, engine="cube")
class Gemm:
    """Y = alpha * A' @ B' + beta * C, with C broadcast to (M, N) (optional since 11)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        at, bt = ctx.input_type(0), ctx.input_type(1)
        a, b = ctx.input_shape(0), ctx.input_shape(1)
        if len(a) != 2 or len(b) != 2:
            ctx.fail(f"A {a} and B {b} must be 2-D")
        if at.dtype != bt.dtype:
            ctx.fail(f"operand types differ: {at.dtype} vs {bt.dtype}")
        ta, tb = int(ctx.attrs.get("transA", 0)), int(ctx.attrs.get("transB", 0))
        m, k = (a[1], a[0]) if ta else (a[0], a[1])
        k2, n = (b[1], b[0]) if tb else (b[0], b[1])
        _same_dim(ctx, k, k2, f"inner dims of A {a} (transA={ta}) and B {b} (transB={tb})")
        if ctx.has_input(2):
            cs = ctx.input_shape(2)
            if len(cs) > 2:
                ctx.fail(f"C {cs} must have rank <= 2")
            bc = broadcast_shapes(ctx, (m, n), cs)
            for x, y in zip(bc, (m, n)):
                _same_dim(ctx, x, y, f"C {cs} does not broadcast to ({m}, {n})")
        return [TensorType(at.dtype, (m, n))]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        a, b = ins[0], ins[1]
        c = ins[2] if len(ins) > 2 else None
        y = outs[0]
        if attrs.get("transA", 0):
            a = a.T
        if attrs.get("transB", 0):
            b = b.T
        np.matmul(a, b, out=y)
        alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
        if alpha != 1.0:
            np.multiply(y, y.dtype.type(alpha), out=y, casting="unsafe")
        if c is not None and beta != 0.0:
            if beta != 1.0:
                c = np.multiply(c, c.dtype.type(beta))
            np.add(y, c, out=y)

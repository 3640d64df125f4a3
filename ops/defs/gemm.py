"""Matrix products: MatMul (numpy semantics, batched, 1-D operands) and Gemm.

MatMul's ``perm_a`` / ``perm_b`` / ``perm_y`` (set by the fuse-matmul-transpose pass):
the operands are read, and the result written, through these axis permutations.
"""
from __future__ import annotations

from typing import Optional, Sequence

from aircc.ops.epilogues import check_activation
from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import broadcast_shapes, is_int
from aircc.ops.types import TensorType


def _same_dim(ctx: InferContext, a, b, what: str) -> None:
    if is_int(a) and is_int(b) and a != b:
        ctx.fail(f"{what}: {a} != {b}")


def permuted_shape(ctx: InferContext, shape: tuple, perm: Optional[Sequence[int]],
                   what: str) -> tuple:
    """``shape`` seen through the axis permutation ``perm`` (None: as it is)."""
    if perm is None:
        return shape
    if sorted(perm) != list(range(len(shape))):
        ctx.fail(f"{what} {list(perm)} is not a permutation of the {len(shape)} axes of {shape}")
    return tuple(shape[p] for p in perm)


@define("MatMul", 1, engine="cube")
def matmul(ctx: InferContext) -> list[TensorType]:
    """numpy.matmul of the operands seen through ``perm_a`` / ``perm_b``, written through ``perm_y``."""
    check_activation(ctx)
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


@define("Gemm", 1, engine="cube")
def gemm(ctx: InferContext) -> list[TensorType]:
    """Y = alpha * A' @ B' + beta * C, with C broadcast to (M, N) (optional since 11)."""
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

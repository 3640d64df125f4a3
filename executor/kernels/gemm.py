"""Matrix product kernels: MatMul (numpy semantics, batched, 1-D operands) and Gemm."""
from __future__ import annotations

import numpy as np

from .epilogue import bound_epilogue, epilogue
from .numpy_backend import NUMPY
from .scratch import view


def permuted_views(attrs: dict, a: np.ndarray | None, b: np.ndarray | None,
                    y: np.ndarray) -> tuple:
    """The operands read through ``perm_a`` / ``perm_b``, and the result written through
    the inverse of ``perm_y`` (views; an absent operand stays None)."""
    if "perm_a" in attrs:
        a = a.transpose(attrs["perm_a"])
    if "perm_b" in attrs:
        b = b.transpose(attrs["perm_b"])
    if "perm_y" in attrs:
        y = y.transpose(np.argsort(attrs["perm_y"]))
    return a, b, y


@NUMPY.kernel("MatMul", 1)
class MatMul:
    """numpy.matmul: batch dims broadcast, 1-D operands get a dim added then removed.

    ``perm_a`` / ``perm_b`` / ``perm_y`` (set by the fuse-matmul-transpose pass): the
    operands are read, and the result written, through these axis permutations."""

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


@NUMPY.kernel("Gemm", 1)
class Gemm:
    """Y = alpha * A' @ B' + beta * C, with C broadcast to (M, N) (optional since 11)."""

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

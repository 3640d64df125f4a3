"""onnxruntime's product contrib ops (domain ``com.microsoft``): FusedMatMul, FusedGemm,
GemmFastGelu, FusedConv and NhwcConv.

The ``lower-contrib`` pass rewrites each into the default domain's MatMul, Gemm, Conv,
Transpose and activation ops, which the epilogue fusions then put back together for the
target's kernels.
"""
from __future__ import annotations

from typing import Optional

from aircc.ops.epilogues import ACTIVATIONS
from aircc.ops.registry import InferContext, define
from aircc.ops.types import TensorType

from .contrib_common import MS_DOMAIN, float_input, vector_of
from .conv import conv
from .gemm import gemm, matmul

#: FusedConv's and FusedGemm's activations (onnxruntime's).  Each takes the parameters of
#: the fused activation of its name (:data:`aircc.ops.epilogues.ACTIVATIONS`), as a list in
#: that order.
FUSED_ACTIVATIONS = ("", "Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid")


def activation_defaults(op: str) -> tuple:
    """The defaults of a fused activation's parameters, in the order a list gives them."""
    return tuple(ACTIVATIONS.get(op, {}).values())


def batch_perm(rank: int, trans: bool, trans_batch: bool) -> Optional[list[int]]:
    """The axes of a FusedMatMul operand of ``rank`` in the order the product reads them:
    ``trans_batch`` moves the first axis just before the last, ``trans`` swaps the last
    two (None: as it is)."""
    if rank < 2 or not (trans or trans_batch):
        return None
    perm = list(range(1, rank - 1)) + [0, rank - 1] if trans_batch else list(range(rank))
    if trans:
        perm[-1], perm[-2] = perm[-2], perm[-1]
    return None if perm == list(range(rank)) else perm


def fused_matmul_perms(attrs: dict, ranks: tuple[int, int]) -> tuple:
    """(perm of A, perm of B) of a FusedMatMul with these attributes and operand ranks."""
    return (batch_perm(ranks[0], bool(attrs.get("transA", 0)), bool(attrs.get("transBatchA", 0))),
            batch_perm(ranks[1], bool(attrs.get("transB", 0)), bool(attrs.get("transBatchB", 0))))


def _with_attrs(ctx: InferContext, attrs: dict, types: list | None = None) -> InferContext:
    return InferContext(types if types is not None else ctx.types, attrs, ctx.values, ctx.node, ctx.op, 1)


@define("FusedMatMul", 1, MS_DOMAIN, engine="cube")
def fused_matmul(ctx: InferContext) -> list[TensorType]:
    """alpha * numpy.matmul(A', B'), A' = A with its last two axes swapped (``transA``)
    and, with ``transBatchA``, its first axis moved just before the last two (B' alike)."""
    float_input(ctx, 0)
    float_input(ctx, 1, ctx.input_type(0))
    pa, pb = fused_matmul_perms(ctx.attrs, (len(ctx.input_shape(0)), len(ctx.input_shape(1))))
    return matmul(_with_attrs(ctx, {k: v for k, v in (("perm_a", pa), ("perm_b", pb)) if v}))


def check_fused_activation(ctx: InferContext, name_attr: str, params: Optional[str]) -> None:
    """The node's activation is one onnxruntime fuses, with as many parameters as it takes."""
    act = ctx.attrs.get(name_attr, "")
    if act not in FUSED_ACTIVATIONS:
        ctx.fail(f"{name_attr} '{act}' is not one of {', '.join(a for a in FUSED_ACTIVATIONS if a)}")
    takes = len(activation_defaults(act))
    if params is not None and len(ctx.attrs.get(params) or []) < takes:
        ctx.fail(f"{act} takes {takes} activation_params, got {ctx.attrs.get(params)}")


@define("FusedGemm", 1, MS_DOMAIN, engine="cube")
def fused_gemm(ctx: InferContext) -> list[TensorType]:
    """Gemm followed by ``activation`` (Relu, Tanh, Sigmoid, LeakyRelu with
    ``activation_alpha``, HardSigmoid with ``activation_alpha`` and ``activation_beta``)."""
    float_input(ctx, 0)
    if ctx.attrs.get("activation", "") in ("", "Clip"):
        ctx.fail(f"activation '{ctx.attrs.get('activation', '')}': FusedGemm takes Relu, Tanh, Sigmoid, "
                 "LeakyRelu or HardSigmoid")
    check_fused_activation(ctx, "activation", None)
    return gemm(_with_attrs(ctx, {k: ctx.attrs[k] for k in ("transA", "transB") if k in ctx.attrs}))


@define("GemmFastGelu", 1, MS_DOMAIN, engine="cube")
def gemm_fast_gelu(ctx: InferContext) -> list[TensorType]:
    """FastGelu(numpy.matmul(X, W) + bias), the bias optional."""
    xt = float_input(ctx, 0)
    float_input(ctx, 1, xt)
    out = matmul(_with_attrs(ctx, {}, ctx.types[:2]))
    if out[0].shape:
        vector_of(ctx, 2, out[0].shape[-1], "the bias", xt)
    return out


@define("FusedConv", 1, MS_DOMAIN, engine="cube")
def fused_conv(ctx: InferContext) -> list[TensorType]:
    """activation(Conv(X, W, B) + Z): Conv's attributes, then ``activation`` (Relu, Tanh,
    Sigmoid, LeakyRelu, Clip, HardSigmoid) with its ``activation_params``; Z optional."""
    check_fused_activation(ctx, "activation", "activation_params")
    attrs = {k: v for k, v in ctx.attrs.items() if k not in ("activation", "activation_params")}
    out = conv(_with_attrs(ctx, attrs, ctx.types[:3]))
    if ctx.has_input(3):
        float_input(ctx, 3, out[0])
        z = ctx.input_shape(3)
        if len(z) != len(out[0].shape):
            ctx.fail(f"Z {z} must be the output's shape {out[0].shape}")
    return out


@define("NhwcConv", 1, MS_DOMAIN, engine="cube")
def nhwc_conv(ctx: InferContext) -> list[TensorType]:
    """Conv channels-last: X [N, H, W, C], W [M, kH, kW, C / group], B [M] -> [N, oH, oW, M];
    Conv's attributes."""
    xt = float_input(ctx, 0)
    xs, ws = ctx.input_shape(0), ctx.input_shape(1)
    if len(xs) < 3 or len(ws) != len(xs):
        ctx.fail(f"X {xs} and W {ws} must have the same rank >= 3")
    first = [TensorType(xt.dtype, (xs[0], xs[-1], *xs[1:-1])),
             TensorType(ctx.input_type(1).dtype, (ws[0], ws[-1], *ws[1:-1]))] + list(ctx.types[2:3])
    y = conv(_with_attrs(ctx, dict(ctx.attrs), first))[0].shape
    return [TensorType(xt.dtype, (y[0], *y[2:], y[1]))]

"""onnxruntime's activation contrib ops (domain ``com.microsoft``): Gelu, FastGelu,
BiasGelu, QuickGelu, BiasAdd and BiasSplitGelu; and ThresholdedRelu before opset 10,
which onnxruntime registers in the default domain.

The ``lower-contrib`` pass rewrites every one of them but BiasSplitGelu into the default
domain's Add, Gelu, Sigmoid and Mul; their own kernels run them elsewhere.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import is_int
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType

from .contrib_common import MS_DOMAIN, float_input, same_dim, vector_of


def _with_bias(ctx: InferContext, bias: int, required: bool) -> list[TensorType]:
    """X's type, after checking that the bias (input ``bias``) is X's last dim long."""
    xt = float_input(ctx, 0)
    xs = ctx.input_shape(0)
    if not xs:
        ctx.fail("X must have rank >= 1")
    if required or ctx.has_input(bias):
        ctx.input_type(bias)
        vector_of(ctx, bias, xs[-1], "the bias", xt)
    return [xt]


@define("Gelu", 1, MS_DOMAIN, traits={Trait.ELEMENTWISE})
def gelu(ctx: InferContext) -> list[TensorType]:
    """x Phi(x), Phi the standard normal CDF (exact, with erf)."""
    return [float_input(ctx, 0)]


@define("FastGelu", 1, MS_DOMAIN, traits={Trait.ELEMENTWISE})
def fast_gelu(ctx: InferContext) -> list[TensorType]:
    """GELU's tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) of x + bias
    (the bias optional, as long as X's last dim)."""
    return _with_bias(ctx, 1, required=False)


@define("BiasGelu", 1, MS_DOMAIN, traits={Trait.ELEMENTWISE})
def bias_gelu(ctx: InferContext) -> list[TensorType]:
    """Exact GELU of A + B, B a vector as long as A's last dim."""
    return _with_bias(ctx, 1, required=True)


@define("QuickGelu", 1, MS_DOMAIN, traits={Trait.ELEMENTWISE})
def quick_gelu(ctx: InferContext) -> list[TensorType]:
    """x sigmoid(alpha x), ``alpha`` 1.702 by default."""
    return [float_input(ctx, 0)]


@define("BiasAdd", 1, MS_DOMAIN, traits={Trait.ELEMENTWISE})
def bias_add(ctx: InferContext) -> list[TensorType]:
    """X + bias + skip: X and skip [N, S, C], the bias [C]."""
    xt = float_input(ctx, 0)
    xs = ctx.input_shape(0)
    if len(xs) != 3:
        ctx.fail(f"X {xs} must be [N, S, C]")
    vector_of(ctx, 1, xs[2], "the bias", xt)
    float_input(ctx, 2, xt)
    skip = ctx.input_shape(2)
    if len(skip) != 3:
        ctx.fail(f"skip {skip} must be X's shape {xs}")
    for a, b in zip(xs, skip):
        same_dim(ctx, a, b, f"skip {skip} and X {xs} differ")
    return [xt]


@define("BiasSplitGelu", 1, MS_DOMAIN)
def bias_split_gelu(ctx: InferContext) -> list[TensorType]:
    """With t = X + bias split in halves [L | R] along the last axis: L GELU(R) (exact),
    [N, S, D] -> [N, S, D / 2]."""
    xt = float_input(ctx, 0)
    xs = ctx.input_shape(0)
    if len(xs) != 3:
        ctx.fail(f"X {xs} must be [N, S, D]")
    vector_of(ctx, 1, xs[2], "the bias", xt)
    d = xs[2]
    if is_int(d) and d % 2:
        ctx.fail(f"the hidden size {d} must be even")
    return [TensorType(xt.dtype, (xs[0], xs[1], d // 2 if is_int(d) else ctx.sym(2)))]


@define("ThresholdedRelu", 1, traits={Trait.ELEMENTWISE})
def thresholded_relu(ctx: InferContext) -> list[TensorType]:
    """onnxruntime's ThresholdedRelu of opsets 1 to 9 (in the default domain): x if x >
    alpha else 0, ``alpha`` 1.0 by default, as opset 10's."""
    return [float_input(ctx, 0)]

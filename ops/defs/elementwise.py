"""Unary elementwise ops: math functions, activations, IsNaN / IsInf, and Clip.

The unary ops are defined from one table, each with the computation it names as its
documentation; Clip (attributes since 6, optional scalar inputs since 11) by hand.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, ShapeRule, define
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType

#: Unary ops that may run on the host in dynamic mode (shape arithmetic).
HOST_CAPABLE = frozenset({"Neg", "Abs", "Floor", "Ceil", "Sqrt", "Not", "Sign"})


def same_type(ctx: InferContext) -> list[TensorType]:
    """The result has the input's dtype and shape."""
    return [ctx.input_type(0)]


def bool_mask(ctx: InferContext) -> list[TensorType]:
    """The result is a bool tensor of the input's shape."""
    return [TensorType("bool", ctx.input_type(0).shape)]


#: (name, since, what it computes per element, shape rule)
UNARY: list[tuple[str, int, str, ShapeRule]] = [
    ("Relu", 1, "max(x, 0).", same_type),
    ("Sigmoid", 1, "1 / (1 + exp(-x)).", same_type),
    ("Tanh", 1, "tanh(x).", same_type),
    ("Exp", 1, "exp(x).", same_type),
    ("Log", 1, "Natural logarithm of x.", same_type),
    ("Sqrt", 1, "Square root of x.", same_type),
    ("Neg", 1, "-x.", same_type),
    ("Abs", 1, "|x|.", same_type),
    ("Reciprocal", 1, "1 / x.", same_type),
    ("Floor", 1, "x rounded down to an integer.", same_type),
    ("Ceil", 1, "x rounded up to an integer.", same_type),
    ("Erf", 9, "The error function of x.", same_type),
    ("Sign", 9, "-1, 0 or 1 by the sign of x.", same_type),
    ("Not", 1, "Logical not of a bool x.", same_type),
    ("BitwiseNot", 18, "The bits of an integer x inverted.", same_type),
    ("Sin", 7, "sin(x).", same_type),
    ("Cos", 7, "cos(x).", same_type),
    ("Tan", 7, "tan(x).", same_type),
    ("Asin", 7, "arcsin(x).", same_type),
    ("Acos", 7, "arccos(x).", same_type),
    ("Atan", 7, "arctan(x).", same_type),
    ("Sinh", 9, "sinh(x).", same_type),
    ("Cosh", 9, "cosh(x).", same_type),
    ("Asinh", 9, "arsinh(x).", same_type),
    ("Acosh", 9, "arcosh(x).", same_type),
    ("Atanh", 9, "artanh(x).", same_type),
    ("Round", 11, "x rounded to the nearest integer, halves to even.", same_type),
    ("IsNaN", 9, "Whether x is NaN (a bool tensor).", bool_mask),
    ("LeakyRelu", 1, "x if x >= 0 else alpha x.", same_type),
    ("Elu", 1, "x if x > 0 else alpha (exp(x) - 1).", same_type),
    ("Selu", 1, "gamma (x if x > 0 else alpha (exp(x) - 1)).", same_type),
    ("Celu", 12, "max(0, x) + min(0, alpha (exp(x / alpha) - 1)).", same_type),
    ("HardSigmoid", 1, "max(0, min(1, alpha x + beta)).", same_type),
    ("Softplus", 1, "log(1 + exp(x)).", same_type),
    ("Softsign", 1, "x / (1 + |x|).", same_type),
    ("HardSwish", 14, "x max(0, min(1, x / 6 + 1 / 2)).", same_type),
    ("Mish", 18, "x tanh(softplus(x)).", same_type),
    ("ThresholdedRelu", 10, "x if x > alpha else 0.", same_type),
    ("Shrink", 9, "x + bias if x < -lambd, x - bias if x > lambd, else 0.", same_type),
]

for _name, _since, _doc, _rule in UNARY:
    _traits = {Trait.ELEMENTWISE} | ({Trait.HOST_CAPABLE} if _name in HOST_CAPABLE else set())
    define(_name, _since, traits=_traits, doc=_doc)(_rule)


@define("IsInf", 10, traits={Trait.ELEMENTWISE})
def is_inf(ctx: InferContext) -> list[TensorType]:
    """Whether x is +inf (``detect_positive``) or -inf (``detect_negative``): a bool tensor."""
    return bool_mask(ctx)


@define("Clip", 6)
def clip_6(ctx: InferContext) -> list[TensorType]:
    """x limited to [``min``, ``max``] (attributes; either may be absent)."""
    return same_type(ctx)


@define("Clip", 11)
def clip_11(ctx: InferContext) -> list[TensorType]:
    """x limited to [min, max], given as optional scalar inputs 1 and 2."""
    for i in (1, 2):
        if ctx.has_input(i):
            s = ctx.input_type(i).shape
            if s is not None and (len(s) > 1 or (len(s) == 1 and s[0] != 1)):
                ctx.fail(f"input {i} must be a scalar, got shape {s}")
    return [ctx.input_type(0)]

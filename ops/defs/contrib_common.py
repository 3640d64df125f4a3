"""What the definitions of onnxruntime's contrib ops share: their domain and the checks
their shape rules make of float operands and per-channel vectors.

onnxruntime registers these ops in the domain ``com.microsoft`` (a few, older, in the
default domain: ``contrib_norm``); its transformer optimizer writes them.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext
from aircc.ops.shapes import is_int
from aircc.ops.types import Dim, TensorType

#: The domain of onnxruntime's contrib ops.
MS_DOMAIN = "com.microsoft"
#: The element types the contrib ops' kernels compute in.
FLOAT_TYPES = ("float16", "float32", "float64")


def float_input(ctx: InferContext, i: int, like: TensorType | None = None) -> TensorType:
    """Input ``i``'s type: a float tensor (of ``like``'s dtype when given)."""
    t = ctx.input_type(i)
    if t.dtype not in FLOAT_TYPES:
        ctx.fail(f"input {i} is {t.dtype}; the op takes {', '.join(FLOAT_TYPES)}")
    if like is not None and t.dtype != like.dtype:
        ctx.fail(f"input {i} is {t.dtype}, input 0 {like.dtype}: they must be the same type")
    ctx.input_shape(i)
    return t


def int_input(ctx: InferContext, i: int, dtypes: tuple[str, ...] = ("int32",)) -> TensorType:
    """Input ``i``'s type: an integer tensor of one of ``dtypes``."""
    t = ctx.input_type(i)
    if t.dtype not in dtypes:
        ctx.fail(f"input {i} is {t.dtype}; the op takes {' or '.join(dtypes)} there")
    ctx.input_shape(i)
    return t


def same_dim(ctx: InferContext, a: Dim, b: Dim, what: str) -> None:
    """Fail when two dims are both known and differ."""
    if is_int(a) and is_int(b) and a != b:
        ctx.fail(f"{what}: {a} != {b}")


def vector_of(ctx: InferContext, i: int, n: Dim, what: str, like: TensorType) -> None:
    """Input ``i`` (if present) is a 1-D vector of ``n`` elements of ``like``'s dtype."""
    if not ctx.has_input(i):
        return
    float_input(ctx, i, like)
    shape = ctx.input_shape(i)
    if len(shape) != 1:
        ctx.fail(f"{what} {shape} must be 1-D")
    same_dim(ctx, shape[0], n, f"{what} has the wrong length")


def attr_int(ctx: InferContext, name: str, default: int | None = None) -> int:
    """An integer attribute; a required one (no default) missing fails naming it."""
    value = ctx.attrs.get(name, default)
    if value is None:
        ctx.fail(f"attribute {name} is required")
    return int(value)

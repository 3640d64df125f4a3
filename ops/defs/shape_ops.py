"""Shape-only ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity, Dropout,
Cast, CastLike, Shape, Size."""
from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence

import numpy as np

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import Dim, axis_plain, ints, is_int, norm_axes, prod, prod_dims, vector_len
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType, onnx_to_np

#: Traits of the ops whose output is their input's bytes in another shape.
_VIEW_TRAITS = {Trait.VIEW, Trait.LAYOUT, Trait.HOST_CAPABLE}


# ------------------------------------------------------------------ Reshape
def _minus_one(ctx: InferContext, xs, others, k: int):
    """The dim a -1 entry stands for, cancelling symbols that appear on both sides."""
    sin = Counter(d for d in xs if not is_int(d))
    sout = Counter(d for d in others if not is_int(d))
    pin = prod(d for d in xs if is_int(d))
    pout = prod(d for d in others if is_int(d))
    if sout - sin:  # an output symbol not found in the input
        return ctx.sym(k)
    rest = sin - sout
    if pout == 0 or pin % pout:
        if not rest and pout:
            ctx.fail(f"cannot reshape {tuple(xs)} into {tuple(others)} plus -1")
        return ctx.sym(k)
    r = pin // pout
    if not rest:
        return r
    if r == 1 and sum(rest.values()) == 1:
        return next(iter(rest))
    return ctx.sym(k)


def reshape_rule(ctx: InferContext, xs: Optional[Sequence[Dim]], shape: Sequence[int],
                 allowzero: bool) -> tuple:
    """The shape ONNX Reshape gives input shape ``xs`` (None: unknown rank) for the target
    ``shape`` (``0`` copies the input's dim unless ``allowzero``, ``-1`` is inferred);
    symbols that cannot be resolved become fresh ones of ``ctx``."""
    out, neg = [], None
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            if xs is None or i >= len(xs):
                if xs is None:
                    out.append(ctx.sym(i))
                    continue
                ctx.fail(f"shape entry {i} is 0 but the input {tuple(xs)} has no dim {i}")
            out.append(xs[i])
        elif d == -1:
            if neg is not None:
                ctx.fail(f"shape {list(shape)} has more than one -1")
            neg = i
            out.append(None)
        elif d < -1:
            ctx.fail(f"invalid shape entry {d}")
        else:
            out.append(int(d))
    if neg is not None:
        others = [d for j, d in enumerate(out) if j != neg]
        out[neg] = ctx.sym(neg) if xs is None else _minus_one(ctx, xs, others, neg)
    if xs is not None and all(is_int(d) for d in xs) and all(is_int(d) for d in out):
        if prod(xs) != prod(out):
            ctx.fail(f"cannot reshape {tuple(xs)} ({prod(xs)} elements) into {tuple(out)}")
    return tuple(out)


@define("Reshape", 1, traits=_VIEW_TRAITS)
def reshape1(ctx: InferContext) -> list[TensorType]:
    """Reshape with the target shape as the ``shape`` attribute."""
    xt = ctx.input_type(0)
    return [TensorType(xt.dtype, reshape_rule(ctx, xt.shape, ints(ctx.attrs["shape"]), False))]


@define("Reshape", 5, value_inputs=(1,), traits=_VIEW_TRAITS)
def reshape5(ctx: InferContext) -> list[TensorType]:
    """Reshape to input 1 (``0`` copies a dim, ``-1`` is inferred, ``allowzero`` since 14)."""
    xt = ctx.input_type(0)
    v = ctx.value(1)
    if v is None:
        n = vector_len(ctx, 1)
        return [TensorType(xt.dtype, None if n is None else
                           tuple(ctx.sym(i) for i in range(n)))]
    allowzero = bool(ctx.attrs.get("allowzero", 0))
    return [TensorType(xt.dtype, reshape_rule(ctx, xt.shape, ints(v), allowzero))]


@define("Flatten", 1, traits=_VIEW_TRAITS)
def flatten(ctx: InferContext) -> list[TensorType]:
    """2-D view: dims before ``axis`` times dims from ``axis`` on."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    r = len(xs)
    axis = int(ctx.attrs.get("axis", 1))
    if not -r <= axis <= r:
        ctx.fail(f"axis {axis} is out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    return [TensorType(xt.dtype, (prod_dims(ctx, xs[:axis], 0), prod_dims(ctx, xs[axis:], 1)))]


# -------------------------------------------------------- Squeeze / Unsqueeze
def squeeze_rule(ctx: InferContext, xs: Sequence[Dim],
                 axes: Optional[Sequence[int]]) -> tuple | None:
    """``xs`` without the size-1 dims at ``axes`` (every size-1 dim when ``axes`` is None:
    then a symbolic dim, which may be 1 at run time, leaves the rank unknown, None)."""
    if axes is None:
        if not all(is_int(d) for d in xs):
            return None
        return tuple(d for d in xs if d != 1)
    red = norm_axes(ctx, axes, len(xs))
    for a in red:
        if is_int(xs[a]) and xs[a] != 1:
            ctx.fail(f"cannot squeeze axis {a} of size {xs[a]}")
    return tuple(d for i, d in enumerate(xs) if i not in red)


def unsqueeze_rule(ctx: InferContext, xs: Sequence[Dim], axes: Sequence[int]) -> tuple:
    """``xs`` with size-1 dims inserted at ``axes`` (positions in the result)."""
    r = len(xs) + len(axes)
    ins = set(norm_axes(ctx, axes, r))
    it = iter(xs)
    return tuple(1 if i in ins else next(it) for i in range(r))


@define("Squeeze", 1, traits=_VIEW_TRAITS)
def squeeze1(ctx: InferContext) -> list[TensorType]:
    """Remove size-1 dims listed in the ``axes`` attribute (all size-1 dims if absent)."""
    xt = ctx.input_type(0)
    axes = ctx.attrs.get("axes")
    return [TensorType(xt.dtype, squeeze_rule(ctx, ctx.input_shape(0),
                                              list(axes) if axes else None))]


@define("Squeeze", 13, value_inputs=(1,), traits=_VIEW_TRAITS)
def squeeze13(ctx: InferContext) -> list[TensorType]:
    """Remove size-1 dims listed in input 1 (all size-1 dims if omitted)."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    if not ctx.has_input(1):
        return [TensorType(xt.dtype, squeeze_rule(ctx, xs, None))]
    v = ctx.value(1)
    if v is None:
        n = vector_len(ctx, 1)
        return [TensorType(xt.dtype, None if n is None else
                           tuple(ctx.sym(i) for i in range(len(xs) - n)))]
    return [TensorType(xt.dtype, squeeze_rule(ctx, xs, ints(v)))]


@define("Unsqueeze", 1, traits=_VIEW_TRAITS)
def unsqueeze1(ctx: InferContext) -> list[TensorType]:
    """Insert size-1 dims at the ``axes`` attribute (positions in the output)."""
    xt = ctx.input_type(0)
    axes = ctx.attrs.get("axes")
    if not axes:
        ctx.fail("attribute axes is required")
    return [TensorType(xt.dtype, unsqueeze_rule(ctx, ctx.input_shape(0), list(axes)))]


@define("Unsqueeze", 13, value_inputs=(1,), traits=_VIEW_TRAITS)
def unsqueeze13(ctx: InferContext) -> list[TensorType]:
    """Insert size-1 dims at the positions given by input 1."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    v = ctx.value(1)
    if v is None:
        n = vector_len(ctx, 1)
        if n is None:
            return [TensorType(xt.dtype, None)]
        if all(is_int(d) and d == 1 for d in xs):
            # a scalar (or all-1 dims) unsqueezed anywhere is all 1s: the exporter's
            # Unsqueeze(Gather(Shape(x), i), axes=Constant) stays a known [1] vector
            return [TensorType(xt.dtype, (1,) * (len(xs) + n))]
        return [TensorType(xt.dtype, tuple(ctx.sym(i) for i in range(len(xs) + n)))]
    return [TensorType(xt.dtype, unsqueeze_rule(ctx, xs, ints(v)))]


# ---------------------------------------------------------------- Transpose
@define("Transpose", 1, traits={Trait.LAYOUT, Trait.HOST_CAPABLE})
def transpose(ctx: InferContext) -> list[TensorType]:
    """Permute dims (reverse them when ``perm`` is absent)."""
    xt = ctx.input_type(0)
    xs = ctx.input_shape(0)
    perm = ctx.attrs.get("perm")
    perm = list(range(len(xs)))[::-1] if perm is None else list(perm)
    if sorted(norm_axes(ctx, perm, len(xs), "perm")) != list(range(len(xs))):
        ctx.fail(f"perm {perm} is not a permutation of rank {len(xs)}")
    return [TensorType(xt.dtype, tuple(xs[axis_plain(p, len(xs))] for p in perm))]


# ------------------------------------------------------- Identity / Dropout
@define("Identity", 1, traits={Trait.HOST_CAPABLE})
def identity(ctx: InferContext) -> list[TensorType]:
    """The input, unchanged."""
    return [ctx.input_type(0)]


def _dropout_rule(mask_dtype: Optional[str]):
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        out = [xt]
        if ctx.num_outputs > 1:
            out.append(TensorType(mask_dtype or xt.dtype, xt.shape))
        return out

    return infer


for _since, _mask, _doc in (
        (7, None, "Dropout at inference: Y = X; the optional mask has X's type (opset 7-9)."),
        (10, "bool", "Dropout at inference; bool mask."),
        (12, "bool", "Dropout with optional ``ratio`` and ``training_mode`` inputs; bool mask.")):
    _rule = _dropout_rule(_mask)
    _rule.__doc__ = _doc
    define("Dropout", _since)(_rule)


# ------------------------------------------------------------------- Cast
def _cast_dtype(ctx: InferContext, to) -> str:
    try:
        dt = onnx_to_np(to)
    except Exception:  # noqa: BLE001 - unknown enum / name
        ctx.fail(f"unknown target type {to!r}")
    if np.dtype(dt).kind in "OSU":
        ctx.fail("string tensors are not supported")
    return dt


@define("Cast", 1, traits={Trait.ELEMENTWISE, Trait.HOST_CAPABLE})
def cast(ctx: InferContext) -> list[TensorType]:
    """Convert to the TensorProto type ``to`` (a name in opset 1, an enum since 6)."""
    xt = ctx.input_type(0)
    if "to" not in ctx.attrs:
        ctx.fail("attribute to is required")
    return [TensorType(_cast_dtype(ctx, ctx.attrs["to"]), xt.shape)]


@define("CastLike", 15)
def cast_like(ctx: InferContext) -> list[TensorType]:
    """Convert input 0 to the type of input 1."""
    return [TensorType(ctx.input_type(1).dtype, ctx.input_type(0).shape)]


# ------------------------------------------------------------- Shape / Size
def shape_range(attrs: dict, r: int) -> tuple[int, int]:
    """The ``[start, end)`` dims of a rank-``r`` shape that Shape's ``start``/``end``
    attributes select, clamped to ``[0, r]``."""
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    end = r if end is None else int(end)
    start, end = (s + r if s < 0 else s for s in (start, end))
    return min(max(start, 0), r), min(max(end, 0), r)


@define("Shape", 1, traits={Trait.SHAPE_ONLY})
def shape(ctx: InferContext) -> list[TensorType]:
    """The input's shape as int64 (``start``/``end`` since 15)."""
    xs = ctx.input_type(0).shape
    if xs is None:
        return [TensorType("int64", (ctx.sym(0),))]
    s, e = shape_range(ctx.attrs, len(xs))
    return [TensorType("int64", (max(e - s, 0),))]


@define("Size", 1, traits={Trait.SHAPE_ONLY})
def size(ctx: InferContext) -> list[TensorType]:
    """The input's number of elements as an int64 scalar."""
    ctx.input_type(0)
    return [TensorType("int64", ())]

"""Shape-only ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity, Dropout,
Cast, CastLike, Shape, Size."""
from __future__ import annotations

from collections import Counter

import numpy as np

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import (
    axis_plain, ints, is_int, norm_axes, onnx_to_np, prod, prod_dims, vector_len)
from aircc.executor.kernels.registry import InferContext, op


def _copy_reshaped(ins, outs, attrs, tiling, ws) -> None:
    """Kernel of every pure reshape: the data, in order, into the output's shape (nothing
    to do when the memory plan put the output on the input's bytes: ``in_place``)."""
    if attrs.get("in_place"):
        return
    np.copyto(outs[0], ins[0].reshape(outs[0].shape))


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


def reshape_rule(ctx: InferContext, xs, shape, allowzero: bool) -> tuple:
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


@op("Reshape", since=1)
class Reshape1:
    """Reshape with the target shape as the ``shape`` attribute."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        return [TensorType(xt.dtype, reshape_rule(ctx, xt.shape, ints(ctx.attrs["shape"]),
                                                  False))]

    kernel = staticmethod(_copy_reshaped)


@op("Reshape", since=5, value_inputs=(1,))
class Reshape5:
    """Reshape with the target shape as input 1 (``0`` copies a dim, ``-1`` is inferred;
    ``allowzero`` since 14)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        v = ctx.value(1)
        if v is None:
            n = vector_len(ctx, 1)
            return [TensorType(xt.dtype, None if n is None else
                               tuple(ctx.sym(i) for i in range(n)))]
        allowzero = bool(ctx.attrs.get("allowzero", 0))
        return [TensorType(xt.dtype, reshape_rule(ctx, xt.shape, ints(v), allowzero))]

    kernel = staticmethod(_copy_reshaped)


@op("Flatten", since=1)
class Flatten:
    """2-D view: dims before ``axis`` times dims from ``axis`` on."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        xs = ctx.input_shape(0)
        r = len(xs)
        axis = int(ctx.attrs.get("axis", 1))
        if not -r <= axis <= r:
            ctx.fail(f"axis {axis} is out of range for rank {r}")
        axis = axis + r if axis < 0 else axis
        return [TensorType(xt.dtype, (prod_dims(ctx, xs[:axis], 0),
                                      prod_dims(ctx, xs[axis:], 1)))]

    kernel = staticmethod(_copy_reshaped)


# -------------------------------------------------------- Squeeze / Unsqueeze
def _squeeze_rule(ctx: InferContext, xs, axes) -> tuple:
    if axes is None:
        return tuple(d for d in xs if d != 1)
    red = norm_axes(ctx, axes, len(xs))
    for a in red:
        if is_int(xs[a]) and xs[a] != 1:
            ctx.fail(f"cannot squeeze axis {a} of size {xs[a]}")
    return tuple(d for i, d in enumerate(xs) if i not in red)


def _unsqueeze_rule(ctx: InferContext, xs, axes) -> tuple:
    r = len(xs) + len(axes)
    ins = set(norm_axes(ctx, axes, r))
    it = iter(xs)
    return tuple(1 if i in ins else next(it) for i in range(r))


@op("Squeeze", since=1)
class Squeeze1:
    """Remove size-1 dims listed in the ``axes`` attribute (all size-1 dims if absent)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        axes = ctx.attrs.get("axes")
        return [TensorType(xt.dtype, _squeeze_rule(ctx, ctx.input_shape(0),
                                                   list(axes) if axes else None))]

    kernel = staticmethod(_copy_reshaped)


@op("Squeeze", since=13, value_inputs=(1,))
class Squeeze13:
    """Remove size-1 dims listed in input 1 (all size-1 dims if omitted)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        xs = ctx.input_shape(0)
        if not ctx.has_input(1):
            return [TensorType(xt.dtype, _squeeze_rule(ctx, xs, None))]
        v = ctx.value(1)
        if v is None:
            n = vector_len(ctx, 1)
            return [TensorType(xt.dtype, None if n is None else
                               tuple(ctx.sym(i) for i in range(len(xs) - n)))]
        return [TensorType(xt.dtype, _squeeze_rule(ctx, xs, ints(v)))]

    kernel = staticmethod(_copy_reshaped)


@op("Unsqueeze", since=1)
class Unsqueeze1:
    """Insert size-1 dims at the ``axes`` attribute (positions in the output)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        axes = ctx.attrs.get("axes")
        if not axes:
            ctx.fail("attribute axes is required")
        return [TensorType(xt.dtype, _unsqueeze_rule(ctx, ctx.input_shape(0), list(axes)))]

    kernel = staticmethod(_copy_reshaped)


@op("Unsqueeze", since=13, value_inputs=(1,))
class Unsqueeze13:
    """Insert size-1 dims at the positions given by input 1."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
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
        return [TensorType(xt.dtype, _unsqueeze_rule(ctx, xs, ints(v)))]

    kernel = staticmethod(_copy_reshaped)


# ---------------------------------------------------------------- Transpose
@op("Transpose", since=1)
class Transpose:
    """Permute dims (reverse them when ``perm`` is absent)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        xs = ctx.input_shape(0)
        perm = ctx.attrs.get("perm")
        perm = list(range(len(xs)))[::-1] if perm is None else list(perm)
        if sorted(norm_axes(ctx, perm, len(xs), "perm")) != list(range(len(xs))):
            ctx.fail(f"perm {perm} is not a permutation of rank {len(xs)}")
        return [TensorType(xt.dtype, tuple(xs[axis_plain(p, len(xs))] for p in perm))]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        perm = attrs.get("perm")
        x = ins[0]
        np.copyto(outs[0], x.T if perm is None else x.transpose(
            [axis_plain(p, x.ndim) for p in perm]))


# ------------------------------------------------------- Identity / Dropout
def _copy(ins, outs, attrs, tiling, ws) -> None:
    np.copyto(outs[0], ins[0])


@op("Identity", since=1)
class Identity:
    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        return [ctx.input_type(0)]

    kernel = staticmethod(_copy)


def _dropout_rule(mask_dtype):
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        out = [xt]
        if ctx.num_outputs > 1:
            out.append(TensorType(mask_dtype or xt.dtype, xt.shape))
        return out

    return infer


def _dropout_kernel(ins, outs, attrs, tiling, ws) -> None:
    """Inference: copy, mask all ones; training_mode (since 12) drops at random."""
    x, y = ins[0], outs[0]
    mask = outs[1] if len(outs) > 1 else None
    training = len(ins) > 2 and ins[2] is not None and bool(np.asarray(ins[2]).reshape(-1)[0])
    ratio = float(np.asarray(ins[1]).reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None \
        else float(attrs.get("ratio", 0.5))
    if not training or ratio == 0.0:
        np.copyto(y, x)
        if mask is not None:
            mask[...] = 1
        return
    rng = np.random.default_rng(attrs.get("seed"))
    keep = rng.random(x.shape) >= ratio
    np.multiply(x, keep, out=y, casting="unsafe")
    np.multiply(y, y.dtype.type(1.0 / (1.0 - ratio)), out=y)
    if mask is not None:
        np.copyto(mask, keep, casting="unsafe")


@op("Dropout", since=7)
class Dropout7:
    """Dropout at inference: Y = X; the optional mask has X's type (opset 7-9)."""

    infer = staticmethod(_dropout_rule(None))
    kernel = staticmethod(_dropout_kernel)


@op("Dropout", since=10)
class Dropout10:
    """Dropout at inference; bool mask."""

    infer = staticmethod(_dropout_rule("bool"))
    kernel = staticmethod(_dropout_kernel)


@op("Dropout", since=12)
class Dropout12:
    """Dropout with optional ``ratio`` and ``training_mode`` inputs; bool mask."""

    infer = staticmethod(_dropout_rule("bool"))
    kernel = staticmethod(_dropout_kernel)


# ------------------------------------------------------------------- Cast
def _cast(ins, outs, attrs, tiling, ws) -> None:
    with np.errstate(invalid="ignore", over="ignore"):
        np.copyto(outs[0], ins[0], casting="unsafe")


def _bound_cast(ins, outs, attrs, tiling, ws, constant, prepared=None):
    """A cast that cannot overflow or be invalid (from bool or an integer to a float, or
    to a wider float) bound as one copy: no error-state switch around it."""
    x, y = ins[0], outs[0]
    if not (y.dtype.kind == "f" and (x.dtype.kind in "biu" or (x.dtype.kind == "f"
                                                               and y.dtype.itemsize >= x.dtype.itemsize))):
        return None
    return lambda copyto=np.copyto: copyto(y, x, casting="unsafe")


def _cast_dtype(ctx: InferContext, to) -> str:
    try:
        dt = onnx_to_np(to)
    except Exception:  # noqa: BLE001 - unknown enum / name
        ctx.fail(f"unknown target type {to!r}")
    if np.dtype(dt).kind in "OSU":
        ctx.fail("string tensors are not supported")
    return dt


@op("Cast", since=1)
class Cast:
    """Convert to the TensorProto type ``to`` (a name in opset 1, an enum since 6)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        if "to" not in ctx.attrs:
            ctx.fail("attribute to is required")
        return [TensorType(_cast_dtype(ctx, ctx.attrs["to"]), xt.shape)]

    kernel = staticmethod(_cast)
    prepare = staticmethod(_bound_cast)


@op("CastLike", since=15)
class CastLike:
    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        return [TensorType(ctx.input_type(1).dtype, ctx.input_type(0).shape)]

    kernel = staticmethod(_cast)


# ------------------------------------------------------------- Shape / Size
def _shape_range(attrs: dict, r: int) -> tuple[int, int]:
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    end = r if end is None else int(end)
    start, end = (s + r if s < 0 else s for s in (start, end))
    return min(max(start, 0), r), min(max(end, 0), r)


@op("Shape", since=1)
class Shape:
    """The input's shape as int64 (``start``/``end`` since 15)."""

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xs = ctx.input_type(0).shape
        if xs is None:
            return [TensorType("int64", (ctx.sym(0),))]
        s, e = _shape_range(ctx.attrs, len(xs))
        return [TensorType("int64", (max(e - s, 0),))]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        s, e = _shape_range(attrs, ins[0].ndim)
        outs[0][...] = ins[0].shape[s:e] if e > s else ()


@op("Size", since=1)
class Size:
    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        ctx.input_type(0)
        return [TensorType("int64", ())]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        outs[0][...] = ins[0].size

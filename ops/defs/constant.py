"""Generators: Constant (value / value_float(s) / value_int(s)), ConstantOfShape, Range."""
from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import ints, vector_len
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType


def constant_value(attrs: dict, fail: Optional[Callable[[str], None]] = None) -> np.ndarray:
    """The tensor a Constant node produces, from whichever value attribute it has."""
    if "value" in attrs:
        return np.asarray(attrs["value"])
    if "value_float" in attrs:
        return np.array(attrs["value_float"], dtype=np.float32)
    if "value_floats" in attrs:
        return np.array(list(attrs["value_floats"]), dtype=np.float32)
    if "value_int" in attrs:
        return np.array(attrs["value_int"], dtype=np.int64)
    if "value_ints" in attrs:
        return np.array(list(attrs["value_ints"]), dtype=np.int64)
    what = ", ".join(sorted(attrs)) or "none"
    msg = f"unsupported or missing value attribute (attributes: {what})"
    if fail:
        fail(msg)
    raise ValueError(msg)


@define("Constant", 1)
def constant(ctx: InferContext) -> list[TensorType]:
    """A tensor given by an attribute."""
    v = constant_value(ctx.attrs, ctx.fail)
    if v.dtype.kind in "OSU":
        ctx.fail("string constants are not supported")
    return [TensorType.of(v)]


def fill_value(attrs: dict) -> np.ndarray:
    """ConstantOfShape's ``value`` attribute as a flat array (float32 0 when absent)."""
    v = attrs.get("value")
    return np.zeros(1, np.float32) if v is None else np.asarray(v).reshape(-1)


@define("ConstantOfShape", 9, value_inputs=(0,), traits={Trait.HOST_CAPABLE})
def constant_of_shape(ctx: InferContext) -> list[TensorType]:
    """A tensor of the shape given by input 0, filled with ``value`` (float32 0 default)."""
    fill = fill_value(ctx.attrs)
    if fill.size != 1:
        ctx.fail(f"value must have exactly one element, got {fill.size}")
    v = ctx.value(0)
    if v is None:
        n = vector_len(ctx, 0)
        return [TensorType(fill.dtype.name, None if n is None else
                           tuple(ctx.sym(i) for i in range(n)))]
    shape = ints(v)
    if any(d < 0 for d in shape):
        ctx.fail(f"negative dim in shape {shape}")
    return [TensorType(fill.dtype.name, tuple(shape))]


# ------------------------------------------------------------------- Range
def _range_len(start, limit, delta) -> int:
    return max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)


@define("Range", 11, value_inputs=(0, 1, 2), traits={Trait.HOST_CAPABLE})
def range_(ctx: InferContext) -> list[TensorType]:
    """start, start + delta, ... up to (excluding) limit."""
    t = ctx.input_type(0)
    vals = [ctx.value(i) for i in range(3)]
    if any(v is None for v in vals):
        return [TensorType(t.dtype, (ctx.sym(0),))]
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in vals)
    if delta == 0:
        ctx.fail("delta must not be 0")
    return [TensorType(t.dtype, (_range_len(start, limit, delta),))]

"""Sequences and optionals at a dynamic model's inputs and outputs, and in its host ops.

A ``sequence:<dtype>`` value is a Python list of arrays of that dtype; an
``optional:<inner>`` value is None (empty) or its inner value (an array, or a list for
``optional:sequence:<dtype>``).  Both live on the host only.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from aircc.errors import InputError
from aircc.formats.model_section import IOSpec
from aircc.ops import InferContext, TensorType, value_kind


def passes_host_value(op, ctx: InferContext) -> bool:
    """An Identity whose input is a sequence or an optional (no array to copy into)."""
    return op.definition.name == "Identity" and ctx.has_input(0) and \
        value_kind(ctx.input_type(0).dtype) != "tensor"


def describe_value(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, np.ndarray):
        return f"an array {value.dtype}{list(value.shape)}"
    return f"a {type(value).__name__}"


def _array(name: str, value, dtype: str, what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray) and not np.isscalar(value):
        raise InputError(f"input '{name}' is {what}: each element must be a numpy array, "
                         f"got {describe_value(value)}")
    arr = np.asarray(value)
    arr = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr).reshape(arr.shape)
    if arr.dtype != np.dtype(dtype):
        raise InputError(f"input '{name}' is {what}: its elements must be {dtype}, got {arr.dtype}")
    return arr


def check_host_feed(spec: IOSpec, value):
    """A sequence or optional feed checked against its declared dtype: a list of
    C-contiguous arrays, None, or the optional's inner value; InputError otherwise."""
    name, dtype = spec.name, spec.dtype
    if dtype.startswith("optional:"):
        if value is None:
            return None
        inner = dtype.removeprefix("optional:")
        return check_host_feed(replace(spec, dtype=inner), value) if inner.startswith("sequence:") \
            else _array(name, value, inner, f"an optional {inner} tensor")
    elem = dtype.removeprefix("sequence:")
    if not isinstance(value, (list, tuple)):
        raise InputError(f"input '{name}' is a sequence of {elem} tensors: feed a list of "
                         f"arrays, got {describe_value(value)}")
    return [_array(name, v, elem, f"a sequence of {elem} tensors") for v in value]


def feed_type(spec: IOSpec, value) -> TensorType:
    """The run's type of a feed: an array's own, a sequence's, an empty optional's spec."""
    from aircc.ops.fallback import value_type

    return TensorType(spec.dtype, None) if value is None else value_type(value)


def host_result(value):
    """A model output of the host, copied: an array, a list of arrays, or None."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [np.array(v) for v in value]
    return np.array(value)

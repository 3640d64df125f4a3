"""Optional, OptionalHasElement, OptionalGetElement: ops on optional values, run on the host.

An optional value (``optional:<dtype>`` or ``optional:sequence:<dtype>``) is at run time
None (empty) or its value: an array, or a list of arrays for a sequence.  These ops
have no device kernel: each definition carries its own ``run`` on host values, which
the dynamic runtime calls like a fallback op's (a static model holds no optionals).
"""
from __future__ import annotations

import numpy as np

from ..registry import InferContext, OpDef, register_op
from ..types import TensorType


def _inner(dtype: str) -> str:
    return dtype.removeprefix("optional:")


def _optional_infer(ctx: InferContext) -> list[TensorType]:
    """An optional holding the input, or an empty one of the ``type`` attribute."""
    if ctx.has_input(0):
        inner = _inner(ctx.input_type(0).dtype)
    elif isinstance(ctx.attrs.get("type"), str):
        inner = ctx.attrs["type"]
    else:
        ctx.fail("an empty Optional needs its 'type' attribute")
    return [TensorType(f"optional:{inner}", None)]


def _optional_run(ins, attrs, n_out):
    return [ins[0] if ins else None]


def _has_infer(ctx: InferContext) -> list[TensorType]:
    """Whether the optional (or the input, when given at all) holds a value."""
    return [TensorType("bool", ())]


def _has_run(ins, attrs, n_out):
    return [np.array(bool(ins) and ins[0] is not None)]


def _get_infer(ctx: InferContext) -> list[TensorType]:
    """The optional's value (an error when empty); a tensor or sequence input as it is."""
    t = ctx.input_type(0)
    if not t.dtype.startswith("optional:"):
        return [t]
    return [TensorType(_inner(t.dtype), None)]


def _get_run(ins, attrs, n_out):
    if not ins or ins[0] is None:
        raise ValueError("OptionalGetElement: the optional input is empty")
    return [ins[0]]


for _name, _since, _infer, _run in (
        ("Optional", 15, _optional_infer, _optional_run),
        ("OptionalHasElement", 15, _has_infer, _has_run),
        ("OptionalHasElement", 18, _has_infer, _has_run),
        ("OptionalGetElement", 15, _get_infer, _get_run),
        ("OptionalGetElement", 18, _get_infer, _get_run)):
    register_op(OpDef(_name, _since, "", _infer, foldable=False, doc=(_infer.__doc__ or "").strip(),
                      run=_run))

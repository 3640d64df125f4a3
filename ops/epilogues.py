"""Fused epilogues: what a Conv or MatMul does to its result after the product, as the
compiler's fusion passes record it in the node's attributes.

``fused_scale`` (a factor), ``fused_add`` (one more input added), ``fused_relu``, and
``fused_activation = {"op": ..., "attrs": {...}}``: one of :data:`ACTIVATIONS` with its
parameters (only into kernels that run it: ``KernelImpl.epilogues``).  The shape rules
of the ops that take them check them (:func:`check_activation`), so a file whose
activation is not one of these is refused by name, not by a kernel's KeyError.
"""
from __future__ import annotations

import math
from numbers import Real

from .registry import InferContext

#: Activations a kernel may fuse, with their parameters and ONNX's defaults (a Clip's
#: bounds as its opset-6 attributes).
ACTIVATIONS: dict[str, dict] = {
    "Clip": {"min": -math.inf, "max": math.inf}, "HardSwish": {}, "Sigmoid": {}, "Tanh": {},
    "LeakyRelu": {"alpha": 0.01}, "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
    "Elu": {"alpha": 1.0}, "Gelu": {"approximate": "none"},
}
GELU_APPROXIMATIONS = ("none", "tanh")


def check_activation(ctx: InferContext) -> None:
    """``fused_activation``, if the node has one, is one of :data:`ACTIVATIONS` with exactly
    its parameters, of the right kinds."""
    act = ctx.attrs.get("fused_activation")
    if act is None:
        return
    if not isinstance(act, dict) or set(act) != {"op", "attrs"} or act["op"] not in ACTIVATIONS \
            or not isinstance(act["attrs"], dict) or set(act["attrs"]) != set(ACTIVATIONS[act["op"]]):
        ctx.fail(f"fused_activation {act!r} is not one of {', '.join(ACTIVATIONS)} with its "
                 f"parameters")
    for key, value in act["attrs"].items():
        ok = value in GELU_APPROXIMATIONS if key == "approximate" else \
            isinstance(value, Real) and not isinstance(value, bool)
        if not ok:
            ctx.fail(f"fused_activation {act['op']}: parameter {key}={value!r} is not valid")

"""Gelu (opset 20; also what the fuse-gelu pass makes of the exported erf form)."""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType


@define("Gelu", 20, traits={Trait.ELEMENTWISE})
def gelu(ctx: InferContext) -> list[TensorType]:
    """x Phi(x), Phi the standard normal CDF (exact, or ``approximate="tanh"``)."""
    return [ctx.input_type(0)]

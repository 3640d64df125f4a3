"""Kernels made by fusion passes (domain ``aircc``)."""
from __future__ import annotations

import numpy as np

from aircc.executor.kernels.elementwise import erf
from aircc.executor.kernels.registry import InferContext, op


def _sigmoid(a, y):
    np.negative(a, out=y)
    np.exp(y, out=y)
    y += 1
    np.reciprocal(y, out=y)


UNARY = {"Erf": erf, "Tanh": lambda a, y: np.tanh(a, out=y), "Relu": lambda a, y: np.maximum(a, 0, out=y),
         "Exp": lambda a, y: np.exp(a, out=y), "Neg": lambda a, y: np.negative(a, out=y),
         "Abs": lambda a, y: np.abs(a, out=y), "Sqrt": lambda a, y: np.sqrt(a, out=y),
         "Sigmoid": _sigmoid}
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


@op("ElementwiseChain", since=1, domain="aircc", foldable=False)
class ElementwiseChain:
    """``steps``: [op, operand name ("" for unary ops), 1 if the running value is the right
    operand]; inputs: the chain's first input, then the other operands by name order."""

    @staticmethod
    def infer(ctx: InferContext):
        return [ctx.input_type(0)]

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        value = ins[0]
        names = attrs.get("operands") or []
        table = dict(zip(names, ins))
        for k, (name, other, right) in enumerate(attrs["steps"]):
            if name in UNARY:
                UNARY[name](value, y)
            else:
                b = table[other]
                if right:
                    BINARY[name](b, value, out=y)
                else:
                    BINARY[name](value, b, out=y)
            value = y


ElementwiseChain.spec.extra["tested_by"] = "tests/test_fusion.py"

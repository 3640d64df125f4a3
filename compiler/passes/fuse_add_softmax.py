"""Pass ``fuse-add-softmax``: an Add and the Softmax after it in one launch.

Attention computes ``Softmax(scores + mask)``.  When the Add's only reader is a
Softmax (opset 13 or later, so ``axis`` is one axis of the Add's result), the
Softmax takes both operands (``fused_add``) and adds them as it shifts its
input: softmax(a + b) = softmax(a + (b - c)) for any c, and with c = max(a) +
max(b) every exponential is at most 1.  The sum is never written on its own,
and the shift costs no pass of its own.  Either operand may broadcast; the
result has the Add's shape, as before.  Run before ``fuse-epilogues``, which
would otherwise put the Add into the MatMul before it (a pass of its own) -- except
for a bias: a constant added to a MatMul's or Gemm's product (a classifier's last layer
before its Softmax) is left to ``fuse-epilogues``, whose addend the product's kernel
adds as it writes (no pass either), so the Softmax reads one operand.
"""
from __future__ import annotations

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .add_fusion import fold_adds_into
from .base import compile_pass

FLOAT_TYPES = ("float16", "float32", "float64")


def _rewire(graph: Graph, add: Node, sm: Node) -> list[str] | None:
    """Softmax(a, b): both operands of the Add, in its order."""
    if sm.version < 13 or sm.inputs != [add.outputs[0]]:
        return None
    made_by = graph.producers()
    for this, other in (add.inputs, add.inputs[::-1]):
        if other in graph.constants and this in made_by and made_by[this].op in ("MatMul", "Gemm"):
            return None                 # a bias: the product's epilogue adds it
    ta, tb = (graph.types.get(i) for i in add.inputs)
    if ta is None or tb is None or ta.dtype != tb.dtype or ta.dtype not in FLOAT_TYPES:
        return None
    return list(add.inputs)


@compile_pass("fuse-add-softmax", stats=("fused_add_softmax",))
def fuse_add_softmax(graph: Graph, ctx: CompileContext) -> Graph:
    return fold_adds_into(graph, ctx, "Softmax", "fused_add_softmax", _rewire)

"""Pass ``fuse-add-layernorm``: a residual Add and the LayerNormalization after it in one launch.

A transformer block ends in ``LayerNormalization(x + sublayer(x))``.  When the
Add's only reader is a LayerNormalization (as its X), the LayerNormalization
takes the Add's operands instead and adds them as it starts (``fused_add``,
the second operand as input 3): one launch fewer, and the sum is not written
and read back.  Either operand may broadcast (the LayerNormalization
normalises the sum's shape); X is one of the sum's rank.  In dynamic mode the
operands' symbolic dims often differ by name only (each Reshape and Add makes
fresh ones), so the ranks decide, not equal types.
"""
from __future__ import annotations

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .add_fusion import fold_adds_into
from .base import compile_pass


def _rewire(graph: Graph, add: Node, ln: Node) -> list[str] | None:
    """LayerNormalization(X = the Add's full-shape operand, scale, bias, residual)."""
    out = add.outputs[0]
    if ln.inputs[0] != out or ln.inputs.count(out) != 1 or len(ln.outputs) > 1:
        return None
    t_out = graph.types.get(out)
    a, b = add.inputs
    if graph.types.get(a) != t_out:
        a, b = b, a
    ta, tb = graph.types.get(a), graph.types.get(b)
    if t_out is None or t_out.shape is None or ta is None or tb is None or ta.shape is None \
            or tb.shape is None or {ta.dtype, tb.dtype} != {t_out.dtype}:
        return None
    if len(ta.shape) != len(t_out.shape):
        a, b, ta, tb = b, a, tb, ta
        if len(ta.shape) != len(t_out.shape):
            return None
    scale_bias = ln.inputs[1:3] + [""] * (3 - len(ln.inputs))
    return [a, *scale_bias[:2], b]


@compile_pass("fuse-add-layernorm", stats=("fused_add_layernorm",))
def fuse_add_layernorm(graph: Graph, ctx: CompileContext) -> Graph:
    return fold_adds_into(graph, ctx, "LayerNormalization", "fused_add_layernorm", _rewire)

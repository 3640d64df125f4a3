"""Pass ``fold-batchnorm``: fold per-channel affine ops into the op before them.

``BN(Conv(x, W, B))`` = ``Conv(x, W * s, (B - mean) * s + beta)`` with
``s = gamma / sqrt(var + eps)`` per output channel, when the weights and the
BN parameters are constants and the BN is the Conv's only reader.  In the
same way a Mul or an Add by a per-channel (or scalar) constant folds into
a Conv's weights and bias, or into a BatchNormalization's scale and bias
(the BN, Mul, Add chains of the Caffe2-exported models).  One kernel
launch and one pass over the activation less per op folded.
"""
from __future__ import annotations

import numpy as np

from aircc.formats.kinds import Impl

from ..context import CompileContext
from ..ir.graph import Graph, TensorType
from .base import compile_pass


@compile_pass("fold-batchnorm", stats=("fused_conv_batchnorm", "folded_channel_affine"))
def fold_batchnorm(graph: Graph, ctx: CompileContext) -> Graph:
    users: dict[str, list] = graph.consumers()
    producer = graph.producers()
    removed = set()
    folded = 0
    for bn in graph.nodes:
        if bn.op != "BatchNormalization" or bn.domain or len([o for o in bn.outputs if o]) != 1:
            continue
        if int(bn.attrs.get("training_mode", 0)) or bn.impl is Impl.FALLBACK:
            continue
        x = bn.inputs[0]
        conv = producer.get(x)
        if conv is None or conv.op != "Conv" or conv.domain or conv.name in removed:
            continue
        if len(users.get(x, [])) != 1 or x in graph.outputs or conv.attrs.get("fused_add") \
                or conv.attrs.get("fused_relu"):
            continue
        params = [graph.constants.get(i) for i in bn.inputs[1:5]]
        w = graph.constants.get(conv.inputs[1])
        b = graph.constants.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        if w is None or any(p is None for p in params) or (len(conv.inputs) > 2 and conv.inputs[2] and b is None):
            continue
        gamma, beta, mean, var = (p.astype(np.float64) for p in params)
        scale = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        if scale.shape != (w.shape[0],):
            continue
        new_w = (w.astype(np.float64) * scale.reshape(-1, *([1] * (w.ndim - 1)))).astype(w.dtype)
        bias = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
        new_b = ((bias - mean) * scale + beta).astype(w.dtype)
        w_name = graph.fresh_name(f"{conv.inputs[1]}.bn")
        b_name = graph.fresh_name(f"{conv.name}.bn_bias")
        for name, arr in ((w_name, new_w), (b_name, new_b)):
            graph.constants[name] = arr
            graph.types[name] = TensorType.of(arr)
        conv.inputs = [conv.inputs[0], w_name, b_name, *conv.inputs[3:]]
        graph.types.pop(conv.outputs[0], None)
        conv.outputs = [bn.outputs[0]]
        removed.add(bn.name)
        folded += 1
    graph.nodes = [n for n in graph.nodes if n.name not in removed]
    affine = _fold_channel_affine(graph)
    ctx.count("fused_conv_batchnorm", folded)
    ctx.count("folded_channel_affine", affine)
    return graph


def _channel_vector(graph: Graph, value: str, out_rank: int, channels: int) -> np.ndarray | None:
    """A constant that multiplies/adds the same number per channel (axis 1), as a (C,) vector."""
    c = graph.constants.get(value)
    if c is None or c.ndim > out_rank:
        return None
    if c.size == 1:
        return np.full(channels, c.reshape(-1)[0], dtype=np.float64)
    shape = (1,) * (out_rank - c.ndim) + c.shape
    if len(shape) < 2 or shape[1] != channels or any(d != 1 for i, d in enumerate(shape) if i != 1):
        return None
    return c.reshape(-1).astype(np.float64)


def _fold_channel_affine(graph: Graph) -> int:
    """Mul/Add by per-channel constants into the Conv or BatchNormalization that feeds them."""
    folded = 0
    changed = True
    while changed:
        changed = False
        users = graph.consumers()
        producer = graph.producers()
        for op_node in graph.nodes:
            if op_node.op not in ("Mul", "Add") or op_node.domain:
                continue
            x, k = op_node.inputs
            if x in graph.constants:
                x, k = k, x
            base = producer.get(x)
            t = graph.types.get(x)
            if base is None or t is None or t.shape is None or len(users.get(x, [])) != 1 \
                    or x in graph.outputs or graph.types.get(op_node.outputs[0]) != t:
                continue
            if base.op == "Conv" and not base.domain and not base.attrs.get("fused_add") \
                    and not base.attrs.get("fused_relu") and base.inputs[1] in graph.constants:
                w = graph.constants[base.inputs[1]]
                vec = _channel_vector(graph, k, len(t.shape), w.shape[0])
                b_name = base.inputs[2] if len(base.inputs) > 2 else ""
                if vec is None or (b_name and b_name not in graph.constants):
                    continue
                bias = graph.constants[b_name].astype(np.float64) if b_name else np.zeros(w.shape[0])
                if op_node.op == "Mul":
                    w = (w.astype(np.float64) * vec.reshape(-1, *([1] * (w.ndim - 1)))).astype(w.dtype)
                    bias = bias * vec
                else:
                    bias = bias + vec
                new = [base.inputs[0], _constant(graph, f"{base.inputs[1]}.f", w),
                       _constant(graph, f"{base.name}.bias", bias.astype(w.dtype))]
                base.inputs = new + base.inputs[3:]
            elif base.op == "BatchNormalization" and not base.domain \
                    and not base.attrs.get("fused_relu") and len(base.inputs) >= 5 \
                    and all(i in graph.constants for i in base.inputs[1:5]):
                gamma, beta = graph.constants[base.inputs[1]], graph.constants[base.inputs[2]]
                vec = _channel_vector(graph, k, len(t.shape), gamma.shape[0]) if gamma.ndim == 1 else None
                if vec is None:
                    continue
                if op_node.op == "Mul":
                    gamma, beta = gamma * vec, beta * vec
                else:
                    beta = beta + vec
                base.inputs = [base.inputs[0], _constant(graph, f"{base.name}.scale", gamma.astype(t.dtype)),
                               _constant(graph, f"{base.name}.B", beta.astype(t.dtype)), *base.inputs[3:]]
            else:
                continue
            graph.types.pop(base.outputs[0], None)
            base.outputs = [op_node.outputs[0]]
            graph.nodes.remove(op_node)
            folded += 1
            changed = True
            break
    return folded


def _constant(graph: Graph, base: str, value: np.ndarray) -> str:
    name = graph.fresh_name(base)
    graph.constants[name] = value
    graph.types[name] = TensorType.of(value)
    return name

"""Pass ``fold-batchnorm``: fold an inference BatchNormalization into the Conv before it.

``BN(Conv(x, W, B))`` = ``Conv(x, W * s, (B - mean) * s + beta)`` with
``s = gamma / sqrt(var + eps)`` per output channel, when the weights and the
BN parameters are constants and the BN is the Conv's only reader.  One
kernel launch and one pass over the activation less per pair.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, TensorType


def fold_batchnorm(graph: Graph) -> Graph:
    users: dict[str, list] = graph.consumers()
    producer = graph.producers()
    removed = set()
    folded = 0
    for bn in graph.nodes:
        if bn.op != "BatchNormalization" or bn.domain or len([o for o in bn.outputs if o]) != 1:
            continue
        if int(bn.attrs.get("training_mode", 0)) or bn.meta.get("impl") == "fallback":
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
    stats = graph.meta.setdefault("stats", {})
    stats["fused_conv_batchnorm"] = stats.get("fused_conv_batchnorm", 0) + folded
    return graph

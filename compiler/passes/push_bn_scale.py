"""Pass ``push-bn-scale``: a BatchNormalization + Relu before a Conv keeps only its shift.

When a BN cannot fold into the op before it (DenseNet's BN after a Concat), its
Relu fused, and its only reader is a Conv with constant weights:

    Conv(W, relu(s * x + t)) = Conv(W * s, relu(x + t / s))    for every s > 0

(per input channel: s scales W's input-channel axis; a zero pad stays zero).
The BN becomes an Add of the per-channel constant t / s and a Relu, which
``fuse-elementwise`` then runs as one chain: two passes over the activation
instead of three, and the multiply by a per-channel scale was the slowest.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, TensorType


def _scale_shift(graph: Graph, bn: Node):
    params = [graph.constants.get(i) for i in bn.inputs[1:5]]
    if len(params) != 4 or any(p is None for p in params):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    scale = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
    return scale, beta - mean * scale


def push_bn_scale(graph: Graph) -> Graph:
    users = graph.consumers()
    replaced: dict[str, list[Node]] = {}
    pushed = 0
    for bn in graph.nodes:
        if bn.op != "BatchNormalization" or bn.domain or not bn.attrs.get("fused_relu") \
                or int(bn.attrs.get("training_mode", 0)) or bn.meta.get("impl") == "fallback" \
                or len([o for o in bn.outputs if o]) != 1:
            continue
        out = bn.outputs[0]
        conv = graph.only_reader(out, users)
        if conv is None:
            continue
        w = graph.constants.get(conv.inputs[1]) if len(conv.inputs) > 1 else None
        t = graph.types.get(bn.inputs[0])
        if conv.op != "Conv" or conv.domain or conv.inputs[0] != out or conv.inputs.count(out) != 1 \
                or w is None or int(conv.attrs.get("group", 1)) != 1 or w.ndim < 3 \
                or conv.attrs.get("weight_layout", "OIHW") != "OIHW" or t is None or t.shape is None:
            continue
        found = _scale_shift(graph, bn)
        if found is None:
            continue
        scale, shift = found
        if scale.shape != (w.shape[1],) or not np.all(scale > 0) or not np.all(np.isfinite(scale)):
            continue
        new_w = (w.astype(np.float64) * scale.reshape(1, -1, *([1] * (w.ndim - 2)))).astype(w.dtype)
        w_name = graph.fresh_name(f"{conv.inputs[1]}.bn_scale")
        c_name = graph.fresh_name(f"{bn.name}.shift")
        shift_c = (shift / scale).reshape(-1, *([1] * (len(t.shape) - 2))).astype(w.dtype)
        for name, arr in ((w_name, new_w), (c_name, shift_c)):
            graph.constants[name] = arr
            graph.types[name] = TensorType.of(arr)
        conv.inputs = [conv.inputs[0], w_name, *conv.inputs[2:]]
        shifted = graph.fresh_name(f"{bn.outputs[0]}.shifted")
        graph.types[shifted] = t
        replaced[bn.name] = [
            Node("Add", [bn.inputs[0], c_name], [shifted], name=f"{bn.name}/shift", version=bn.version),
            Node("Relu", [shifted], [out], name=f"{bn.name}/relu", version=bn.version)]
        pushed += 1
    nodes = []
    for n in graph.nodes:
        nodes.extend(replaced.get(n.name, [n]))
    graph.nodes = nodes
    stats = graph.meta.setdefault("stats", {})
    stats["pushed_bn_scales"] = stats.get("pushed_bn_scales", 0) + pushed
    return graph

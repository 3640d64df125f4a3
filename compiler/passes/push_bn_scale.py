"""Pass ``push-bn-scale``: a BatchNormalization + Relu before a Conv keeps only its shift.

When a BN cannot fold into the op before it (DenseNet's BN after a Concat), its
Relu fused, and its only reader is a Conv with constant weights:

    Conv(W, relu(s * x + t)) = Conv(W * s, relu(x + t / s))    for every s > 0

(per input channel: s scales W's input-channel axis; a zero pad stays zero).
The BN becomes an Add of the per-channel constant t / s and a Relu, which
``fuse-elementwise`` then runs as one chain: two passes over the activation
instead of three, and the multiply by a per-channel scale was the slowest.

When the Conv is 1x1 and unpadded (DenseNet's bottlenecks and transitions),
the shift goes too: relu(x + c) = max(x, -c) + c, and a constant c per input
channel adds W @ c to every output of a 1x1 convolution, so the BN becomes one
``Max(x, -c)`` (one pass) and W @ c joins the Conv's bias.  Moving c out of the
Relu cancels (W @ -c from the clipped inputs against W @ c in the bias) with an
error of about |c| / sigma float32 roundings, sigma the BN's running standard
deviation; it is done only where |c| <= ``MAX_SHIFT_SIGMAS`` * sigma.
"""
from __future__ import annotations

import numpy as np

from aircc.formats.kinds import Impl

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass


def _scale_shift(graph: Graph, bn: Node):
    params = [graph.constants.get(i) for i in bn.inputs[1:5]]
    if len(params) != 4 or any(p is None for p in params):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    scale = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
    return scale, beta - mean * scale


#: Largest |shift| / running std for which the shift of a BN + Relu moves into a 1x1
#: Conv's bias (the cancellation it costs grows with it: 64 float32 roundings ~ 8e-6).
MAX_SHIFT_SIGMAS = 64.0


def _pointwise(conv: Node, w: np.ndarray) -> bool:
    pads = conv.attrs.get("pads") or [0]
    return w.shape[2:] == (1,) * (w.ndim - 2) and not any(pads) \
        and conv.attrs.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")


def _into_bias(graph: Graph, bn: Node, conv: Node, new_w: np.ndarray, c: np.ndarray) -> bool:
    """Add new_w @ c to the Conv's bias (making one if it has none); False when the shift
    is too large against the BN's running std to move out of the Relu."""
    var = graph.constants[bn.inputs[4]].astype(np.float64)
    if not np.all(np.abs(c) <= MAX_SHIFT_SIGMAS * np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))):
        return False
    old = graph.constants.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
    if len(conv.inputs) > 2 and conv.inputs[2] and old is None:
        return False                                # a bias computed at run time
    bias = new_w.reshape(new_w.shape[0], -1).astype(np.float64) @ c
    if old is not None:
        bias = bias + old.astype(np.float64)
    name = graph.fresh_name(f"{conv.name}.bn_shift_bias")
    graph.constants[name] = bias.astype(new_w.dtype)
    graph.types[name] = TensorType.of(graph.constants[name])
    conv.inputs = [*conv.inputs[:2], name, *conv.inputs[3:]]
    return True


@compile_pass("push-bn-scale", stats=("pushed_bn_scales",))
def push_bn_scale(graph: Graph, ctx: CompileContext) -> Graph:
    users = graph.consumers()
    replaced: dict[str, list[Node]] = {}
    pushed = 0
    for bn in graph.nodes:
        if bn.op != "BatchNormalization" or bn.domain or not bn.attrs.get("fused_relu") \
                or int(bn.attrs.get("training_mode", 0)) or bn.impl is Impl.FALLBACK \
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
        pushed += 1
        if _pointwise(conv, w) and _into_bias(graph, bn, conv, new_w, shift / scale):
            graph.constants[c_name] = (-shift_c).astype(w.dtype)
            replaced[bn.name] = [Node("Max", [bn.inputs[0], c_name], [out], name=f"{bn.name}/max",
                                      version=max(bn.version, 13))]
            continue
        shifted = graph.fresh_name(f"{bn.outputs[0]}.shifted")
        graph.types[shifted] = t
        replaced[bn.name] = [
            Node("Add", [bn.inputs[0], c_name], [shifted], name=f"{bn.name}/shift", version=bn.version),
            Node("Relu", [shifted], [out], name=f"{bn.name}/relu", version=bn.version)]
    nodes = []
    for n in graph.nodes:
        nodes.extend(replaced.get(n.name, [n]))
    graph.nodes = nodes
    ctx.count("pushed_bn_scales", pushed)
    return graph

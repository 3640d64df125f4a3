"""Pass ``reorder-pool-conv``: an AveragePool and a 1x1 Conv next to each other run in the
cheaper order.

Average pooling is linear and works per channel; a 1x1 convolution (stride 1, unpadded,
one group) is linear and works per position.  So they commute:

    Conv(W, AveragePool(x)) = AveragePool(Conv(W, x))        (bias aside)

and the cheaper order pools the fewer channels, or convolves the fewer positions:

- Inception's pool projection, ``AveragePool(3x3, stride 1) -> Conv 576 -> 128``:
  convolving first pools 128 channels instead of 576 (the GEMM is the same size).
- DenseNet's transition, ``Conv 256 -> 128 -> AveragePool(2x2, stride 2)``: pooling
  first convolves a quarter of the positions (the pool reads twice the channels).

The cost of each order is estimated as the GEMM's multiply-adds at ``SECONDS_PER_MAC``
plus the pool's input elements times its window taps at ``SECONDS_PER_POOL_TAP`` (both
measured on a 2-core machine with numpy's OpenBLAS); the pair is swapped when the other
order costs at most ``MARGIN`` of this one.

The bias: pooling first keeps it in the Conv, which is exact only when the average
of a constant is that constant (``count_include_pad = 0``, or no padding and no
``ceil_mode``); convolving first moves it (and a fused Relu) after the pool as an Add
(and a Relu), which ``fuse-elementwise`` then runs as one pass over the smaller result.
Counted as ``reordered_pool_convs``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..context import CompileContext
from ..ir.graph import Graph, Node, TensorType
from .base import compile_pass

#: One multiply-add of a mid-sized float32 GEMM (about 230 GFLOP/s).
SECONDS_PER_MAC = 1 / 115e9
#: One input element times one window tap of a 2-D average pool (3x3: 1.35 ns per element).
SECONDS_PER_POOL_TAP = 0.15e-9
#: The other order must cost at most this share of the current one to be taken.
MARGIN = 0.9


def _pointwise(graph: Graph, conv: Node) -> Optional[np.ndarray]:
    """The weights of a plain 1x1, stride-1, unpadded, one-group 2-D Conv, else None."""
    if not conv.is_plain("Conv") or len(conv.inputs) < 2 or conv.attrs.get("fused_add"):
        return None
    w = graph.constants.get(conv.inputs[1])
    a = conv.attrs
    if w is None or w.ndim != 4 or w.shape[2:] != (1, 1) or int(a.get("group", 1)) != 1 \
            or a.get("weight_layout", "OIHW") != "OIHW" or any(a.get("pads") or [0]) \
            or any(s != 1 for s in a.get("strides") or [1]) \
            or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return None
    if len(conv.inputs) > 2 and conv.inputs[2] and conv.inputs[2] not in graph.constants:
        return None
    return w


def _pool_shapes(graph: Graph, pool: Node):
    """(input shape, output shape, window taps) of a plain 2-D AveragePool of static shapes."""
    if not pool.is_plain("AveragePool") or len([o for o in pool.outputs if o]) != 1:
        return None
    src, dst = graph.types.get(pool.inputs[0]), graph.types.get(pool.outputs[0])
    if src is None or dst is None or not src.is_static or not dst.is_static or len(src.shape) != 4:
        return None
    kernel = pool.attrs.get("kernel_shape") or []
    if len(kernel) != 2:
        return None
    return tuple(src.shape), tuple(dst.shape), int(np.prod(kernel))


def _cost(m: int, c: int, conv_positions: int, pool_channels: int, pool_in: tuple, taps: int) -> float:
    return m * c * conv_positions * SECONDS_PER_MAC \
        + pool_channels * pool_in[0] * pool_in[2] * pool_in[3] * taps * SECONDS_PER_POOL_TAP


def _bias_commutes(pool: Node) -> bool:
    """The average of a constant is that constant in every window."""
    a = pool.attrs
    return not int(a.get("count_include_pad", 0)) or (
        not any(a.get("pads") or [0]) and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")
        and not int(a.get("ceil_mode", 0)))


def _value(graph: Graph, base: str, ttype: TensorType) -> str:
    name = graph.fresh_name(base)
    graph.types[name] = ttype
    return name


def _conv_first(graph: Graph, pool: Node, conv: Node, w: np.ndarray) -> list[Node]:
    """AveragePool -> Conv(W, b) [-> Relu]  as  Conv(W) -> AveragePool [-> + b] [-> Relu]."""
    x = pool.inputs[0]
    xs, out_t = graph.types[x], graph.types[conv.outputs[0]]
    m = w.shape[0]
    attrs = {k: v for k, v in conv.attrs.items() if not k.startswith("fused_")}
    full = _value(graph, f"{conv.outputs[0]}.unpooled", TensorType(out_t.dtype, (xs.shape[0], m, *xs.shape[2:])))
    bias = conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2] else ""
    relu = bool(conv.attrs.get("fused_relu"))
    pooled = conv.outputs[0] if not bias and not relu else _value(graph, f"{conv.outputs[0]}.pooled", out_t)
    nodes = [Node("Conv", [x, conv.inputs[1]], [full], attrs, name=conv.name, version=conv.version),
             Node("AveragePool", [full], [pooled], dict(pool.attrs), name=pool.name, version=pool.version)]
    opset = graph.opsets.get("", conv.version)
    if bias:
        shaped = graph.fresh_name(f"{bias}.per_channel")
        graph.constants[shaped] = graph.constants[bias].reshape(1, m, 1, 1)
        graph.types[shaped] = TensorType.of(graph.constants[shaped])
        biased = conv.outputs[0] if not relu else _value(graph, f"{conv.outputs[0]}.biased", out_t)
        nodes.append(Node("Add", [pooled, shaped], [biased], name=f"{conv.name}/bias", version=opset))
        pooled = biased
    if relu:
        nodes.append(Node("Relu", [pooled], [conv.outputs[0]], name=f"{conv.name}/relu", version=opset))
    return nodes


def _pool_first(graph: Graph, conv: Node, pool: Node) -> list[Node]:
    """Conv(W, b) -> AveragePool  as  AveragePool -> Conv(W, b)."""
    x = conv.inputs[0]
    xs, out_t = graph.types[x], graph.types[pool.outputs[0]]
    pooled = _value(graph, f"{x}.pooled", TensorType(xs.dtype, (xs.shape[0], xs.shape[1], *out_t.shape[2:])))
    return [Node("AveragePool", [x], [pooled], dict(pool.attrs), name=pool.name, version=pool.version),
            Node("Conv", [pooled, *conv.inputs[1:]], list(pool.outputs), dict(conv.attrs), name=conv.name,
                 version=conv.version)]


@compile_pass("reorder-pool-conv", stats=("reordered_pool_convs",))
def reorder_pool_conv(graph: Graph, ctx: CompileContext) -> Graph:
    users = graph.consumers()
    replaced: dict[int, list[Node]] = {}
    dropped: set[int] = set()
    for first in graph.nodes:
        if id(first) in dropped or id(first) in replaced or not first.outputs:
            continue
        second = graph.only_reader(first.outputs[0], users)
        if second is None or second.inputs[0] != first.outputs[0] \
                or second.inputs.count(first.outputs[0]) != 1 or id(second) in replaced:
            continue
        if first.is_plain("AveragePool"):
            pool, conv = first, second
        elif first.is_plain("Conv") and not any(k.startswith("fused_") for k in first.attrs):
            conv, pool = first, second
        else:
            continue
        w = _pointwise(graph, conv)
        shapes = _pool_shapes(graph, pool)
        if w is None or shapes is None or w.dtype != np.float32:
            continue
        pool_in, pool_out, taps = shapes
        m, c = w.shape[:2]
        n_in, n_out = pool_in[0] * pool_in[2] * pool_in[3], pool_out[0] * pool_out[2] * pool_out[3]
        if first is pool:
            now = _cost(m, c, n_out, c, pool_in, taps)
            other = _cost(m, c, n_in, m, pool_in, taps)
            if other > MARGIN * now:
                continue
            nodes = _conv_first(graph, pool, conv, w)
        else:
            now = _cost(m, c, n_in, m, pool_in, taps)
            other = _cost(m, c, n_out, c, pool_in, taps)
            has_bias = len(conv.inputs) > 2 and bool(conv.inputs[2])
            if other > MARGIN * now or (has_bias and not _bias_commutes(pool)):
                continue
            nodes = _pool_first(graph, conv, pool)
        replaced[id(second)] = nodes
        dropped.add(id(first))
    graph.nodes = [n for node in graph.nodes if id(node) not in dropped
                   for n in replaced.get(id(node), [node])]
    ctx.count("reordered_pool_convs", len(replaced))
    return graph

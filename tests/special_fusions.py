"""Small float32 graphs that make each of the compiler's fusions fire, with NaN, +inf and
-inf among their fed values (tests/unit/kernels/test_special_values.py).

:data:`FUSIONS` maps a case name to its builder, which returns ``(model, feeds, fused)``:
``fused`` is what the compiled graph must then hold, ``(op, attribute)`` pairs each met by a
node of the case (attribute ``""``: the op alone), and ``(op, attribute, target backend)``
for what only one backend fuses.  Sizes are past the oneDNN backend's small-tensor cut,
so that its kernels take the fused nodes.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from special_values import salted

OPSET = 20
F32 = np.float32


class Graph:
    """A graph under construction: nodes, fed inputs (salted), constants (not salted)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: dict[str, np.ndarray] = {}
        self.inits: list[onnx.TensorProto] = []

    def feed(self, name: str, shape, scale: float = 1.0, clean: bool = False) -> str:
        x = (self.rng.standard_normal(shape) * scale).astype(F32)
        self.inputs[name] = x if clean else salted(x, self.seed + len(self.inputs))
        return name

    def const(self, value, name: str | None = None) -> str:
        name = name or f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, shape, scale: float = 0.2) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(F32))

    def node(self, op: str, inputs: list[str], domain: str = "", **attrs) -> str:
        out = f"v{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"n{len(self.nodes)}_{op}",
                                           domain=domain, **attrs))
        return out

    def model(self, *outputs: str) -> tuple[onnx.ModelProto, dict]:
        ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape)
               for n, v in self.inputs.items()]
        outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
        g = helper.make_graph(self.nodes, "case", ins, outs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        onnx.checker.check_model(m)
        return m, dict(self.inputs)


def conv(g: Graph, x: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
    return g.node("Conv", [x, g.weight((cout, cin, k, k), 1.0 / math.sqrt(cin * k * k)),
                           g.weight((cout,))], pads=[k // 2] * 4, strides=[stride] * 2)


def _conv_relu(g: Graph):
    return g.model(g.node("Relu", [conv(g, g.feed("x", (1, 32, 16, 16)), 32, 32, 1)])), \
        [("Conv", "fused_relu")]


def _conv_add_relu(g: Graph):
    y = conv(g, g.feed("x", (1, 32, 16, 16)), 32, 32, 3, stride=1)
    y = g.node("Add", [y, g.feed("r", (1, 32, 16, 16))])
    return g.model(g.node("Relu", [y])), [("Conv", "fused_add"), ("Conv", "fused_relu")]


def _conv_bn_relu(g: Graph):
    y = conv(g, g.feed("x", (1, 16, 20, 20)), 16, 32, 3, stride=2)
    bn = [g.const((g.rng.random(32) + 0.5).astype(F32)) for _ in range(2)]
    y = g.node("BatchNormalization", [y, bn[0], g.weight((32,)), g.weight((32,)), bn[1]])
    return g.model(g.node("Relu", [y])), [("Conv", "fused_relu")]


def _winograd_relu(g: Graph):
    """3x3 stride 1, 64 -> 64 channels at 24 x 24: both backends' Winograd mode."""
    y = conv(g, g.feed("x", (1, 64, 24, 24)), 64, 64, 3)
    y = g.node("Add", [y, g.feed("r", (1, 64, 24, 24))])
    return g.model(g.node("Relu", [y])), [("Conv", "fused_relu")]


def _conv_activations(g: Graph):
    x = g.feed("x", (1, 16, 16, 16), scale=3.0)
    outs = [g.node(op, [conv(g, x, 16, 16, 1)], **attrs) for op, attrs in ACTIVATIONS]
    return g.model(*outs), [("Conv", "fused_activation", "dnnl")]


def _matmul_activations(g: Graph):
    x = g.feed("x", (64, 96), scale=3.0)
    outs = [g.node(op, [g.node("MatMul", [x, g.weight((96, 64))])], **attrs)
            for op, attrs in ACTIVATIONS]
    outs += [g.node("Clip", [g.node("MatMul", [x, g.weight((96, 64))]), g.const(F32(0)),
                             g.const(F32(6))])]
    return g.model(*outs), [("MatMul", "fused_activation", "dnnl")]


ACTIVATIONS = [("Relu", {}), ("Sigmoid", {}), ("Tanh", {}), ("LeakyRelu", {"alpha": 0.1}),
               ("HardSigmoid", {}), ("HardSwish", {}), ("Elu", {"alpha": 1.0}), ("Gelu", {})]


def _matmul_scale_add_relu(g: Graph):
    s = g.node("Mul", [g.node("MatMul", [g.feed("a", (64, 96)), g.feed("b", (96, 80))]),
                       g.const(F32(0.125))])
    y = g.node("Relu", [g.node("Add", [g.node("MatMul", [g.feed("x", (64, 96)),
                                                          g.weight((96, 80))]),
                                        g.weight((80,))])])
    z = g.node("Relu", [g.node("Gemm", [g.feed("p", (64, 96)), g.weight((96, 80)),
                                         g.weight((80,))])])
    return g.model(s, y, z), [("MatMul", "fused_scale"), ("MatMul", "fused_relu"),
                              ("MatMul", "fused_add")]


def _norm_relu(g: Graph):
    x = g.feed("x", (2, 16, 16, 16))
    scale, bias = g.weight((16,)), g.weight((16,))
    inorm = g.node("Relu", [g.node("InstanceNormalization", [x, scale, bias])])
    stats = [g.weight((16,)), g.const((g.rng.random(16) + 0.5).astype(F32))]
    bn = g.node("Relu", [g.node("BatchNormalization", [g.feed("b", (2, 16, 16, 16)),
                                                       scale, bias, *stats])])
    return g.model(inorm, bn), [("InstanceNormalization", "fused_relu"),
                                ("BatchNormalization", "fused_relu")]


def _push_bn_scale(g: Graph):
    """DenseNet's Concat -> BN -> Relu -> Conv (1x1 unpadded, and 3x3 padded)."""
    x = g.node("Concat", [g.feed("a", (1, 16, 16, 16)), g.feed("b", (1, 16, 16, 16))], axis=1)
    stats = [g.const((g.rng.random(32) + 0.5).astype(F32)), g.weight((32,)), g.weight((32,)),
             g.const((g.rng.random(32) + 0.5).astype(F32))]
    y = g.node("Relu", [g.node("BatchNormalization", [x, *stats])])
    x2 = g.node("Concat", [g.feed("c", (1, 16, 16, 16)), g.feed("d", (1, 16, 16, 16))], axis=1)
    y2 = g.node("Relu", [g.node("BatchNormalization", [x2, *stats])])
    return g.model(conv(g, y, 32, 32, 1), conv(g, y2, 32, 32, 3)), [("Max", ""), ("Conv", "")]


def _elementwise_chain(g: Graph):
    x = g.feed("x", (64, 96))
    y = g.node("Sub", [x, g.const(F32(0.25))])
    y = g.node("Relu", [y])
    y = g.node("Mul", [y, g.weight((96,))])
    y = g.node("Tanh", [g.node("Add", [y, x])])
    y = g.node("Sqrt", [g.node("Abs", [g.node("Sigmoid", [y])])])
    return g.model(y), [("ElementwiseChain", "")]


def _add_layernorm(g: Graph):
    y = g.node("Add", [g.feed("a", (4, 32, 64)), g.feed("b", (4, 32, 64))])
    y = g.node("LayerNormalization", [y, g.weight((64,)), g.weight((64,))], axis=-1)
    return g.model(y), [("LayerNormalization", "fused_add")]


def _add_softmax(g: Graph):
    y = g.node("Softmax", [g.node("Add", [g.feed("s", (4, 4, 32, 48)),
                                          g.feed("m", (4, 1, 1, 48), clean=True)])], axis=-1)
    z = g.node("LogSoftmax", [g.feed("t", (4, 32, 64))], axis=-1)
    return g.model(y, z), [("Softmax", "fused_add")]


def _softmax_matmul(g: Graph):
    p = g.node("Softmax", [g.node("Add", [g.feed("s", (2, 4, 32, 48)),
                                          g.feed("m", (2, 1, 1, 48), clean=True)])], axis=-1)
    y = g.node("MatMul", [p, g.feed("v", (2, 4, 48, 32))])
    z = g.node("MatMul", [g.node("Softmax", [g.feed("t", (2, 4, 32, 48))], axis=-1),
                          g.feed("w", (2, 4, 48, 32))])
    return g.model(y, z), [("SoftmaxMatMul", "")]


def _gelu(g: Graph):
    x = g.feed("x", (64, 96), scale=3.0)
    e = g.node("Erf", [g.node("Div", [x, g.const(F32(math.sqrt(2.0)))])])
    y = g.node("Mul", [g.node("Mul", [x, g.const(F32(0.5))]),
                       g.node("Add", [e, g.const(F32(1.0))])])
    return g.model(y), [("Gelu", "")]


def attention(g: Graph, b: int, s: int, heads: int, d: int, mask: bool) -> str:
    """A BERT-style self-attention block of x [b, s, heads * d] with an additive mask."""
    e = heads * d
    x = g.feed("x", (b, s, e))

    def proj(perm):
        y = g.node("Add", [g.node("MatMul", [x, g.weight((e, e), 1 / math.sqrt(e))]),
                           g.weight((e,))])
        y = g.node("Reshape", [y, g.const(np.array([b, s, heads, d], np.int64))])
        return g.node("Transpose", [y], perm=perm)

    q, kt, v = proj([0, 2, 1, 3]), proj([0, 2, 3, 1]), proj([0, 2, 1, 3])
    scores = g.node("Div", [g.node("MatMul", [q, kt]), g.const(F32(math.sqrt(d)))])
    if mask:
        m = np.zeros((b, 1, 1, s), F32)
        m[:, :, :, -2:] = -10000.0
        scores = g.node("Add", [scores, g.const(m)])
    ctx = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), v])
    ctx = g.node("Transpose", [ctx], perm=[0, 2, 1, 3])
    return g.node("Reshape", [ctx, g.const(np.array([b, s, e], np.int64))])


def _attention_small_heads(g: Graph):
    return g.model(attention(g, 2, 16, 4, 16, mask=True)), [("Attention", "")]


def _attention_large_heads(g: Graph):
    return g.model(attention(g, 2, 64, 4, 64, mask=False)), [("Attention", "")]


def _avgpool_conv(g: Graph):
    """An AveragePool and a 1x1 conv that ``reorder-pool-conv`` swaps."""
    x = g.feed("x", (1, 64, 16, 16))
    y = conv(g, g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2]), 64, 16, 1)
    return g.model(y), [("AveragePool", ""), ("Conv", "")]


def _maxpool(g: Graph):
    y = g.node("MaxPool", [g.feed("p", (1, 32, 16, 16))], kernel_shape=[3, 3], strides=[2, 2],
               pads=[1, 1, 1, 1])
    return g.model(y), [("MaxPool", "")]


#: Cases whose fused nodes the oneDNN backend has no kernel for (numpy's run them there too).
NUMPY_ONLY = ("elementwise_chain", "gelu", "softmax_matmul")


FUSIONS: dict[str, Callable[[Graph], tuple]] = {
    "conv_relu": _conv_relu,
    "conv_add_relu": _conv_add_relu,
    "conv_bn_relu": _conv_bn_relu,
    "winograd_relu": _winograd_relu,
    "conv_activations": _conv_activations,
    "matmul_activations": _matmul_activations,
    "matmul_scale_add_relu": _matmul_scale_add_relu,
    "norm_relu": _norm_relu,
    "push_bn_scale": _push_bn_scale,
    "elementwise_chain": _elementwise_chain,
    "add_layernorm": _add_layernorm,
    "add_softmax": _add_softmax,
    "softmax_matmul": _softmax_matmul,
    "gelu": _gelu,
    "attention_small_heads": _attention_small_heads,
    "attention_large_heads": _attention_large_heads,
    "avgpool_conv": _avgpool_conv,
    "maxpool": _maxpool,
}


def build(name: str, seed: int) -> tuple[onnx.ModelProto, dict, list[tuple]]:
    """(model, feeds, fused) of the case ``name``."""
    (model, feeds), fused = FUSIONS[name](Graph(seed))
    return model, feeds, fused

"""Pass ``pack-weights``: store constant Conv weights in the layout the kernel backend wants.

ONNX stores a convolution's weights as (M, C/group, kH, kW), ``OIHW``.  A kernel
backend may run a conv better on another layout: the numpy backend's per-tap and
stacked modes read (kH, kW, M, C/group), ``HWOI``, where each tap's (M, C/group)
matrix is contiguous.  For every Conv with constant weights, this pass asks the
target's backend which layout it wants (its layout rule sees the conv's input
types and attributes) and, when it is not ONNX's, transposes the weights once at
compile time and marks the node with ``weight_layout`` (the weights section of the
.om holds the packed array).  Shape inference and the kernel read the attribute;
nothing else changes.
"""
from __future__ import annotations

import numpy as np

from aircc.formats.kinds import Impl
from aircc.ops.defs.conv import HWOI, OIHW

from ..context import CompileContext
from ..ir.graph import Graph, TensorType
from .base import compile_pass


@compile_pass("pack-weights", stats=("packed_conv_weights",))
def pack_weights(graph: Graph, ctx: CompileContext) -> Graph:
    users = graph.consumers()
    packed = 0
    for node in graph.nodes:
        if node.op != "Conv" or node.domain or node.impl is Impl.FALLBACK \
                or node.attrs.get("weight_layout", OIHW) != OIHW or len(node.inputs) < 2:
            continue
        w = graph.constants.get(node.inputs[1])
        if w is None or w.ndim != 4:
            continue
        types = [graph.types.get(i) if i else None for i in node.inputs]
        if ctx.backend.weight_layout("Conv", types, node.attrs, ctx.target) != HWOI:
            continue
        name = node.inputs[1]
        if len(users.get(name, [])) != 1 or name in graph.outputs:
            name = graph.fresh_name(f"{name}.packed")
        arr = np.ascontiguousarray(w.transpose(2, 3, 0, 1))
        graph.constants[name] = arr
        graph.types[name] = TensorType.of(arr)
        node.inputs = [node.inputs[0], name, *node.inputs[2:]]
        node.attrs["kernel_shape"] = [int(w.shape[2]), int(w.shape[3])]
        node.attrs["weight_layout"] = HWOI
        packed += 1
    ctx.count("packed_conv_weights", packed)
    return graph

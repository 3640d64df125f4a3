"""Pass ``pack-weights``: store constant Conv weights in the layout the kernel reads.

A 2-D convolution runs as one GEMM per kernel tap, each accumulating into the
output (``W[:, :, i, j] @ shifted input``).  ONNX stores the weights as
(M, C/group, kH, kW), where one tap's (M, C/group) matrix is strided; the
kernel wants it contiguous.  This pass transposes constant weights once, at
compile time, to (kH, kW, M, C/group) and marks the node with
``weight_layout = "HWOI"`` (the weights section of the .om holds the packed
array).  Shape inference and the Conv kernel read the attribute; nothing else
changes.  Packed when the GEMM per tap is worth it: at least ``MIN_CHANNELS``
input channels per group, at most ``MAX_GROUPS`` groups, more than one tap, and
an output wide enough (a small one, 7 x 7, runs better as one GEMM over exact
columns) and work enough (below ``TAPS_MIN_MACS`` multiply-adds one im2col GEMM
beats nine GEMM calls), unless the kernel's stacked mode, which reads the packed
weights too, takes the conv; the Winograd mode transforms ONNX's layout itself, so
its convs stay as they are: ``conv.wants_packed`` decides.
"""
from __future__ import annotations

import numpy as np

from aircc.executor.kernels.conv import PACKED, wants_packed

from ..ir.graph import Graph, TensorType

#: Input channels per group below which one im2col GEMM beats a GEMM per tap.
MIN_CHANNELS = 64
#: Groups above which the GEMM calls per tap and group cost more than they save.
MAX_GROUPS = 4


def pack_weights(graph: Graph) -> Graph:
    users = graph.consumers()
    packed = 0
    for node in graph.nodes:
        if node.op != "Conv" or node.domain or node.meta.get("impl") == "fallback" \
                or node.attrs.get("weight_layout", "OIHW") != "OIHW" or len(node.inputs) < 2:
            continue
        w = graph.constants.get(node.inputs[1])
        group = int(node.attrs.get("group", 1))
        if w is None or w.ndim != 4 or w.shape[2] * w.shape[3] == 1:
            continue
        if w.shape[1] < MIN_CHANNELS or group > MAX_GROUPS:
            continue
        xt = graph.types.get(node.inputs[0])
        if xt is not None and xt.shape is not None \
                and not wants_packed(xt.shape, w.shape, node.attrs, w.dtype):
            continue
        name = node.inputs[1]
        if len(users.get(name, [])) != 1 or name in graph.outputs:
            name = graph.fresh_name(f"{name}.packed")
        arr = np.ascontiguousarray(w.transpose(2, 3, 0, 1))
        graph.constants[name] = arr
        graph.types[name] = TensorType.of(arr)
        node.inputs = [node.inputs[0], name, *node.inputs[2:]]
        node.attrs["kernel_shape"] = [int(w.shape[2]), int(w.shape[3])]
        node.attrs["weight_layout"] = PACKED
        packed += 1
    stats = graph.meta.setdefault("stats", {})
    stats["packed_conv_weights"] = stats.get("packed_conv_weights", 0) + packed
    return graph

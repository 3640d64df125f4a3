"""How much arithmetic a model is, and how fast this machine's GEMM does arithmetic.

The benchmark reports each engine's effective rate (2 x multiply-adds / latency) next
to numpy's own float32 GEMM rate, so a reader sees how close to the machine's GEMM
limit each engine runs, and whether the reference runs past it (its own kernels may
use wider vector units than the BLAS numpy was given).
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import onnx
from onnx import shape_inference


def _dims(value_info) -> list | None:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return None if any(d is None for d in dims) else dims


def _with_input_shapes(model: onnx.ModelProto, shapes: dict) -> onnx.ModelProto:
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for inp in fixed.graph.input:
        if inp.name in shapes:
            dims = inp.type.tensor_type.shape.dim
            del dims[:]
            for d in shapes[inp.name]:
                dims.add().dim_value = int(d)
    return shape_inference.infer_shapes(fixed, data_prop=True)


#: Recurrent ops by their gates per step (W and R stack one hidden-size block per gate).
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
COUNTED = ("Conv", "ConvTranspose", "MatMul", "Gemm", *GATES)


def multiply_adds(model: onnx.ModelProto, input_shapes: dict) -> int:
    """Multiply-adds of the model's Conv (depthwise and grouped too), ConvTranspose,
    MatMul (attention's score and context products too), Gemm, LSTM, GRU and RNN nodes
    with its inputs of ``input_shapes`` (name -> shape), from onnx's shape inference.
    A recurrent node counts its gates' input and recurrent products at every step.

    Raises ValueError when a counted node's shapes stay unknown (a count that silently
    left nodes out would overstate every rate computed from it)."""
    inferred = _with_input_shapes(model, input_shapes)
    try:
        return _count(inferred.graph)
    except ValueError:
        # onnx's data propagation stops at some shape arithmetic (a Div of dims: a head's
        # width in a traced attention); onnxruntime's symbolic inference goes on
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        try:
            symbolic = SymbolicShapeInference.infer_shapes(inferred, auto_merge=True)
        except Exception:
            symbolic = None
        if symbolic is None:
            raise
        return _count(symbolic.graph)


def _count(g: onnx.GraphProto) -> int:
    shapes = {vi.name: _dims(vi) for vi in (*g.input, *g.value_info, *g.output)}
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    total = 0
    for node in g.node:
        if node.op_type not in COUNTED:
            continue
        a, b = shapes.get(node.input[0]), shapes.get(node.input[1])
        y = a if node.op_type in GATES else shapes.get(node.output[0])   # an RNN's Y may be omitted
        if a is None or b is None or y is None:
            raise ValueError(f"shapes of {node.op_type} node {node.name or node.output[0]!r} "
                             f"are unknown after shape inference")
        attrs = {at.name: onnx.helper.get_attribute_value(at) for at in node.attribute}
        if node.op_type == "Conv":        # weight (M, C/group, *kernel): one per output
            total += int(np.prod(y)) * int(np.prod(b[1:]))
        elif node.op_type == "ConvTranspose":   # weight (C, M/group, *kernel): one per input
            total += int(np.prod(a)) * int(np.prod(b[1:]))
        elif node.op_type == "MatMul":    # (..., n, k) @ (..., k, m) -> (..., n, m)
            total += int(np.prod(y)) * int(a[-1])
        elif node.op_type == "Gemm":      # (n, k) -> (n, m), A maybe transposed
            total += int(np.prod(y)) * int(a[0] if attrs.get("transA", 0) else a[1])
        else:     # X (seq, batch, in) or batch first; W (dirs, gates x hidden, in); R (.., hidden)
            dirs, rows, inner = (int(d) for d in b)
            total += int(np.prod(a[:2])) * dirs * rows * (inner + rows // GATES[node.op_type])
    return total


def gemm_gflops(n: int = 1024, repeats: int = 15) -> float:
    """numpy's float32 GEMM rate on n x n x n products: the median of ``repeats``."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    c = np.empty((n, n), np.float32)
    np.matmul(a, b, out=c)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.matmul(a, b, out=c)
        times.append(time.perf_counter() - t)
    return 2 * n ** 3 / statistics.median(times) / 1e9

"""Compile time against graph size (synthetic graphs), and the load time of a big .om."""
from __future__ import annotations

import math
import os
import statistics
import tempfile
import time

import numpy as np
import onnx

import aircc
from aircc.compiler.driver import CompileOptions, compile_model
from aircc.formats import save_om
from plot import growth_exponent


def synthetic_graph(n: int, width: int = 64) -> onnx.ModelProto:
    """n nodes: a chain of 4-node blocks (Relu and Sigmoid of one input, their Add, a Tanh)
    on [1, width] float32 tensors.  At the default width every branch is too small to
    open a stream of its own; at 65536 (256 KiB) the branches take four streams, with
    events between them."""
    from onnx import TensorProto, helper

    nodes, x = [], "x"
    k = 0
    while len(nodes) < n:
        nodes.append(helper.make_node("Relu", [x], [f"a{k}"]))
        nodes.append(helper.make_node("Sigmoid", [x], [f"b{k}"]))
        nodes.append(helper.make_node("Add", [f"a{k}", f"b{k}"], [f"c{k}"]))
        nodes.append(helper.make_node("Tanh", [f"c{k}"], [f"d{k}"]))
        x = f"d{k}"
        k += 1
    g = helper.make_graph(nodes[:n] if len(nodes) == n else nodes, "synthetic",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


#: Synthetic graph sizes whose compile times the full run reports (and fits a slope to).
SCALING_SIZES = [1000, 2500, 5000, 10000, 20000, 40000]


#: Widths of the synthetic graphs' tensors: all on one stream, and branches on streams of
#: their own (four), with events between them.
SCALING_WIDTHS = {"small tensors": 64, "big tensors": 65536}


def compile_scaling(sizes) -> list[dict]:
    """Compile time of each synthetic graph size, in each series of :data:`SCALING_WIDTHS`."""
    out = []
    for series, width in SCALING_WIDTHS.items():
        for n in sizes:
            m = synthetic_graph(n, width)
            t = time.perf_counter()
            # branches open streams whatever the backend (oneDNN's kernels span the cores
            # and would keep them on one): the series times the multi-stream analysis
            compiled = compile_model(m, CompileOptions(split_matrix_branches=True))
            out.append({"series": series, "nodes": len(m.graph.node),
                        "compile_s": time.perf_counter() - t, "kernels": compiled.report.kernels,
                        "streams": compiled.report.streams})
    return out


def growth_exponents(rows: list[dict]) -> dict[str, float]:
    """Per series, the fitted exponent of compile time against node count."""
    series: dict[str, list] = {}
    for c in rows:
        series.setdefault(c["series"], []).append((c["nodes"], c["compile_s"]))
    return {name: growth_exponent(points) for name, points in series.items()}


def load_time(megabytes: int = 90) -> dict:
    from onnx import TensorProto, helper, numpy_helper

    n = megabytes * (1 << 20) // 4
    side = int(math.sqrt(n))
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((side, side)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, side])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, side])], [w])
    compiled = compile_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                                               ir_version=8))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.om")
        save_om(compiled.om, path)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            m = aircc.load(path)
            times.append(time.perf_counter() - t)
            m.close()
        size = os.path.getsize(path)
    return {"weights_mb": round(w.ByteSize() / (1 << 20), 1), "file_bytes": size,
            "load_s_median": statistics.median(times)}

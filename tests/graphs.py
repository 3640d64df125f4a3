"""Small ONNX graphs built with onnx.helper for the unit tests."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(m)
    return m


def tensor(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def diamond(width: int = 4, branches: int = 3, opset: int = 17) -> onnx.ModelProto:
    """x -> Relu -> {branches parallel chains of (Mul, Tanh)} -> Sum -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="stem")]
    outs = []
    inits = []
    for b in range(branches):
        inits.append(const(f"k{b}", np.full([width], b + 1.0, np.float32)))
        nodes.append(helper.make_node("Mul", ["r", f"k{b}"], [f"m{b}"], name=f"mul{b}"))
        nodes.append(helper.make_node("Tanh", [f"m{b}"], [f"t{b}"], name=f"tanh{b}"))
        outs.append(f"t{b}")
    nodes.append(helper.make_node("Sum", outs, ["y"], name="sum"))
    return model(nodes, [tensor("x", [2, width])], [tensor("y", [2, width])], inits, opset)


def run_ir(graph, feeds: dict) -> dict:
    """Evaluate an IR graph op by op with the numpy backend's kernels in host memory.

    The oracle for pass tests: a pass must not change what the graph computes.
    """
    from aircc.formats.kinds import Impl
    from aircc.ops import InferContext, TensorType, kernel_backend, layout, resolve_target

    backend, target = kernel_backend("numpy"), resolve_target("cpu-avx2")
    env = dict(graph.constants)
    env.update(feeds)
    for node in graph.nodes:
        if node.op in ("EventRecord", "EventWait", "MemcpyD2H"):
            continue
        if node.op == "MemcpyH2D":
            env[node.outputs[0]] = env[node.inputs[0]]
            continue
        fallback = node.impl is Impl.FALLBACK
        impl = layout.adapt_kernel(backend.impl(node.op, node.version, node.domain, node.name,
                                                fallback), node.attrs)
        ins = [env[i] if i else None for i in node.inputs]
        in_types = [TensorType.of(a) if a is not None else None for a in ins]
        types = layout.infer(node.definition, InferContext(in_types, node.attrs, ins, node.name,
                                                           node.op, len(node.outputs)))
        outs = [np.empty(t.shape, t.dtype) for t in types]
        tiling = impl.tile(in_types, node.attrs, target)
        ws = np.empty(tiling.get("workspace", 0), np.uint8) if tiling.get("workspace") else None
        impl.kernel(ins, outs, node.attrs, tiling, ws)
        env.update(zip(node.outputs, outs))
    return {o: env[o] for o in graph.outputs}


def if_model(opset=17) -> onnx.ModelProto:
    """y = If(sum(x) > 0) 2x else -x."""
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then_branch", [],
                               [tensor("t", [2, 3])],
                               [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else_branch", [],
                               [tensor("e", [2, 3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    return model(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 3])],
                 [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])], opset)


def loop_if_model(two_branches: bool = False) -> onnx.ModelProto:
    """y = Loop(M) { h = tanh(h @ W + b) [+ sigmoid(h @ W2)] }; out = If(sum(h) > 0) 2h else -h."""
    rng = np.random.default_rng(7)
    w = helper.make_tensor("W", TensorProto.FLOAT, [8, 8], (rng.standard_normal((8, 8)) * 0.5).ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, [8], rng.standard_normal(8).ravel())
    w2 = helper.make_tensor("W2", TensorProto.FLOAT, [8, 8], (rng.standard_normal((8, 8)) * 0.5).ravel())
    body_nodes = [helper.make_node("MatMul", ["h_in", "W"], ["mm"]),
                  helper.make_node("Add", ["mm", "b"], ["pre"]),
                  helper.make_node("Tanh", ["pre"], ["t"]),
                  helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    if two_branches:
        body_nodes += [helper.make_node("MatMul", ["h_in", "W2"], ["mm2"]),
                       helper.make_node("Sigmoid", ["mm2"], ["s"]),
                       helper.make_node("Add", ["t", "s"], ["h_out"])]
    else:
        body_nodes.append(helper.make_node("Identity", ["t"], ["h_out"]))
    body = helper.make_graph(body_nodes, "loop_body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                              tensor("h_in", [2, 8])],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                              tensor("h_out", [2, 8])])
    then_g = helper.make_graph([helper.make_node("Add", ["h", "h"], ["r_then"])], "then_branch", [],
                               [tensor("r_then", [2, 8])])
    else_g = helper.make_graph([helper.make_node("Neg", ["h"], ["r_else"])], "else_branch", [],
                               [tensor("r_else", [2, 8])])
    nodes = [helper.make_node("Loop", ["M", "", "x"], ["h"], body=body),
             helper.make_node("ReduceSum", ["h"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["y"], then_branch=then_g, else_branch=else_g)]
    inputs = [helper.make_tensor_value_info("M", TensorProto.INT64, []), tensor("x", [2, 8])]
    return model(nodes, inputs, [tensor("y", [2, 8])],
                 [w, b, w2, helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])], 17)


def concat_model(batch: int, width: int = 1000) -> "onnx.ModelProto":
    """x -> four parallel branches (a, b, c on their own, d read twice) -> Concat(a, b, c, d)
    along the channels, and d also concatenated a second time with a."""
    from graphs import const

    nodes, inits = [], []
    for k, name in enumerate("abcd"):
        inits.append(const(f"k{k}", np.full([width], k + 1.0, np.float32)))
        nodes.append(helper.make_node("Mul", ["x", f"k{k}"], [f"m{k}"], name=f"mul{k}"))
        nodes.append(helper.make_node("Tanh", [f"m{k}"], [name], name=f"tanh{k}"))
    nodes.append(helper.make_node("Concat", ["a", "b", "c", "d"], ["cat"], axis=1, name="cat"))
    nodes.append(helper.make_node("Concat", ["d", "a"], ["cat2"], axis=-1, name="cat2"))
    nodes.append(helper.make_node("Relu", ["cat"], ["y"], name="relu"))
    nodes.append(helper.make_node("Relu", ["cat2"], ["y2"], name="relu2"))
    return model(nodes, [tensor("x", [batch, 1, width])],
                 [tensor("y", [batch, 4, width]), tensor("y2", [batch, 1, 2 * width])], inits)

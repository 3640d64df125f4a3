"""Build the sample ONNX models with onnx.helper (deterministic weights).

    python samples/build_samples.py        # writes samples/*.onnx and samples/*_input.npy

- ``mlp.onnx``: a plain MLP, 784 -> 128 -> 64 -> 10 with MatMul, Add, Relu, Softmax.
- ``branches.onnx``: a small conv net with two parallel branches joined by Concat
  (it compiles to several streams with events between them).
"""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array.astype(np.float32), name)


def build_mlp(rng: np.random.Generator) -> onnx.ModelProto:
    sizes = [784, 128, 64, 10]
    nodes, inits = [], []
    x = "input"
    for k, (a, b) in enumerate(zip(sizes, sizes[1:])):
        inits += [_init(f"w{k}", rng.standard_normal((a, b)) / np.sqrt(a)),
                  _init(f"b{k}", rng.standard_normal(b) * 0.1)]
        nodes += [helper.make_node("MatMul", [x, f"w{k}"], [f"mm{k}"], name=f"fc{k}"),
                  helper.make_node("Add", [f"mm{k}", f"b{k}"], [f"z{k}"], name=f"bias{k}")]
        x = f"z{k}"
        if k < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"h{k}"], name=f"relu{k}"))
            x = f"h{k}"
    nodes.append(helper.make_node("Softmax", [x], ["probs"], name="softmax", axis=-1))
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 784])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             producer_name="aircc-samples", ir_version=8)


def build_branches(rng: np.random.Generator) -> onnx.ModelProto:
    def conv(name, x, cin, cout, k, pad):
        w = _init(f"{name}_w", rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k))
        b = _init(f"{name}_b", rng.standard_normal(cout) * 0.1)
        inits.extend([w, b])
        nodes.append(helper.make_node("Conv", [x, w.name, b.name], [f"{name}_c"], name=name,
                                      kernel_shape=[k, k], pads=[pad] * 4))
        nodes.append(helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"], name=f"{name}_relu"))
        return f"{name}_r"

    nodes, inits = [], []
    stem = conv("stem", "image", 3, 16, 3, 1)
    left = conv("left2", conv("left1", stem, 16, 16, 1, 0), 16, 24, 3, 1)
    right = conv("right2", conv("right1", stem, 16, 8, 1, 0), 8, 8, 5, 2)
    nodes.append(helper.make_node("MaxPool", [stem], ["pool"], name="pool",
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]))
    nodes.append(helper.make_node("Concat", [left, right, "pool"], ["cat"], name="concat", axis=1))
    nodes.append(helper.make_node("GlobalAveragePool", ["cat"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"))
    inits.append(_init("fc_w", rng.standard_normal((5, 48)) / np.sqrt(48)))
    inits.append(_init("fc_b", np.zeros(5)))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(
        nodes, "branches",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="aircc-samples", ir_version=8)


def main(out_dir: str = HERE) -> None:
    rng = np.random.default_rng(0)
    models = {"mlp": build_mlp(rng), "branches": build_branches(rng)}
    inputs = {"mlp": rng.standard_normal((4, 784)).astype(np.float32),
              "branches": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
    for name, model in models.items():
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(out_dir, f"{name}.onnx"))
        np.save(os.path.join(out_dir, f"{name}_input.npy"), inputs[name])


if __name__ == "__main__":
    main()

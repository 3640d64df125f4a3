"""Helpers of the kernel tests of onnxruntime's contrib ops: onnxruntime's outputs of a
few nodes (:func:`ort_run`: a one-node model of the op, or, for the ops and forms only its
CUDA kernels run (BiasSplitGelu, BiasAdd, GroupNorm, SkipGroupNorm, NhwcConv, GemmFastGelu,
RelativePositionBias, packed QKV), the same computation in ops its CPU kernels have), and
ours (:func:`ours`: the shape rule and kernel of the harness)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from aircc.ops import InferContext, op_def
from kernel_harness import run_ours
from onnx import helper, numpy_helper

MS = "com.microsoft"


def ort_run(nodes: list, inputs: list, n_out: int = 1, opset: int = 17,
            out_types: dict | None = None) -> list[np.ndarray]:
    """onnxruntime's outputs ``y0``... of ``nodes`` (default domain or ``com.microsoft``) over
    the inputs ``x0``... (None: omitted); ``out_types`` gives an output's element type
    where onnxruntime cannot infer it."""
    names = [f"x{i}" for i, a in enumerate(inputs) if a is not None]
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
          for n, a in zip(names, [a for a in inputs if a is not None])]
    outs = [helper.make_tensor_value_info(f"y{j}", out_types[j], None) if j in (out_types or {})
            else helper.make_empty_tensor_value_info(f"y{j}") for j in range(n_out)]
    model = helper.make_model(helper.make_graph(nodes, "g", vi, outs),
                              opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)],
                              ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {n: a for n, a in zip(names, [a for a in inputs if a is not None])})


def node(op: str, inputs: list, outputs: list, domain: str = "", **attrs) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, domain=domain or None, **attrs)


def ours(op: str, inputs: list, attrs: dict | None = None, n_out: int = 1, opset: int = 17) -> list:
    """Our outputs of the contrib op ``op`` (domain ``com.microsoft``)."""
    types, outs = run_ours(op, inputs, attrs or {}, opset=opset, n_out=n_out, domain=MS)
    for t, o in zip(types, outs):
        assert t.shape == o.shape and t.dtype == o.dtype.name
    return outs


def close(got, want, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    for g, w in zip(got, want):
        assert g.shape == np.asarray(w).shape, (g.shape, np.asarray(w).shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def infer_ms(op: str, types: list, attrs: dict | None = None, values: list | None = None, n_out: int = 1):
    """The output types our shape rule gives the contrib op ``op``."""
    ctx = InferContext(types, attrs or {}, values or [None] * len(types), node="n", op=op, num_outputs=n_out)
    return op_def(op, 1, MS).infer(ctx)


def constant(name: str, array: np.ndarray) -> onnx.NodeProto:
    """A Constant node making ``name``."""
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name))

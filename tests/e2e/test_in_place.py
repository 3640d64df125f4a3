"""Ops in place, run on the device: Concat parts written in their slice, reshapes as their
input's bytes, with the numbers of the model unchanged."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import aircc
from aircc.compiler.driver import CompileOptions, compile_model
from graphs import concat_model, model, tensor
from schedule_check import overlapping_live_buffers


@pytest.mark.parametrize("streams", [1, 4])
def test_concat_parts_are_written_in_place(streams):
    import onnxruntime as ort

    m = concat_model(batch=1)
    compiled = compile_model(m, CompileOptions(streams=streams, min_branch_bytes=0))
    s = compiled.om.sections
    plan = s["memory_plan"]
    aliases = {a["name"]: a for a in plan["aliases"]}
    # every part of the first Concat lives in its slice; "d" and "a" are taken, so the
    # second Concat copies both
    assert set(aliases) == {"a", "b", "c", "d"} and compiled.report.memory.concats_in_place == 1
    root = next(b for b in plan["buffers"] if b["name"] == "cat")
    assert [aliases[p]["offset"] - root["offset"] for p in "abcd"] == [0, 4000, 8000, 12000]
    cats = {t["node"]: t for lst in s["tasks"]["lists"] for t in lst if t.get("op") == "Concat"}
    assert cats["cat"]["attrs"]["in_place"] == [True] * 4 and "in_place" not in cats["cat2"]["attrs"]
    assert overlapping_live_buffers(s["tasks"], plan) == []
    model_ = aircc.load(compiled.om)
    x = np.linspace(-2, 2, 1000, dtype=np.float32).reshape(1, 1, 1000)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for _ in range(20):
        out = model_.run({"x": x})
        np.testing.assert_allclose(out["y"], ref[0], rtol=1e-6)
        np.testing.assert_allclose(out["y2"], ref[1], rtol=1e-6)
    model_.close()


def test_reshapes_are_their_inputs_bytes():
    """Reshape / Flatten / Squeeze / Unsqueeze outputs are placed on their input (the
    kernel copies nothing); a second reader of the input and a graph output still see
    the right values."""
    import onnxruntime as ort
    from graphs import const

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["rs"], name="reshape"),
             helper.make_node("Unsqueeze", ["rs", "ax"], ["u"], name="unsq"),
             helper.make_node("Flatten", ["u"], ["f"], axis=1, name="flat"),
             helper.make_node("Sigmoid", ["f"], ["y"], name="sig"),
             helper.make_node("Tanh", ["r"], ["t"], name="tanh")]
    m = model(nodes, [tensor("x", [2, 3, 4])], [tensor("y", [2, 12]), tensor("t", [2, 3, 4]),
                                              tensor("u", [2, 1, 12])],
              [const("shape", np.array([2, 12], np.int64)), const("ax", np.array([1], np.int64))])
    compiled = compile_model(m, CompileOptions(streams=1))
    plan = compiled.om.sections["memory_plan"]
    aliases = {a["name"]: a for a in plan["aliases"]}
    r = next(b for b in plan["buffers"] if b["name"] == "r")
    assert {n: aliases[n]["offset"] for n in ("rs", "u", "f")} == dict.fromkeys(("rs", "u", "f"), r["offset"])
    assert compiled.report.memory.reshapes_in_place == 3
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    loaded = aircc.load(compiled.om)
    for _ in range(3):
        out = loaded.run({"x": x})
        for name, want in zip(("y", "t", "u"), ref):
            np.testing.assert_allclose(out[name], want, rtol=1e-6)
    loaded.close()

"""Weights in a static model: placed without overlap, every byte a task reads written.

A constant of no bytes (an exporter's ``roi = []`` before Resize's ``scales``) used to
take the next constant's offset, and the loader, copying weights by offset, then never
wrote that next constant: the model read zeros or stale memory and answered wrong with
no error.  Now an empty constant takes no room, and the writer and the reader refuse a
file whose weights overlap (unless they are the same bytes) or whose tasks read weight
bytes no weight is written to, naming both.
"""
from __future__ import annotations

import copy

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from aircc.errors import ModelFormatError
from aircc.executor.device.device import VirtualDevice
from aircc.formats import OmFile, dump_om, load_om
from graphs import const, model, tensor
from test_om_contract import forge, refused


def empty_constant_model():
    """Two Resizes, each with an empty ``roi`` before its ``scales``, then a Div by a
    constant: every constant after an empty one must be written."""
    return model([helper.make_node("Resize", ["x", "roi", "scales"], ["r"], mode="nearest"),
                  helper.make_node("Resize", ["r", "roi2", "ones"], ["s"], mode="nearest"),
                  helper.make_node("Div", ["s", "d"], ["y"])],
                 [tensor("x", ["N", 2, 3, 3])], [tensor("y", ["N", 2, 6, 6])],
                 [const("roi", np.array([], np.float32)),
                  const("scales", np.array([1, 1, 2, 2], np.float32)),
                  const("roi2", np.array([], np.float32)),
                  const("ones", np.array([1, 1, 1, 1], np.float32)),
                  const("d", np.arange(1, 3, dtype=np.float32).reshape(1, 2, 1, 1) * 4)], opset=13)


@pytest.mark.parametrize("target", ["cpu-avx2", "native"])
@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_constants_after_an_empty_one_are_written(mode, target, device):
    m = empty_constant_model()
    feeds = {"x": np.random.default_rng(0).random((1, 2, 3, 3), np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    compiled = aircc.compile(m, mode=mode, target=target, input_shapes={"x": [1, 2, 3, 3]})
    with aircc.load(compiled, device=device) as loaded:
        np.testing.assert_allclose(loaded.run(feeds)["y"], want, rtol=1e-6)
    if mode == "static":
        placed = {w["name"]: w for w in compiled.om.sections["memory_plan"]["weights"]}
        assert "roi" not in placed and placed["scales"]["size"] == 16


def test_gears_write_the_constants_after_an_empty_one():
    m = empty_constant_model()
    compiled = aircc.compile(m, dynamic_batch=[1, 2], target="cpu-avx2")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    fresh = VirtualDevice(64 << 20)       # no stale copy of the weights from an earlier test
    try:
        with aircc.load(compiled, device=fresh) as loaded:
            for batch in (1, 2):
                feeds = {"x": np.random.default_rng(batch).random((batch, 2, 3, 3), np.float32)}
                np.testing.assert_allclose(loaded.run(feeds)["y"], sess.run(None, feeds)[0], rtol=1e-6)
    finally:
        fresh.close()


@pytest.fixture(scope="module")
def two_weights():
    """A static model with two weights: a conv's kernel and a scale."""
    rng = np.random.default_rng(0)
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
               helper.make_node("Mul", ["c", "k"], ["y"])],
              [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, 4, 8, 8])],
              [const("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
               const("k", rng.standard_normal((1, 4, 1, 1)).astype(np.float32))])
    om = aircc.compile(m, target="cpu-avx2", passes=["infer-shapes"]).om     # nothing fused
    assert sorted(w["name"] for w in om.sections["memory_plan"]["weights"]) == ["k", "w"]
    return om


def _record(om: OmFile, name: str) -> int:
    return next(i for i, w in enumerate(om.sections["memory_plan"]["weights"]) if w["name"] == name)


def test_two_weights_that_overlap_are_refused_naming_both(two_weights):
    i, j = _record(two_weights, "w"), _record(two_weights, "k")

    def overlap(sec):
        sec["memory_plan"]["weights"][j]["offset"] = sec["memory_plan"]["weights"][i]["offset"]
    msg = refused(two_weights, overlap, "overlap in the weights region")
    assert "'w'" in msg and "'k'" in msg


def test_weights_at_one_range_with_the_same_bytes_may_share_it(two_weights):
    om = OmFile(two_weights.mode, copy.deepcopy(two_weights.sections), dict(two_weights.weights))
    recs = om.sections["memory_plan"]["weights"]
    w = recs[_record(om, "w")]
    om.weights["w_copy"] = np.array(om.weights["w"])
    recs.append({"name": "w_copy", "offset": w["offset"], "size": w["size"]})
    assert load_om(dump_om(om)).parsed().memory_plan.weights[-1].name == "w_copy"
    om.weights["w_copy"] = np.array(om.weights["w"]) + 1      # same range, other bytes
    with pytest.raises(ModelFormatError, match="'w' .* and 'w_copy' .* do not hold the same bytes"):
        dump_om(om)


def _weight_operand(om: OmFile, op: str) -> tuple[int, int, int, dict]:
    for s, tl in enumerate(om.sections["tasks"]["lists"]):
        for i, t in enumerate(tl):
            if t["kind"] == "kernel" and t["op"] == op:
                j = next(j for j, o in enumerate(t["inputs"]) if o and o["mem"] == "weights")
                return s, i, j, t
    raise AssertionError(op)


def test_a_task_reading_weight_bytes_never_written_is_refused(two_weights):
    s, i, j, t = _weight_operand(two_weights, "Mul")
    end = max(w["offset"] + w["size"] for w in two_weights.sections["memory_plan"]["weights"])

    def unwritten(sec):      # into the padding after the last weight: inside the region
        sec["memory_plan"]["weights_bytes"] = end + 512
        sec["tasks"]["lists"][s][i]["inputs"][j]["offset"] = end + 256 - end % 256
    msg = refused(two_weights, unwritten, "which no weight is written to")
    assert f"node '{t['node']}'" in msg and f"lists[{s}][{i}].inputs[{j}]" in msg


def test_a_task_reading_across_two_weights_is_refused_naming_them(two_weights):
    s, i, j, t = _weight_operand(two_weights, "Conv")
    k = two_weights.sections["memory_plan"]["weights"][_record(two_weights, "k")]

    def straddle(sec):      # the conv's 432 bytes starting 4 bytes before the scale ends
        sec["tasks"]["lists"][s][i]["inputs"][j]["offset"] = k["offset"] + k["size"] - 4 \
            if k["offset"] > 0 else k["offset"]
        sec["memory_plan"]["weights_bytes"] += 1024
    msg = refused(two_weights, straddle, "only partly lies in weight")
    assert f"node '{t['node']}'" in msg


def test_a_task_writing_to_the_weights_is_refused(two_weights):
    s, i, j, t = _weight_operand(two_weights, "Mul")

    def writes(sec):
        task = sec["tasks"]["lists"][s][i]
        task["outputs"][0] = dict(task["inputs"][j], shape=[1, 4, 1, 1])
    msg = refused(two_weights, writes, "writes to the weights region, which is read-only")
    assert f"node '{t['node']}'" in msg


def test_the_next_load_works_after_a_refused_file(two_weights, device):
    bad = OmFile(two_weights.mode, copy.deepcopy(two_weights.sections), two_weights.weights)
    bad.sections["memory_plan"]["weights"][0]["offset"] = bad.sections["memory_plan"]["weights"][1]["offset"]
    with pytest.raises(ModelFormatError):
        aircc.load(forge(bad), device=device)
    with aircc.load(dump_om(two_weights), device=device) as loaded:
        assert loaded.run({"x": np.ones((1, 3, 8, 8), np.float32)})["y"].shape == (1, 4, 8, 8)

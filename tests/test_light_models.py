"""Every light model of the onnx package: compile to .om, run, compare with onnxruntime.

Each model is compiled twice (a single stream and the default assignment),
written to a real .om file, loaded back and run on the virtual device.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import aircc
from aircc.formats import load_om
from conftest import LIGHT_DIR, LIGHT_MODELS, light_path, random_feeds
from schedule_check import overlapping_live_buffers, unordered_dependencies


def _reference(name: str, feeds: dict) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(light_path(name), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.fixture(scope="module", params=LIGHT_MODELS)
def light(request, tmp_path_factory, device):
    """(name, {streams: (om path, loaded model)}, feeds, reference outputs)."""
    name = request.param
    out = tmp_path_factory.mktemp(name)
    builds = {}
    for streams in (1, None):
        path = out / f"{name}_s{streams or 'default'}.om"
        aircc.compile(light_path(name), path, streams=streams)
        builds[streams] = (path, aircc.load(path, device=device))
    feeds = random_feeds(builds[1][1].inputs, seed=0)
    yield name, builds, feeds, _reference(name, feeds)
    for _, m in builds.values():
        m.close()


@pytest.mark.parametrize("streams", [1, None], ids=["one-stream", "default-streams"])
def test_outputs_match_onnxruntime(light, streams):
    name, builds, feeds, expected = light
    model = builds[streams][1]
    got = model.run(feeds)
    assert list(got) == [o["name"] for o in model.outputs]
    for g, e in zip(got.values(), expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-4)


def test_stored_expected_output_matches(light):
    """The onnx package ships each light model's output for the input its runner generates."""
    from onnx.backend.test.runner import Runner

    name, builds, _, _ = light
    proto = onnx.load(light_path(name))
    inits = {i.name for i in proto.graph.initializer}
    feeds = {vi.name: Runner.generate_dummy_data(vi, seed=0, name=name, random=False)
             for vi in proto.graph.input if vi.name not in inits}
    stored = numpy_helper.to_array(onnx.load_tensor(f"{LIGHT_DIR}/light_{name}_output_0.pb"))
    got = next(iter(builds[None][1].run(feeds).values()))
    np.testing.assert_allclose(got, stored, rtol=2e-3, atol=1e-6)


def test_one_host_submission_per_inference(light):
    name, builds, feeds, _ = light
    model = builds[None][1]
    before = model.device.stats["host_submissions"]
    model.run(feeds)
    model.run(feeds)
    assert model.device.stats["host_submissions"] - before == 2


def test_memory_plan_is_tight_and_safe(light):
    name, builds, _, _ = light
    for streams, (path, _) in builds.items():
        om = load_om(path)
        plan, tasks = om.sections["memory_plan"], om.sections["tasks"]
        assert plan["arena_bytes"] <= 1.10 * plan["lower_bound_bytes"], (streams, plan["arena_bytes"],
                                                                          plan["lower_bound_bytes"])
        assert plan["arena_bytes"] < 0.75 * plan["no_reuse_bytes"]
        assert overlapping_live_buffers(tasks, plan) == []
        assert unordered_dependencies(tasks) == []
        if streams == 1:
            assert tasks["streams"] == 1 and tasks["events"] == 0

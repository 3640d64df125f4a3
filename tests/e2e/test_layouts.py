"""Channels-last regions end to end: planned by ``plan-layouts``, run on the device, the
same numbers as onnxruntime, counted in the report, in both modes.

The numpy backend runs channels-first itself, so here the layouts are forced
(``channels_last=True``) and its kernels run channels-last nodes through channels-first
copies (:func:`aircc.ops.layout.adapt_kernel`): what a backend's fallback to numpy does.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import aircc
from aircc.compiler.driver import CompileOptions, compile_model
from aircc.formats.summary import summarize
from testdata import light_path, random_feeds


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_light_model_planned_channels_last_matches_onnxruntime(name, mode, device):
    planned = compile_model(light_path(name), CompileOptions(channels_last=True, mode=mode,
                                                             target="cpu-avx2"))
    report = planned.report
    assert report.stats["channels_last_nodes"] > 20 and report.stats["layout_reorders"] >= 1
    assert sum(n.attrs.get("channels_last", 0) for n in planned.graph.nodes) == \
        report.stats["channels_last_nodes"]
    if mode == "static":        # the same bytes, laid out differently
        plain = compile_model(light_path(name), CompileOptions(target="cpu-avx2"))
        assert report.memory.arena_bytes == plain.report.memory.arena_bytes
        assert plain.report.stats.get("layout_reorders", 0) == 0
    shown = summarize(planned.om)["layouts"]       # what aircc inspect shows
    assert shown["channels_last_kernels"] == report.stats["channels_last_nodes"]
    assert len(shown["reorders"]) == report.stats["layout_reorders"]
    m = aircc.load(planned.om, device=device)
    feeds = random_feeds(m.inputs, seed=1)
    got = m.run(feeds)
    want = ort.InferenceSession(light_path(name), providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got.values(), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    m.close()


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_shufflenet_shuffles_stay_inside_its_channels_last_region(mode, device):
    """Each of ShuffleNet's 16 channel shuffles (Reshape, 5-D Transpose, Reshape) is one
    ChannelShuffle along the moved channel axis: the region is not cut around them, so
    the one reorder left is the model's input (the pooled output leaves as a view), not
    two per shuffle."""
    c = compile_model(light_path("shufflenet"), CompileOptions(channels_last=True, mode=mode,
                                                               target="cpu-avx2"))
    assert c.report.stats["fused_channel_shuffles"] == 16
    shuffles = [n for n in c.graph.nodes if n.op == "ChannelShuffle"]
    assert len(shuffles) == 16 and all(n.attrs["axis"] == 3 for n in shuffles)
    assert not any(n.op == "Transpose" and len(n.attrs.get("perm", [])) == 5 for n in c.graph.nodes)
    assert c.report.stats["layout_reorders"] == 1 and c.report.stats["layout_views"] == 1
    m = aircc.load(c.om, device=device)
    feeds = random_feeds(m.inputs, seed=1)
    got = m.run(feeds)
    want = ort.InferenceSession(light_path("shufflenet"), providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got.values(), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    m.close()

"""The benchmark's broader suite (``benchmarks/broader.py``: torch-exported LSTM, GRU,
MobileNet with squeeze-and-excitation, U-Net, TransformerEncoder and causal decoder) at
its SMALL sizes: compiled static (at each input shape) and dynamic (once for all of
them), run on the virtual device, compared with onnxruntime."""
from __future__ import annotations

import os
import sys

import numpy as np
import onnxruntime as ort
import pytest

import aircc

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
try:
    import broader
    import work
finally:
    sys.path.pop(0)

FAMILIES = sorted(broader.FAMILIES)


@pytest.fixture(scope="module", params=FAMILIES)
def exported(request):
    """(family, its SMALL ONNX model, [(feeds, onnxruntime's outputs)] per input shape)."""
    family = broader.FAMILIES[request.param]
    model = broader.export(family, "small")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    cases = []
    for shape in family.shapes["small"]:
        feeds = family.feeds("small", shape)
        cases.append((feeds, sess.run(None, feeds)))
    return family, model, cases


def _assert_matches(got: dict, expected: list) -> None:
    assert len(got) == len(expected)
    for y, ref in zip(got.values(), expected):
        assert y.shape == ref.shape and y.dtype == ref.dtype
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5 * scale)


def test_static_at_each_shape(exported, device):
    family, model, cases = exported
    for feeds, expected in cases:
        compiled = aircc.compile(model, input_shapes={k: list(v.shape) for k, v in feeds.items()},
                                 mode="static")
        assert compiled.report.mode == "static"
        loaded = aircc.load(compiled, device=device)
        try:
            _assert_matches(loaded.run(feeds), expected)
        finally:
            loaded.close()


def test_dynamic_across_shapes(exported, device):
    family, model, cases = exported
    compiled = aircc.compile(model, mode="dynamic")
    loaded = aircc.load(compiled, device=device)
    try:
        for feeds, expected in cases:
            _assert_matches(loaded.run(feeds), expected)
    finally:
        loaded.close()


def test_multiply_adds_are_counted_at_each_shape(exported):
    family, model, cases = exported
    for feeds, _ in cases:
        assert work.multiply_adds(model, {k: v.shape for k, v in feeds.items()}) > 0


def test_export_is_cached_by_source_and_config(tmp_path):
    family = broader.FAMILIES["gru"]
    first = broader.export(family, "small", cache=str(tmp_path))
    (path,) = tmp_path.iterdir()
    assert path.name == f"gru-small-{broader.cache_key(family, 'small')}.onnx"
    stamp = path.stat().st_mtime_ns
    again = broader.export(family, "small", cache=str(tmp_path))
    assert path.stat().st_mtime_ns == stamp                 # loaded, not exported again
    assert again.SerializeToString() == first.SerializeToString()
    assert broader.cache_key(family, "small") != broader.cache_key(family, "full")
    with pytest.raises(ValueError, match="size must be one of full, small, got 'huge'"):
        broader.export(family, "huge")

"""Compile options are one type: every field of ``CompileOptions`` keys the session's
compile cache, so no option can serve an .om built under another setting."""
from __future__ import annotations

import dataclasses

from onnx import TensorProto, helper

from aircc.compiler.driver import CompileOptions
from aircc.session.compile_cache import cache_key

#: A value other than the default for every option.
CHANGED = {"streams": 1, "input_shapes": {"x": [2]}, "mode": "static", "min_branch_bytes": 0,
           "split_matrix_branches": True, "dynamic_batch": [1, 2], "passes": ["infer-shapes"],
           "target": "cpu-avx2", "channels_last": True, "stream_priorities": {0: 1},
           "winograd": "off", "precision_mode": "force_fp32",
           "modify_mixlist": {"black-list": {"to-add": ["Conv"]}}}


def test_every_compile_option_changes_the_compile_cache_key():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])],
                                                "g", [x], [y]))
    data = model.SerializeToString()
    assert set(CHANGED) == {f.name for f in dataclasses.fields(CompileOptions)}
    base = CompileOptions(target="native", winograd="auto")
    key = cache_key(data, model, "", base)
    for name, value in CHANGED.items():
        assert cache_key(data, model, "", dataclasses.replace(base, **{name: value})) != key, name

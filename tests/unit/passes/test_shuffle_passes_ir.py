"""IR-text tests of fuse-channel-shuffle, and of a shuffle kept inside a channels-last
region by plan-layouts (its axis moved, no reorder around it)."""
from __future__ import annotations

import numpy as np
import pytest

from aircc.compiler.ir.printer import print_graph
from ir_cases import declared, digest, ir, run_pass, run_pass_graph, same_numbers

COVERS = ("fuse-channel-shuffle", "plan-layouts")

SHUFFLE_BEFORE = """
    graph @main(%x: float32[1,6,4,4]) -> (%y) {
      const %s1: int64[5] = dense[1,2,3,4,4]
      const %s2: int64[4] = dense[1,6,4,4]
      %r: float32[1,2,3,4,4] = Reshape(%x, %s1) {name="split", v=14}
      %t: float32[1,3,2,4,4] = Transpose(%r) {name="swap", v=13, perm=[0,2,1,3,4]}
      %y: float32[1,6,4,4] = Reshape(%t, %s2) {name="merge", v=14}
    }
"""


def test_the_exported_shuffle_becomes_one_channel_shuffle():
    after, ctx = run_pass("fuse-channel-shuffle", SHUFFLE_BEFORE)
    assert after == ir("""
        graph @main(%x: float32[1,6,4,4]) -> (%y) {
          const %s1: int64[5] = dense[1,2,3,4,4]
          const %s2: int64[4] = dense[1,6,4,4]
          %y: float32[1,6,4,4] = ChannelShuffle(%x) {name="swap/shuffle", domain="aircc", v=1, axis=1, groups=2}
        }
    """)
    assert declared(ctx, "fuse-channel-shuffle") == {"fused_channel_shuffles": 1}
    same_numbers(SHUFFLE_BEFORE, after)


@pytest.mark.parametrize("change", ["perm=[0,2,1,3,4]|perm=[0,1,2,4,3]",     # not the split axis
                                    "-> (%y)|-> (%y, %t)",                    # a value read outside
                                    "dense[1,6,4,4]|dense[1,6,16]"])          # not back to x's shape
def test_what_is_not_a_channel_shuffle_is_left_alone(change):
    old, new = change.split("|")
    before = SHUFFLE_BEFORE.replace(old, new)
    if "16]" in new:
        before = before.replace("%y: float32[1,6,4,4] = Reshape", "%y: float32[1,6,16] = Reshape") \
            .replace("-> (%y)", "-> (%y)").replace("const %s2: int64[4]", "const %s2: int64[3]")
    if "4,3]" in new:
        before = before.replace("%t: float32[1,3,2,4,4]", "%t: float32[1,2,3,4,4]")
    after, ctx = run_pass("fuse-channel-shuffle", before)
    assert after == ir(before) and ctx.stats.get("fused_channel_shuffles", 0) == 0


_rng = np.random.default_rng(0)
RESOURCES = {"w1": _rng.standard_normal((6, 3, 1, 1)).astype(np.float32),
             "w2": _rng.standard_normal((6, 1, 3, 3)).astype(np.float32)}

REGION = f"""
    graph @main(%x: float32[1,3,8,8]) -> (%y) {{
      const %w1: float32[6,3,1,1] = {digest(RESOURCES["w1"])}
      const %w2: float32[6,1,3,3] = {digest(RESOURCES["w2"])}
      %c: float32[1,6,8,8] = Conv(%x, %w1) {{name="pointwise", v=11}}
      %s: float32[1,6,8,8] = ChannelShuffle(%c) {{name="shuffle", domain="aircc", v=1, axis=1, groups=3}}
      %y: float32[1,6,8,8] = Conv(%s, %w2) {{name="depthwise", v=11, group=6, pads=[1,1,1,1]}}
    }}
"""


def test_a_shuffle_between_convolutions_stays_channels_last_with_its_axis_moved():
    after, ctx = run_pass_graph("plan-layouts", REGION, RESOURCES, channels_last=True)
    text = print_graph(after)
    assert 'ChannelShuffle(%c) {name="shuffle", domain="aircc", v=1, axis=3, groups=3}' in text
    assert "%s: float32[1,8,8,6]" in text
    assert ctx.stats == {"channels_last_nodes": 2, "layout_reorders": 2}   # the model's edges only
    same_numbers(REGION, after, RESOURCES)

"""IR-text test of the layout pass: a convolution region planned channels-last, with one
reorder in, one view and one reorder out."""
from __future__ import annotations

import numpy as np

from aircc.compiler.ir.printer import print_graph
from ir_cases import declared, digest, ir, run_pass, run_pass_graph, same_numbers

COVERS = ("plan-layouts",)

_rng = np.random.default_rng(0)
RESOURCES = {"w": _rng.standard_normal((4, 3, 3, 3)).astype(np.float32)}

BEFORE = f"""
    graph @main(%x: float32[1,3,8,8]) -> (%r, %f) {{
      const %w: float32[4,3,3,3] = {digest(RESOURCES["w"])}
      const %b: float32[4] = dense[0.5,1.0,-1.0,2.0]
      const %s: float32[4,1,1] = dense[1.0,2.0,3.0,4.0]
      %c: float32[1,4,8,8] = Conv(%x, %w, %b) {{name="conv", v=11, pads=[1,1,1,1]}}
      %r: float32[1,4,8,8] = Relu(%c) {{name="relu", v=14}}
      %m: float32[1,4,8,8] = Mul(%r, %s) {{name="scale", v=14}}
      %p: float32[1,4,4,4] = MaxPool(%m) {{name="pool", v=12, kernel_shape=[2,2], strides=[2,2]}}
      %g: float32[1,4,1,1] = GlobalAveragePool(%p) {{name="gap", v=1}}
      %f: float32[1,4] = Flatten(%g) {{name="flat", v=13}}
    }}
"""


def test_plan_layouts_runs_the_region_channels_last_with_reorders_at_its_edges():
    """The Conv, the Relu, the scale and the pools stay NHWC: the input is reordered once
    on the way in; the Relu's value, an output of the model, once on the way out under its
    own name; the pooled (1, 1, 1, 4) leaves as a Reshape (no byte moves); the per-channel
    constant is permuted at compile time.  The numbers do not change."""
    expected = ir("""
        graph @main(%x: float32[1,3,8,8]) -> (%r, %f) {
          const %w: float32[4,3,3,3] = dense<sha1:6a10394fceb1>
          const %b: float32[4] = dense[0.5,1.0,-1.0,2.0]
          const %s: float32[4,1,1] = dense[1.0,2.0,3.0,4.0]
          const %s.nhwc: float32[1,1,1,4] = dense[1.0,2.0,3.0,4.0]
          const %g.shape: int64[4] = dense[1,4,1,1]
          %x.nhwc: float32[1,8,8,3] = Transpose(%x) {name="x.nhwc/layout", v=13, perm=[0,2,3,1]}
          %c: float32[1,8,8,4] = Conv(%x.nhwc, %w, %b) {name="conv", v=11, channels_last=1, pads=[1,1,1,1]}
          %r.nhwc: float32[1,8,8,4] = Relu(%c) {name="relu", v=14}
          %r: float32[1,4,8,8] = Transpose(%r.nhwc) {name="r/layout", v=13, perm=[0,3,1,2]}
          %m: float32[1,8,8,4] = Mul(%r.nhwc, %s.nhwc) {name="scale", v=14}
          %p: float32[1,4,4,4] = MaxPool(%m) {name="pool", v=12, channels_last=1, kernel_shape=[2,2], strides=[2,2]}
          %g.nhwc: float32[1,1,1,4] = GlobalAveragePool(%p) {name="gap", v=1, channels_last=1}
          %g: float32[1,4,1,1] = Reshape(%g.nhwc, %g.shape) {name="g/layout", v=14}
          %f: float32[1,4] = Flatten(%g) {name="flat", v=13}
        }
    """).replace("dense<sha1:6a10394fceb1>", digest(RESOURCES["w"]))
    after, ctx = run_pass_graph("plan-layouts", BEFORE, RESOURCES, channels_last=True)
    assert print_graph(after) == expected
    assert declared(ctx, "plan-layouts") == {"channels_last_nodes": 3, "layout_reorders": 2,
                                              "layout_views": 1}
    same_numbers(BEFORE, after, RESOURCES)


def test_plan_layouts_does_nothing_for_a_backend_that_runs_channels_first():
    """The numpy backend wants no op channels-last: the graph is left as it is (and with
    ``channels_last=False`` for every backend)."""
    for options in ({}, {"channels_last": False}):
        after, ctx = run_pass("plan-layouts", BEFORE, RESOURCES, target="cpu-avx2", **options)
        assert after == ir(BEFORE) and "layout_reorders" not in ctx.stats

"""The passes that rewrite weights or move ops, as IR text before and after, each checked
against the numbers of the graph it rewrote: BatchNormalization folding, a BN's scale
pushed into the Conv after it, AveragePool / 1x1 Conv reordering, a MatMul's scale pushed
into Q's weights, Expand sinking, and Conv weight packing."""
from __future__ import annotations

import numpy as np

from testdata import numpy_target
from ir_cases import declared, digest, ir, run_pass, same_numbers

COVERS = ("fold-batchnorm", "push-bn-scale", "reorder-pool-conv", "push-matmul-scale",
          "sink-expand", "pack-weights")


# ----------------------------------------------------------------------- fold-batchnorm
# s = gamma / sqrt(var) = [1, 3]; W * s = [1, 6]; (B - mean) * s + beta = [-0.5, -2]
BN_BEFORE = """
    graph @main(%x: float32[1,1,2,2]) -> (%y) {
      const %w: float32[2,1,1,1] = dense[1.0,2.0]
      const %b: float32[2] = dense[0.5,1.0]
      const %gamma: float32[2] = dense[2.0,3.0]
      const %beta: float32[2] = dense[0.0,1.0]
      const %mean: float32[2] = dense[1.0,2.0]
      const %var: float32[2] = dense[4.0,1.0]
      %c: float32[1,2,2,2] = Conv(%x, %w, %b) {name="conv", v=11}
      %y: float32[1,2,2,2] = BatchNormalization(%c, %gamma, %beta, %mean, %var) {name="bn", v=15, epsilon=0.0}
    }
"""

BN_AFTER = ir("""
    graph @main(%x: float32[1,1,2,2]) -> (%y) {
      const %w: float32[2,1,1,1] = dense[1.0,2.0]
      const %b: float32[2] = dense[0.5,1.0]
      const %gamma: float32[2] = dense[2.0,3.0]
      const %beta: float32[2] = dense[0.0,1.0]
      const %mean: float32[2] = dense[1.0,2.0]
      const %var: float32[2] = dense[4.0,1.0]
      const %w.bn: float32[2,1,1,1] = dense[1.0,6.0]
      const %conv.bn_bias: float32[2] = dense[-0.5,-2.0]
      %y: float32[1,2,2,2] = Conv(%x, %w.bn, %conv.bn_bias) {name="conv", v=11}
    }
""")


def test_fold_batchnorm_folds_a_bn_into_the_conv_before_it():
    after, ctx = run_pass("fold-batchnorm", BN_BEFORE)
    assert after == BN_AFTER
    assert ctx.stats == {"fused_conv_batchnorm": 1, "folded_channel_affine": 0}
    same_numbers(BN_BEFORE, BN_AFTER)


# Conv: Mul by [2, 0.5] gives W [2, 1], B [1, 0.5]; Add 1 gives B [2, 1.5] (W copied).
# BN: Mul by [2, 0.5] gives scale [2, 1], B [0, 0.5].
AFFINE_BEFORE = """
    graph @main(%x: float32[1,1,2,2], %z: float32[1,2,1,1]) -> (%y, %yz) {
      const %w: float32[2,1,1,1] = dense[1.0,2.0]
      const %b: float32[2] = dense[0.5,1.0]
      const %k: float32[2,1,1] = dense[2.0,0.5]
      const %one: float32[] = dense[1.0]
      const %gamma: float32[2] = dense[1.0,2.0]
      const %beta: float32[2] = dense[0.0,1.0]
      const %mean: float32[2] = dense[0.5,0.0]
      const %var: float32[2] = dense[1.0,1.0]
      %c: float32[1,2,2,2] = Conv(%x, %w, %b) {name="conv", v=11}
      %m: float32[1,2,2,2] = Mul(%c, %k) {name="mul", v=14}
      %y: float32[1,2,2,2] = Add(%one, %m) {name="add", v=14}
      %n: float32[1,2,1,1] = BatchNormalization(%z, %gamma, %beta, %mean, %var) {name="bn", v=15}
      %yz: float32[1,2,1,1] = Mul(%n, %k) {name="mul_bn", v=14}
    }
"""

AFFINE_AFTER = ir("""
    graph @main(%x: float32[1,1,2,2], %z: float32[1,2,1,1]) -> (%y, %yz) {
      const %w: float32[2,1,1,1] = dense[1.0,2.0]
      const %b: float32[2] = dense[0.5,1.0]
      const %k: float32[2,1,1] = dense[2.0,0.5]
      const %one: float32[] = dense[1.0]
      const %gamma: float32[2] = dense[1.0,2.0]
      const %beta: float32[2] = dense[0.0,1.0]
      const %mean: float32[2] = dense[0.5,0.0]
      const %var: float32[2] = dense[1.0,1.0]
      const %w.f: float32[2,1,1,1] = dense[2.0,1.0]
      const %conv.bias: float32[2] = dense[1.0,0.5]
      const %w.f.f: float32[2,1,1,1] = dense[2.0,1.0]
      const %conv.bias_1: float32[2] = dense[2.0,1.5]
      const %bn.scale: float32[2] = dense[2.0,1.0]
      const %bn.B: float32[2] = dense[0.0,0.5]
      %y: float32[1,2,2,2] = Conv(%x, %w.f.f, %conv.bias_1) {name="conv", v=11}
      %yz: float32[1,2,1,1] = BatchNormalization(%z, %bn.scale, %bn.B, %mean, %var) {name="bn", v=15}
    }
""")


def test_fold_batchnorm_folds_per_channel_mul_and_add_into_conv_and_bn():
    """A per-channel Mul and a scalar Add (constant first) fold into the Conv, one after
    the other; a per-channel Mul folds into a BatchNormalization's scale and bias."""
    after, ctx = run_pass("fold-batchnorm", AFFINE_BEFORE)
    assert after == AFFINE_AFTER
    assert ctx.stats == {"fused_conv_batchnorm": 0, "folded_channel_affine": 3}
    same_numbers(AFFINE_BEFORE, AFFINE_AFTER)


# ----------------------------------------------------------------------- push-bn-scale
# s = gamma / sqrt(var) = [1, 2], shift = beta - mean * s = [1, -4], shift / s = [1, -2]
BN_PARAMS = """
      const %gamma: float32[2] = dense[1.0,4.0]
      const %beta: float32[2] = dense[1.0,-2.0]
      const %mean: float32[2] = dense[0.0,1.0]
      const %var: float32[2] = dense[1.0,4.0]"""

PUSH_BN_BEFORE = f"""
    graph @main(%x: float32[1,2,3,3]) -> (%y) {{{BN_PARAMS}
      const %w: float32[1,2,2,1] = dense[1.0,2.0,3.0,4.0]
      %r: float32[1,2,3,3] = BatchNormalization(%x, %gamma, %beta, %mean, %var) {{name="bn", v=15, epsilon=0.0, fused_relu=1}}
      %y: float32[1,1,2,3] = Conv(%r, %w) {{name="conv", v=11}}
    }}
"""

PUSH_BN_AFTER = ir(f"""
    graph @main(%x: float32[1,2,3,3]) -> (%y) {{{BN_PARAMS}
      const %w: float32[1,2,2,1] = dense[1.0,2.0,3.0,4.0]
      const %w.bn_scale: float32[1,2,2,1] = dense[1.0,2.0,6.0,8.0]
      const %bn.shift: float32[2,1,1] = dense[1.0,-2.0]
      %r.shifted: float32[1,2,3,3] = Add(%x, %bn.shift) {{name="bn/shift", v=15}}
      %r: float32[1,2,3,3] = Relu(%r.shifted) {{name="bn/relu", v=15}}
      %y: float32[1,1,2,3] = Conv(%r, %w.bn_scale) {{name="conv", v=11}}
    }}
""")


def test_push_bn_scale_moves_the_scale_into_the_conv_weights():
    """Conv(W, relu(s x + t)) = Conv(W s, relu(x + t / s)): the scale goes into W's input
    channels, the BN becomes an Add and a Relu."""
    after, ctx = run_pass("push-bn-scale", PUSH_BN_BEFORE)
    assert after == PUSH_BN_AFTER
    assert ctx.stats == {"pushed_bn_scales": 1}
    same_numbers(PUSH_BN_BEFORE, PUSH_BN_AFTER)


# W s = [[1, 4], [3, 8]]; W s @ c = [1 - 8, 3 - 16]; the Max clips at -c = [-1, 2]
PUSH_BN_1X1_BEFORE = f"""
    graph @main(%x: float32[1,2,3,3]) -> (%y) {{{BN_PARAMS}
      const %w: float32[2,2,1,1] = dense[1.0,2.0,3.0,4.0]
      %r: float32[1,2,3,3] = BatchNormalization(%x, %gamma, %beta, %mean, %var) {{name="bn", v=15, epsilon=0.0, fused_relu=1}}
      %y: float32[1,2,3,3] = Conv(%r, %w) {{name="conv", v=11}}
    }}
"""

PUSH_BN_1X1_AFTER = ir(f"""
    graph @main(%x: float32[1,2,3,3]) -> (%y) {{{BN_PARAMS}
      const %w: float32[2,2,1,1] = dense[1.0,2.0,3.0,4.0]
      const %w.bn_scale: float32[2,2,1,1] = dense[1.0,4.0,3.0,8.0]
      const %bn.shift: float32[2,1,1] = dense[-1.0,2.0]
      const %conv.bn_shift_bias: float32[2] = dense[-7.0,-13.0]
      %r: float32[1,2,3,3] = Max(%x, %bn.shift) {{name="bn/max", v=15}}
      %y: float32[1,2,3,3] = Conv(%r, %w.bn_scale, %conv.bn_shift_bias) {{name="conv", v=11}}
    }}
""")


def test_push_bn_scale_into_a_1x1_conv_moves_the_shift_into_its_bias():
    """relu(x + c) = max(x, -c) + c, and a 1x1 Conv turns the + c into W @ c on its bias."""
    after, ctx = run_pass("push-bn-scale", PUSH_BN_1X1_BEFORE)
    assert after == PUSH_BN_1X1_AFTER
    assert ctx.stats == {"pushed_bn_scales": 1}
    same_numbers(PUSH_BN_1X1_BEFORE, PUSH_BN_1X1_AFTER)


# ----------------------------------------------------------------------- reorder-pool-conv
POOL_ATTRS = 'count_include_pad=0, kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]'

POOL_CONV_BEFORE = f"""
    graph @main(%x: float32[1,4,3,3]) -> (%y) {{
      const %w: float32[1,4,1,1] = dense[1.0,-1.0,0.5,2.0]
      const %b: float32[1] = dense[0.25]
      %p: float32[1,4,3,3] = AveragePool(%x) {{name="pool", v=11, {POOL_ATTRS}}}
      %y: float32[1,1,3,3] = Conv(%p, %w, %b) {{name="conv", v=11, fused_relu=1}}
    }}
"""

POOL_CONV_AFTER = ir(f"""
    graph @main(%x: float32[1,4,3,3]) -> (%y) {{
      const %w: float32[1,4,1,1] = dense[1.0,-1.0,0.5,2.0]
      const %b: float32[1] = dense[0.25]
      const %b.per_channel: float32[1,1,1,1] = dense[0.25]
      %y.unpooled: float32[1,1,3,3] = Conv(%x, %w) {{name="conv", v=11}}
      %y.pooled: float32[1,1,3,3] = AveragePool(%y.unpooled) {{name="pool", v=11, {POOL_ATTRS}}}
      %y.biased: float32[1,1,3,3] = Add(%y.pooled, %b.per_channel) {{name="conv/bias", v=11}}
      %y: float32[1,1,3,3] = Relu(%y.biased) {{name="conv/relu", v=11}}
    }}
""")


def test_reorder_pool_conv_convolves_first_when_that_pools_fewer_channels():
    """4 -> 1 channels: pooling the Conv's one channel is cheaper than pooling four; the
    bias and the fused Relu move after the pool."""
    after, ctx = run_pass("reorder-pool-conv", POOL_CONV_BEFORE)
    assert after == POOL_CONV_AFTER
    assert ctx.stats == {"reordered_pool_convs": 1}
    same_numbers(POOL_CONV_BEFORE, POOL_CONV_AFTER)


_rng = np.random.default_rng(3)
WIDE = {"w": _rng.standard_normal((128, 1, 1, 1)).astype(np.float32),
        "b": _rng.standard_normal(128).astype(np.float32)}

CONV_POOL_BEFORE = f"""
    graph @main(%x: float32[1,1,4,4]) -> (%y) {{
      const %w: float32[128,1,1,1] = {digest(WIDE["w"])}
      const %b: float32[128] = {digest(WIDE["b"])}
      %c: float32[1,128,4,4] = Conv(%x, %w, %b) {{name="conv", v=11}}
      %y: float32[1,128,2,2] = AveragePool(%c) {{name="pool", v=11, kernel_shape=[2,2], strides=[2,2]}}
    }}
"""

CONV_POOL_AFTER = ir(f"""
    graph @main(%x: float32[1,1,4,4]) -> (%y) {{
      const %w: float32[128,1,1,1] = {digest(WIDE["w"])}
      const %b: float32[128] = {digest(WIDE["b"])}
      %x.pooled: float32[1,1,2,2] = AveragePool(%x) {{name="pool", v=11, kernel_shape=[2,2], strides=[2,2]}}
      %y: float32[1,128,2,2] = Conv(%x.pooled, %w, %b) {{name="conv", v=11}}
    }}
""")


def test_reorder_pool_conv_pools_first_when_that_pools_fewer_channels():
    """1 -> 128 channels: pooling the one input channel first beats pooling 128; the
    bias stays in the Conv (the pool counts no padding)."""
    after, ctx = run_pass("reorder-pool-conv", CONV_POOL_BEFORE, WIDE)
    assert after == CONV_POOL_AFTER
    assert ctx.stats == {"reordered_pool_convs": 1}
    same_numbers(CONV_POOL_BEFORE, CONV_POOL_AFTER, WIDE, WIDE)


def test_reorder_pool_conv_keeps_a_bias_the_padded_average_would_change():
    """With count_include_pad=1 and padding, the average of the bias is not the bias at
    the borders: the Conv stays first."""
    text = ir(CONV_POOL_BEFORE.replace("kernel_shape=[2,2], strides=[2,2]",
                                       "count_include_pad=1, kernel_shape=[2,2], pads=[1,1,1,1], strides=[2,2]")
              .replace("%y: float32[1,128,2,2]", "%y: float32[1,128,3,3]"))
    after, ctx = run_pass("reorder-pool-conv", text, WIDE)
    assert after == text
    assert ctx.stats == {"reordered_pool_convs": 0}


# ----------------------------------------------------------------------- push-matmul-scale
PUSH_SCALE_BEFORE = """
    graph @main(%x: float32[2,2], %k: float32[2,2]) -> (%y, %z) {
      const %wq: float32[2,2] = dense[1.0,2.0,3.0,4.0]
      const %bq: float32[2] = dense[2.0,4.0]
      %q: float32[2,2] = MatMul(%x, %wq, %bq) {name="q", v=13, fused_add=1}
      %qt: float32[2,2] = Transpose(%q) {name="qt", v=13, perm=[1,0]}
      %y: float32[2,2] = MatMul(%qt, %k) {name="scores", v=13, fused_scale=0.5}
      %z: float32[2,2] = MatMul(%x, %wq) {name="other", v=13}
    }
"""

PUSH_SCALE_AFTER = ir("""
    graph @main(%x: float32[2,2], %k: float32[2,2]) -> (%y, %z) {
      const %wq: float32[2,2] = dense[1.0,2.0,3.0,4.0]
      const %bq: float32[2] = dense[1.0,2.0]
      const %wq.scaled: float32[2,2] = dense[0.5,1.0,1.5,2.0]
      %q: float32[2,2] = MatMul(%x, %wq.scaled, %bq) {name="q", v=13, fused_add=1}
      %qt: float32[2,2] = Transpose(%q) {name="qt", v=13, perm=[1,0]}
      %y: float32[2,2] = MatMul(%qt, %k) {name="scores", v=13}
      %z: float32[2,2] = MatMul(%x, %wq) {name="other", v=13}
    }
""")


def test_push_matmul_scale_scales_q_weights_through_a_transpose():
    """The bias only Q reads is scaled in place; the weights another MatMul reads too are
    copied."""
    after, ctx = run_pass("push-matmul-scale", PUSH_SCALE_BEFORE)
    assert after == PUSH_SCALE_AFTER
    assert ctx.stats == {"pushed_matmul_scales": 1}
    same_numbers(PUSH_SCALE_BEFORE, PUSH_SCALE_AFTER)


# ----------------------------------------------------------------------- sink-expand
SINK_BEFORE = """
    graph @main(%m: float32[1,1,4], %z: float32[2,3,4]) -> (%y) {
      const %c: float32[] = dense[2.0]
      const %shape: int64[3] = dense[2,3,4]
      %e: float32[2,3,4] = Expand(%m, %shape) {name="expand", v=13}
      %s: float32[2,3,4] = Mul(%e, %c) {name="mul", v=14}
      %y: float32[2,3,4] = Add(%s, %z) {name="add", v=14}
    }
"""

SINK_AFTER = ir("""
    graph @main(%m: float32[1,1,4], %z: float32[2,3,4]) -> (%y) {
      const %c: float32[] = dense[2.0]
      %"s/unexpanded": float32[1,1,4] = Mul(%m, %c) {name="mul", v=14}
      %y: float32[2,3,4] = Add(%"s/unexpanded", %z) {name="add", v=14}
    }
""")


def test_sink_expand_moves_an_expand_down_and_drops_it_where_the_reader_broadcasts():
    """The Mul runs on the [1, 1, 4] row; the Add broadcasts it against z itself."""
    after, ctx = run_pass("sink-expand", SINK_BEFORE)
    assert after == SINK_AFTER
    assert declared(ctx, "sink-expand") == {"sunk_expands": 1, "dropped_expands": 1}
    same_numbers(SINK_BEFORE, SINK_AFTER)


SPLAT_BEFORE = """
    graph @main(%x: float32[2,3]) -> (%y) {
      const %shape: int64[2] = dense[2,3]
      %f: float32[2,3] = ConstantOfShape(%shape) {name="fill", v=9, value=tensor<float32[1] dense[-1.0]>}
      %y: float32[2,3] = Mul(%f, %x) {name="mul", v=14}
    }
"""

SPLAT_AFTER = ir("""
    graph @main(%x: float32[2,3]) -> (%y) {
      const %"fill/value": float32[] = dense[-1.0]
      %y: float32[2,3] = Mul(%"fill/value", %x) {name="mul", v=14}
    }
""")


def test_sink_expand_drops_a_constant_of_shape_for_its_one_value():
    after, ctx = run_pass("sink-expand", SPLAT_BEFORE)
    assert after == SPLAT_AFTER
    assert declared(ctx, "sink-expand") == {"sunk_expands": 0, "dropped_expands": 1}
    same_numbers(SPLAT_BEFORE, SPLAT_AFTER)


# ----------------------------------------------------------------------- pack-weights
PACK = {"w": _rng.standard_normal((1, 64, 3, 3)).astype(np.float32),
        "w1": _rng.standard_normal((1, 64, 1, 1)).astype(np.float32)}

PACK_BEFORE = f"""
    graph @main(%x: float32[?N,64,4,4]) -> (%y, %z) {{
      const %w: float32[1,64,3,3] = {digest(PACK["w"])}
      const %w1: float32[1,64,1,1] = {digest(PACK["w1"])}
      %y: float32[?N,1,4,4] = Conv(%x, %w) {{name="conv3x3", v=11, pads=[1,1,1,1]}}
      %z: float32[?N,1,4,4] = Conv(%x, %w1) {{name="conv1x1", v=11}}
    }}
"""


def test_pack_weights_stores_a_3x3_conv_per_tap_and_leaves_a_1x1_conv():
    """The 3x3 conv's (M, C, kH, kW) weights become (kH, kW, M, C) under the same name
    (the Conv alone reads them), with ``kernel_shape`` and ``weight_layout`` to say so;
    a 1x1 conv has one tap, and keeps ONNX's layout."""
    packed = np.ascontiguousarray(PACK["w"].transpose(2, 3, 0, 1))
    expected = ir(f"""
        graph @main(%x: float32[?N,64,4,4]) -> (%y, %z) {{
          const %w: float32[3,3,1,64] = {digest(packed)}
          const %w1: float32[1,64,1,1] = {digest(PACK["w1"])}
          %y: float32[?N,1,4,4] = Conv(%x, %w) {{name="conv3x3", v=11, kernel_shape=[3,3], pads=[1,1,1,1], weight_layout="HWOI"}}
          %z: float32[?N,1,4,4] = Conv(%x, %w1) {{name="conv1x1", v=11}}
        }}
    """)
    after, ctx = run_pass("pack-weights", PACK_BEFORE, PACK, target=numpy_target())
    assert after == expected
    assert ctx.stats == {"packed_conv_weights": 1}
    same_numbers(PACK_BEFORE, expected, PACK, {"w": packed, "w1": PACK["w1"]}, dims={"N": 2},
                 rtol=1e-4, atol=1e-4)

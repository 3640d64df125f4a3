"""The ``lower-contrib`` pass as IR text before and after: onnxruntime's contrib ops become
the default domain's ops (and aircc's Attention), each rewrite checked against the numbers
of the node it replaced (``run_ir``: the contrib op's own numpy kernel)."""
from __future__ import annotations

import numpy as np

from aircc.compiler.ir.printer import print_graph
from ir_cases import declared, digest, ir, run_pass, run_pass_graph, same_numbers

COVERS = ("lower-contrib",)

DENSE_BEFORE = """
    graph @main(%x: float32[?B,?S,4], %skip: float32[?B,?S,2]) -> (%y, %sum) {
      const %w: float32[2,4] = dense[0.5,-1.0,0.25,1.0,1.0,0.5,-0.75,0.25]
      const %b: float32[2] = dense[0.125,-0.25]
      const %g: float32[2] = dense[1.0,0.5]
      const %beta: float32[2] = dense[0.0,0.5]
      %m: float32[?B,?S,2] = FusedMatMul(%x, %w) {name="fmm", domain="com.microsoft", v=1, alpha=0.5, transB=1}
      %a: float32[?B,?S,2] = FastGelu(%m, %b) {name="gelu", domain="com.microsoft", v=1}
      %y: float32[?B,?S,2], %none, %none, %sum: float32[?B,?S,2] = SkipLayerNormalization(%a, %skip, %g, %beta, %b) {name="sln", domain="com.microsoft", v=1, epsilon=1e-05}
    }
"""

DENSE_AFTER = ir("""
    graph @main(%x: float32[?B,?S,4], %skip: float32[?B,?S,2]) -> (%y, %sum) {
      const %w: float32[2,4] = dense[0.5,-1.0,0.25,1.0,1.0,0.5,-0.75,0.25]
      const %b: float32[2] = dense[0.125,-0.25]
      const %g: float32[2] = dense[1.0,0.5]
      const %beta: float32[2] = dense[0.0,0.5]
      const %"fmm/alpha": float32[] = dense[0.5]
      %"fmm/transpose": float32[4,2] = Transpose(%w) {name="fmm/Transpose", v=17, perm=[1,0]}
      %"fmm/matmul": float32[?B,?S,2] = MatMul(%x, %"fmm/transpose") {name="fmm/MatMul", v=17}
      %m: float32[?B,?S,2] = Mul(%"fmm/matmul", %"fmm/alpha") {name="fmm/Mul", v=17}
      %"gelu/add": float32[?B,?S,2] = Add(%m, %b) {name="gelu/Add", v=17}
      %a: float32[?B,?S,2] = Gelu(%"gelu/add") {name="gelu/Gelu", v=20, approximate="tanh"}
      %"sln/add": float32[?B,?S,2] = Add(%a, %b) {name="sln/Add", v=17}
      %sum: float32[?B,?S,2] = Add(%"sln/add", %skip) {name="sln/Add_1", v=17}
      %y: float32[?B,?S,2] = LayerNormalization(%sum, %g, %beta) {name="sln/LayerNormalization", v=17, axis=-1, epsilon=1e-05}
    }
""")


def test_lower_contrib_takes_a_dense_block_apart():
    """FusedMatMul: B read transposed, alpha after; FastGelu: its bias added, tanh GELU;
    SkipLayerNormalization: the bias, then the skip (its sum an output here), then opset
    17's LayerNormalization."""
    after, ctx = run_pass("lower-contrib", DENSE_BEFORE)
    assert after == DENSE_AFTER
    assert declared(ctx, "lower-contrib") == {"lowered_contrib_ops": 3}
    same_numbers(DENSE_BEFORE, DENSE_AFTER, dims={"B": 2, "S": 3})


R = np.random.default_rng(0)
W = (R.standard_normal((4, 12)) * 0.5).astype(np.float32)
BIAS = R.standard_normal(12).astype(np.float32)

ATTENTION_BEFORE = f"""
    graph @main(%x: float32[?B,?S,4], %mask: int32[?B,?S]) -> (%y) {{
      const %w: float32[4,12] = {digest(W)}
      const %b: float32[12] = {digest(BIAS)}
      %y: float32[?B,?S,4] = Attention(%x, %w, %b, %mask) {{name="attn", domain="com.microsoft", v=1, num_heads=2, unidirectional=1}}
    }}
"""


def test_lower_contrib_makes_an_attention_aircc_s_own():
    """Q's weights and bias carry the scale 1/sqrt(2) and log2 e; the mask and the causal
    order become an additive mask; the context [B, S, H, D] is reshaped to [B, S, H D]."""
    factor = np.log2(np.e) / np.sqrt(2)
    weight, bias = W.astype(np.float64), BIAS.astype(np.float64)
    weight[:, :4] *= factor
    bias[:4] *= factor
    weight, bias = weight.astype(np.float32), bias.astype(np.float32)
    expected = ir(f"""
        graph @main(%x: float32[?B,?S,4], %mask: int32[?B,?S]) -> (%y) {{
          const %w: float32[4,12] = {digest(W)}
          const %b: float32[12] = {digest(BIAS)}
          const %"attn/qkv.weight": float32[4,12] = {digest(weight)}
          const %"attn/qkv.bias": float32[12] = {digest(bias)}
          const %"attn/shape": int64[3] = dense[0,0,4]
          %"attn/attentionmask": float32[?B,1,?S,?S] = AttentionMask(%mask, %x) {{name="attn/AttentionMask", domain="aircc", v=1, unidirectional=1}}
          %"attn/attention": float32[?B,?S,2,2] = Attention(%x, %"attn/qkv.weight", %"attn/qkv.bias", %"attn/attentionmask") {{name="attn/Attention", domain="aircc", v=1, base2=1, heads=2}}
          %y: float32[?B,?S,4] = Reshape(%"attn/attention", %"attn/shape") {{name="attn/Reshape", v=17}}
        }}
    """)
    res = {"w": W, "b": BIAS}
    graph, ctx = run_pass_graph("lower-contrib", ATTENTION_BEFORE, res)
    assert print_graph(graph) == expected
    assert declared(ctx, "lower-contrib") == {"lowered_contrib_ops": 1}
    same_numbers(ATTENTION_BEFORE, graph, res, dims={"B": 2, "S": 5})


ACTIVATIONS_BEFORE = """
    graph @main(%x: float32[2,3,2], %skip: float32[2,3,2]) -> (%y, %q, %g) {
      const %b: float32[2] = dense[0.125,-0.25]
      %q: float32[2,3,2] = QuickGelu(%x) {name="quick", domain="com.microsoft", v=1, alpha=1.5}
      %g: float32[2,3,2] = Gelu(%x) {name="gelu", domain="com.microsoft", v=1}
      %bg: float32[2,3,2] = BiasGelu(%x, %b) {name="bias_gelu", domain="com.microsoft", v=1}
      %y: float32[2,3,2] = BiasAdd(%bg, %b, %skip) {name="bias_add", domain="com.microsoft", v=1}
    }
"""

ACTIVATIONS_AFTER = ir("""
    graph @main(%x: float32[2,3,2], %skip: float32[2,3,2]) -> (%y, %q, %g) {
      const %b: float32[2] = dense[0.125,-0.25]
      const %"quick/alpha": float32[] = dense[1.5]
      %"quick/mul": float32[2,3,2] = Mul(%x, %"quick/alpha") {name="quick/Mul", v=17}
      %"quick/sigmoid": float32[2,3,2] = Sigmoid(%"quick/mul") {name="quick/Sigmoid", v=17}
      %q: float32[2,3,2] = Mul(%x, %"quick/sigmoid") {name="quick/Mul_1", v=17}
      %g: float32[2,3,2] = Gelu(%x) {name="gelu/Gelu", v=20, approximate="none"}
      %"bias_gelu/add": float32[2,3,2] = Add(%x, %b) {name="bias_gelu/Add", v=17}
      %bg: float32[2,3,2] = Gelu(%"bias_gelu/add") {name="bias_gelu/Gelu", v=20, approximate="none"}
      %"bias_add/add": float32[2,3,2] = Add(%bg, %b) {name="bias_add/Add", v=17}
      %y: float32[2,3,2] = Add(%"bias_add/add", %skip) {name="bias_add/Add_1", v=17}
    }
""")


def test_lower_contrib_spells_the_activations_out():
    after, ctx = run_pass("lower-contrib", ACTIVATIONS_BEFORE)
    assert after == ACTIVATIONS_AFTER
    assert declared(ctx, "lower-contrib") == {"lowered_contrib_ops": 4}
    same_numbers(ACTIVATIONS_BEFORE, ACTIVATIONS_AFTER)


PRODUCTS_BEFORE = """
    graph @main(%x: float32[1,2,3,3], %z: float32[1,2,3,3], %xl: float32[1,3,3,2], %a: float32[3,2], %v: float32[2,3,2]) -> (%y, %yl, %h, %f) {
      const %w: float32[2,2,1,1] = dense[1.0,-0.5,0.25,2.0]
      const %wl: float32[2,1,1,2] = dense[0.5,1.0,-1.0,0.75]
      const %wg: float32[2,2] = dense[1.0,-0.5,0.25,2.0]
      const %c: float32[2] = dense[0.125,-0.25]
      %y: float32[1,2,3,3] = FusedConv(%x, %w, %none, %z) {name="conv", domain="com.microsoft", v=1, activation="LeakyRelu", activation_params=[0.125]}
      %yl: float32[1,3,3,2] = NhwcConv(%xl, %wl) {name="nhwc", domain="com.microsoft", v=1}
      %h: float32[3,2] = FusedGemm(%a, %wg, %c) {name="gemm", domain="com.microsoft", v=1, activation="HardSigmoid", activation_alpha=0.25, transB=1}
      %f: float32[2,3,2] = GemmFastGelu(%v, %wg, %c) {name="gemm_gelu", domain="com.microsoft", v=1}
    }
"""

PRODUCTS_AFTER = ir("""
    graph @main(%x: float32[1,2,3,3], %z: float32[1,2,3,3], %xl: float32[1,3,3,2], %a: float32[3,2], %v: float32[2,3,2]) -> (%y, %yl, %h, %f) {
      const %w: float32[2,2,1,1] = dense[1.0,-0.5,0.25,2.0]
      const %wl: float32[2,1,1,2] = dense[0.5,1.0,-1.0,0.75]
      const %wg: float32[2,2] = dense[1.0,-0.5,0.25,2.0]
      const %c: float32[2] = dense[0.125,-0.25]
      %"conv/conv": float32[1,2,3,3] = Conv(%x, %w) {name="conv/Conv", v=11}
      %"conv/add": float32[1,2,3,3] = Add(%"conv/conv", %z) {name="conv/Add", v=17}
      %y: float32[1,2,3,3] = LeakyRelu(%"conv/add") {name="conv/LeakyRelu", v=17, alpha=0.125}
      %"nhwc/transpose": float32[1,2,3,3] = Transpose(%xl) {name="nhwc/Transpose", v=17, perm=[0,3,1,2]}
      %"nhwc/transpose_1": float32[2,2,1,1] = Transpose(%wl) {name="nhwc/Transpose_1", v=17, perm=[0,3,1,2]}
      %"nhwc/conv": float32[1,2,3,3] = Conv(%"nhwc/transpose", %"nhwc/transpose_1") {name="nhwc/Conv", v=11}
      %yl: float32[1,3,3,2] = Transpose(%"nhwc/conv") {name="nhwc/Transpose_2", v=17, perm=[0,2,3,1]}
      %"gemm/gemm": float32[3,2] = Gemm(%a, %wg, %c) {name="gemm/Gemm", v=17, transB=1}
      %h: float32[3,2] = HardSigmoid(%"gemm/gemm") {name="gemm/HardSigmoid", v=17, alpha=0.25, beta=0.5}
      %"gemm_gelu/matmul": float32[2,3,2] = MatMul(%v, %wg) {name="gemm_gelu/MatMul", v=17}
      %"gemm_gelu/add": float32[2,3,2] = Add(%"gemm_gelu/matmul", %c) {name="gemm_gelu/Add", v=17}
      %f: float32[2,3,2] = Gelu(%"gemm_gelu/add") {name="gemm_gelu/Gelu", v=20, approximate="tanh"}
    }
""")


def test_lower_contrib_takes_the_fused_products_apart():
    """FusedConv: Conv, its Z added, the activation (what fuse-epilogues puts back into the
    Conv); NhwcConv: channels-first through Transposes (the weights' folded later);
    FusedGemm and GemmFastGelu: the product, then the activation."""
    after, ctx = run_pass("lower-contrib", PRODUCTS_BEFORE)
    assert after == PRODUCTS_AFTER
    assert declared(ctx, "lower-contrib") == {"lowered_contrib_ops": 4}
    same_numbers(PRODUCTS_BEFORE, PRODUCTS_AFTER)


NORMS_BEFORE = """
    graph @main(%x: float32[2,3,2], %skip: float32[2,3,2]) -> (%y, %r, %inv) {
      const %g: float32[2] = dense[1.0,0.5]
      const %beta: float32[2] = dense[0.0,0.5]
      %y: float32[2,3,2] = LayerNormalization(%x, %g, %beta) {name="ln", v=14, epsilon=0.001}
      %r: float32[2,3,2], %none, %inv: float32[2,3,1] = SkipSimplifiedLayerNormalization(%x, %skip, %g) {name="rms", domain="com.microsoft", v=1, epsilon=1e-06}
    }
"""

NORMS_AFTER = ir("""
    graph @main(%x: float32[2,3,2], %skip: float32[2,3,2]) -> (%y, %r, %inv) {
      const %g: float32[2] = dense[1.0,0.5]
      const %beta: float32[2] = dense[0.0,0.5]
      %y: float32[2,3,2] = LayerNormalization(%x, %g, %beta) {name="ln", v=17, epsilon=0.001}
      %"rms/add": float32[2,3,2] = Add(%x, %skip) {name="rms/Add", v=17}
      %r: float32[2,3,2], %inv: float32[2,3,1] = SimplifiedLayerNormalization(%"rms/add", %g) {name="rms/SimplifiedLayerNormalization", v=1, axis=-1, epsilon=1e-06}
    }
""")


def test_lower_contrib_normalisations():
    """onnxruntime's LayerNormalization of opset 14 is opset 17's; SkipSimplified... is the
    skip's Add and the default domain's SimplifiedLayerNormalization (its inverse RMS kept)."""
    after, ctx = run_pass("lower-contrib", NORMS_BEFORE)
    assert after == NORMS_AFTER
    assert declared(ctx, "lower-contrib") == {"lowered_contrib_ops": 2}
    same_numbers(NORMS_BEFORE, NORMS_AFTER)


W6 = np.array([[0.5, -1, 0.25, 1, 0.75, -0.5], [1, 0.5, -0.75, 0.25, -1, 0.5]], np.float32)
STAYS = f"""
    graph @main(%x: float32[2,3,2], %skip: float32[2,3,2], %past: float32[2,2,1,3,1]) -> (%y, %mean, %o, %present) {{
      const %g: float32[2] = dense[1.0,0.5]
      const %w: float32[2,6] = {digest(W6)}
      %y: float32[2,3,2], %mean: float32[2,3,1] = SkipSimplifiedLayerNormalization(%x, %skip, %g) {{name="rms", domain="com.microsoft", v=1}}
      %o: float32[2,3,2], %present: float32[2,2,1,4,1] = Attention(%x, %w, %none, %none, %past) {{name="attn", domain="com.microsoft", v=1, num_heads=1}}
    }}
"""


def test_lower_contrib_leaves_what_its_rules_do_not_make():
    """A SkipSimplified... whose mean output is read (onnxruntime writes zeros there) and
    an Attention with a past and a present stay, on their own kernels."""
    after, ctx = run_pass("lower-contrib", STAYS, {"w": W6})
    assert after == ir(STAYS)
    assert declared(ctx, "lower-contrib") == {"lowered_contrib_ops": 0}

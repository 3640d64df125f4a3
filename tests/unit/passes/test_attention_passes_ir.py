"""The passes that bring exporters' attention to the form fuse-attention fuses, and
fuse-attention on torch.nn.MultiheadAttention's form, as IR text before and after, each
checked against the numbers of the graph it rewrote: the run-time shape arithmetic
resolved from the types, scales on a MatMul's operands pulled to its result, a
masked_fill of the scores made an additive mask, a packed, sequence-first block with
PyTorch's NaN guard fused (one whose K is no heads left alone), and a mask built for the
scores' shape made to read it from the input's."""
from __future__ import annotations

import numpy as np

from aircc.compiler.ir.printer import print_graph
from ir_cases import declared, digest, ir, run_pass, run_pass_graph, same_numbers

COVERS = ("resolve-shape-values", "pull-matmul-scales", "mask-fill-to-add", "fuse-attention")


# ----------------------------------------------------------------------- resolve-shape-values
RESOLVE_BEFORE = """
    graph @main(%x: float32[?B,?S,8]) -> (%y, %z) {
      const %i0: int64[1] = dense[0]
      const %i1: int64[1] = dense[1]
      const %i2: int64[1] = dense[2]
      const %heads: int64[1] = dense[2]
      const %last: int64[1] = dense[-1]
      const %end: int64[1] = dense[9223372036854775807]
      %shp: int64[3] = Shape(%x) {name="shape", v=15}
      %nb: int64[1] = Gather(%shp, %i0) {name="batch", v=13, axis=0}
      %ns: int64[1] = Gather(%shp, %i1) {name="seq", v=13, axis=0}
      %ne: int64[1] = Gather(%shp, %i2) {name="features", v=13, axis=0}
      %hd: int64[1] = Div(%ne, %heads) {name="head_size", v=14}
      %target: int64[4] = Concat(%nb, %ns, %heads, %hd) {name="target", v=13, axis=0}
      %r: float32[?split_d0,?split_d1,?split_d2,?split_d3] = Reshape(%x, %target) {name="split", v=14}
      %t: float32[?split_d0,?split_d2,?split_d1,?split_d3] = Transpose(%r) {name="heads", v=13, perm=[0,2,1,3]}
      %ts: int64[4] = Shape(%t) {name="heads_shape", v=15}
      %d: int64[1] = Slice(%ts, %last, %end) {name="head_dim", v=13}
      %merge: int64[3] = Concat(%nb, %ns, %last) {name="merge_target", v=13, axis=0}
      %y: float32[?merge_d0,?merge_d1,?merge_d2] = Reshape(%r, %merge) {name="merge", v=14}
      %z: float32[1] = Cast(%d) {name="to_float", v=13, to=1}
    }
"""

RESOLVE_AFTER = ir("""
    graph @main(%x: float32[?B,?S,8]) -> (%y, %z) {
      const %i0: int64[1] = dense[0]
      const %i1: int64[1] = dense[1]
      const %i2: int64[1] = dense[2]
      const %heads: int64[1] = dense[2]
      const %last: int64[1] = dense[-1]
      const %end: int64[1] = dense[9223372036854775807]
      const %ne: int64[1] = dense[8]
      const %hd: int64[1] = dense[4]
      const %d: int64[1] = dense[4]
      %shp: int64[3] = Shape(%x) {name="shape", v=15}
      %nb: int64[1] = Gather(%shp, %i0) {name="batch", v=13, axis=0}
      %ns: int64[1] = Gather(%shp, %i1) {name="seq", v=13, axis=0}
      %target: int64[4] = Concat(%nb, %ns, %heads, %hd) {name="target", v=13, axis=0}
      %r: float32[?B,?S,2,4] = Reshape(%x, %target) {name="split", v=14}
      %t: float32[?B,2,?S,4] = Transpose(%r) {name="heads", v=13, perm=[0,2,1,3]}
      %ts: int64[4] = Shape(%t) {name="heads_shape", v=15}
      %merge: int64[3] = Concat(%nb, %ns, %last) {name="merge_target", v=13, axis=0}
      %y: float32[?B,?S,8] = Reshape(%r, %merge) {name="merge", v=14}
      %z: float32[1] = Cast(%d) {name="to_float", v=13, to=1}
    }
""")


def test_resolve_shape_values_makes_known_entries_constants_and_types_reshapes():
    """The feature count and the head size (known ints) become constants; the split is
    typed [B, S, 2, 4] from its target, the Transpose after it again from its rule, so
    that the head dim a scale would be computed from is known too; the merge's -1 is
    what cancelling B and S leaves."""
    after, ctx = run_pass("resolve-shape-values", RESOLVE_BEFORE)
    assert after == RESOLVE_AFTER
    assert ctx.stats == {"resolved_shape_values": 3, "resolved_reshapes": 2}
    same_numbers(RESOLVE_BEFORE, RESOLVE_AFTER, dims={"B": 2, "S": 3})


def test_resolve_shape_values_keeps_a_symbol_it_cannot_tell():
    """B * 2 is no dim: that entry keeps its symbol, the others are typed."""
    text = ir("""
        graph @main(%x: float32[?B,?S,8]) -> (%y) {
          const %i0: int64[1] = dense[0]
          const %two: int64[1] = dense[2]
          const %four: int64[1] = dense[4]
          %shp: int64[3] = Shape(%x) {name="shape", v=15}
          %nb: int64[1] = Gather(%shp, %i0) {name="batch", v=13, axis=0}
          %n2: int64[1] = Mul(%nb, %two) {name="batch_heads", v=14}
          %target: int64[3] = Concat(%four, %n2, %four) {name="target", v=13, axis=0}
          %y: float32[?r_d0,?r_d1,?r_d2] = Reshape(%x, %target) {name="r", v=14}
        }
    """)
    after, ctx = run_pass("resolve-shape-values", text)
    assert "%y: float32[4,?r_d1,4] = Reshape(%x, %target)" in after
    assert ctx.stats == {"resolved_shape_values": 0, "resolved_reshapes": 1}


# ----------------------------------------------------------------------- pull-matmul-scales
PULL_BEFORE = """
    graph @main(%q: float32[2,3,4], %k: float32[2,4,3]) -> (%s, %t) {
      const %c: float32[1] = dense[0.5]
      const %d: float32[] = dense[2.0]
      %qs: float32[2,3,4] = Mul(%q, %c) {name="q_scale", v=14}
      %ks: float32[2,4,3] = Div(%k, %d) {name="k_scale", v=14}
      %s: float32[2,3,3] = MatMul(%qs, %ks) {name="scores", v=13}
      %ks2: float32[2,4,3] = Mul(%c, %k) {name="k_scale2", v=14}
      %t: float32[2,3,3] = MatMul(%q, %ks2) {name="other", v=13}
      %u: float32[2,4,3] = Neg(%ks2) {name="neg", v=13}
    }
"""

PULL_AFTER = ir("""
    graph @main(%q: float32[2,3,4], %k: float32[2,4,3]) -> (%s, %t) {
      const %c: float32[1] = dense[0.5]
      const %d: float32[] = dense[2.0]
      const %scores.scale: float32[] = dense[0.25]
      %s.unscaled: float32[2,3,3] = MatMul(%q, %k) {name="scores", v=13}
      %s: float32[2,3,3] = Mul(%s.unscaled, %scores.scale) {name="scores/scale", v=14}
      %ks2: float32[2,4,3] = Mul(%c, %k) {name="k_scale2", v=14}
      %t: float32[2,3,3] = MatMul(%q, %ks2) {name="other", v=13}
      %u: float32[2,4,3] = Neg(%ks2) {name="neg", v=13}
    }
""")


def test_pull_matmul_scales_moves_both_operand_factors_to_one_on_the_result():
    """SDPA's Q * 0.5 and K / 2 become one factor 0.25 on the scores; a scaled operand
    another node also reads keeps its Mul."""
    after, ctx = run_pass("pull-matmul-scales", PULL_BEFORE)
    assert after == PULL_AFTER
    assert ctx.stats == {"pulled_matmul_scales": 2}
    same_numbers(PULL_BEFORE, PULL_AFTER)


# ----------------------------------------------------------------------- mask-fill-to-add
FILL_BEFORE = """
    graph @main(%s: float32[2,2,3,3], %k: float32[2,1,1,3], %t: float32[2,2,3,3]) -> (%p, %q) {
      const %zero: float32[] = dense[0.0]
      const %fill: float32[] = dense[-3.4028234663852886e+38]
      const %soft: float32[] = dense[-10000.0]
      %keep: bool[2,1,1,3] = Greater(%k, %zero) {name="keep", v=13}
      %m: float32[2,2,3,3] = Where(%keep, %s, %fill) {name="fill", v=16}
      %p: float32[2,2,3,3] = Softmax(%m) {name="softmax", v=13, axis=-1}
      %m2: float32[2,2,3,3] = Where(%keep, %t, %soft) {name="fill_soft", v=16}
      %q: float32[2,2,3,3] = Softmax(%m2) {name="softmax_soft", v=13, axis=-1}
    }
"""

FILL_AFTER = ir("""
    graph @main(%s: float32[2,2,3,3], %k: float32[2,1,1,3], %t: float32[2,2,3,3]) -> (%p, %q) {
      const %zero: float32[] = dense[0.0]
      const %fill: float32[] = dense[-3.4028234663852886e+38]
      const %soft: float32[] = dense[-10000.0]
      const %fill.zero: float32[] = dense[0.0]
      %keep: bool[2,1,1,3] = Greater(%k, %zero) {name="keep", v=13}
      %m.mask: float32[2,1,1,3] = Where(%keep, %fill.zero, %fill) {name="fill", v=16}
      %m: float32[2,2,3,3] = Add(%s, %m.mask) {name="fill/add", v=16}
      %p: float32[2,2,3,3] = Softmax(%m) {name="softmax", v=13, axis=-1}
      %m2: float32[2,2,3,3] = Where(%keep, %t, %soft) {name="fill_soft", v=16}
      %q: float32[2,2,3,3] = Softmax(%m2) {name="softmax_soft", v=13, axis=-1}
    }
""")


def test_mask_fill_to_add_makes_a_finfo_min_fill_an_additive_mask_of_the_condition_shape():
    """finfo.min added to a score rounds back to finfo.min: the same scores, with a mask
    one row per key; a fill of -1e4 would not (the score would show through), and stays."""
    after, ctx = run_pass("mask-fill-to-add", FILL_BEFORE)
    assert after == FILL_AFTER
    assert ctx.stats == {"mask_fills_to_add": 1}
    same_numbers(FILL_BEFORE, FILL_AFTER, rtol=0, atol=0)


# ----------------------------------------------------------------------- fuse-attention
RNG = np.random.default_rng(5)
W = (RNG.standard_normal((4, 12)) * 0.5).astype(np.float32)
B = (RNG.standard_normal(12) * 0.1).astype(np.float32)


def _mha(k_perm: str = "1,2,3,0") -> str:
    """torch.nn.MultiheadAttention's form, sequence-first: one packed projection split
    into Q, K, V by a Gather, the heads by Reshapes, the scores scaled, the softmax's
    NaNs zeroed; ``k_perm`` makes K^T from K's [S, B, H, D]."""
    return f"""
        graph @main(%x: float32[?S,?B,4], %m: float32[?B,1,1,?S]) -> (%y) {{
          const %w: float32[4,12] = {digest(W)}
          const %b: float32[12] = {digest(B)}
          const %parts: int64[4] = dense[0,0,3,4]
          const %heads: int64[4] = dense[0,0,2,2]
          const %i0: int64[] = dense[0]
          const %i1: int64[] = dense[1]
          const %i2: int64[] = dense[2]
          const %zero: float32[] = dense[0.0]
          %p: float32[?S,?B,12] = MatMul(%x, %w, %b) {{name="in_proj", v=13, fused_add=1}}
          %p3: float32[?S,?B,3,4] = Reshape(%p, %parts) {{name="split", v=14}}
          %q: float32[?S,?B,4] = Gather(%p3, %i0) {{name="q", v=13, axis=2}}
          %k: float32[?S,?B,4] = Gather(%p3, %i1) {{name="k", v=13, axis=2}}
          %v: float32[?S,?B,4] = Gather(%p3, %i2) {{name="v", v=13, axis=2}}
          %qh: float32[?S,?B,2,2] = Reshape(%q, %heads) {{name="q_heads", v=14}}
          %kh: float32[?S,?B,2,2] = Reshape(%k, %heads) {{name="k_heads", v=14}}
          %vh: float32[?S,?B,2,2] = Reshape(%v, %heads) {{name="v_heads", v=14}}
          %kt: float32[?B,2,2,?S] = Transpose(%kh) {{name="k_t", v=13, perm=[{k_perm}]}}
          %s: float32[?B,2,?S,?S] = MatMul(%qh, %kt) {{name="scores", v=13, fused_scale=0.5, perm_a=[1,2,0,3]}}
          %sm: float32[?B,2,?S,?S] = Softmax(%s, %m) {{name="softmax", v=13, axis=-1, fused_add=1}}
          %nan: bool[?B,2,?S,?S] = IsNaN(%sm) {{name="isnan", v=13}}
          %g: float32[?B,2,?S,?S] = Where(%nan, %zero, %sm) {{name="guard", v=16}}
          %y: float32[?S,?B,2,2] = MatMul(%g, %vh) {{name="ctx", v=13, perm_b=[1,2,0,3], perm_y=[2,0,1,3]}}
        }}
    """


def test_fuse_attention_fuses_a_packed_sequence_first_block_with_its_nan_guard():
    """Q, K and V are columns 0-4, 4-8 and 8-12 of one projection, which running the
    Reshape / Gather / Transpose ops on its element indices shows (at two sizes of S and
    B); Q's part carries the scale 0.5 and log2 e; the Attention reads x and writes the
    context sequence-first and zeroes NaN probabilities as the Where did."""
    res = {"w": W, "b": B}
    q = (W[:, :4].astype(np.float64) * (0.5 * np.log2(np.e))).astype(np.float32)
    qb = (B[:4].astype(np.float64) * (0.5 * np.log2(np.e))).astype(np.float32)
    weight, bias = np.concatenate([q, W[:, 4:]], axis=1), np.concatenate([qb, B[4:]])
    expected = ir(f"""
        graph @main(%x: float32[?S,?B,4], %m: float32[?B,1,1,?S]) -> (%y) {{
          const %"ctx/qkv.weight": float32[4,12] = {digest(weight)}
          const %"ctx/qkv.bias": float32[12] = {digest(bias)}
          %y: float32[?S,?B,2,2] = Attention(%x, %"ctx/qkv.weight", %"ctx/qkv.bias", %m) {{name="ctx/attention", domain="aircc", v=1, base2=1, heads=2, nan_guard=1, seq_first_in=1, seq_first_out=1}}
        }}
    """)
    graph, ctx = run_pass_graph("fuse-attention", _mha(), res)
    assert print_graph(graph) == expected
    assert declared(ctx, "fuse-attention") == {"fused_attention": 1}
    np.testing.assert_allclose(graph.constants["ctx/qkv.weight"], weight, rtol=1e-7)
    same_numbers(_mha(), graph, res, dims={"S": 3, "B": 2})


def test_fuse_attention_leaves_a_block_whose_keys_are_no_heads():
    """K^T read with its head and head-dim axes swapped has the shape of K's heads but
    pairs each query head with dims of every key head: not attention, left alone."""
    text = ir(_mha(k_perm="1,3,2,0"))
    after, ctx = run_pass("fuse-attention", text, {"w": W, "b": B})
    assert after == text
    assert declared(ctx, "fuse-attention") == {"fused_attention": 0}


SHAPE_READER_BEFORE = """
    graph @main(%x: float32[?B,?S,2], %m: float32[?B,1,1,?S]) -> (%y) {
      const %wq: float32[2,2] = dense[0.5,-1.0,0.25,1.0]
      const %wk: float32[2,2] = dense[1.0,0.5,-0.75,0.25]
      const %wv: float32[2,2] = dense[-0.5,1.0,0.5,-0.25]
      const %heads: int64[4] = dense[0,0,2,1]
      %q: float32[?B,?S,2] = MatMul(%x, %wq) {name="q", v=13}
      %qh: float32[?B,?S,2,1] = Reshape(%q, %heads) {name="q_heads", v=14}
      %k: float32[?B,?S,2] = MatMul(%x, %wk) {name="k", v=13}
      %kh: float32[?B,?S,2,1] = Reshape(%k, %heads) {name="k_heads", v=14}
      %kt: float32[?B,2,1,?S] = Transpose(%kh) {name="k_t", v=13, perm=[0,2,3,1]}
      %v: float32[?B,?S,2] = MatMul(%x, %wv) {name="v", v=13}
      %vh: float32[?B,?S,2,1] = Reshape(%v, %heads) {name="v_heads", v=14}
      %s: float32[?B,2,?S,?S] = MatMul(%qh, %kt) {name="scores", v=13, perm_a=[0,2,1,3]}
      %ss: int64[4] = Shape(%s) {name="scores_shape", v=15}
      %mx: float32[?B,2,?S,?S] = Expand(%m, %ss) {name="mask_as_scores", v=13}
      %y: float32[?B,?S,2,1] = SoftmaxMatMul(%s, %vh, %mx) {name="ctx", domain="aircc", v=1, perm_b=[0,2,1,3], perm_y=[0,2,1,3]}
    }
"""


def test_fuse_attention_makes_a_mask_built_for_the_scores_shape_read_it_from_the_input():
    """``expand_as(scores)``: the scores go away with the block, so their Shape reads x's
    instead and picks [B, 2, S, S] from it (B and S follow x's dims at both probe sizes;
    the 2 heads are the same at both)."""
    graph, ctx = run_pass_graph("fuse-attention", SHAPE_READER_BEFORE)
    text = print_graph(graph)
    assert declared(ctx, "fuse-attention") == {"fused_attention": 1}
    assert '%"ss/input_shape": int64[3] = Shape(%x) {name="scores_shape", v=15}' in text
    assert 'const %"ss/picks": int64[4] = dense[0,3,1,1]' in text and 'const %"ss/ints": int64[1] = dense[2]' in text
    assert "%ss: int64[4] = Gather(%\"ss/entries\", %\"ss/picks\")" in text
    same_numbers(SHAPE_READER_BEFORE, graph, dims={"B": 2, "S": 3})

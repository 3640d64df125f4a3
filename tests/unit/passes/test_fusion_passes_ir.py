"""The fusion passes as IR text before and after, each checked against the numbers of the
graph it rewrote (``run_ir`` with the real kernels)."""
from __future__ import annotations

import numpy as np

from aircc.compiler.ir.printer import print_graph
from ir_cases import declared, digest, ir, run_pass, run_pass_graph, same_numbers

COVERS = ("fuse-epilogues", "fuse-elementwise", "fuse-add-layernorm", "fuse-add-softmax",
          "fuse-gelu", "fuse-matmul-transpose", "fuse-softmax-matmul", "fuse-attention")


# ----------------------------------------------------------------------- fuse-epilogues
EPILOGUE_BEFORE = """
    graph @main(%x: float32[2,4]) -> (%y) {
      const %w: float32[4,2] = dense[1.0,-1.0,2.0,0.5,-0.5,1.0,0.25,-2.0]
      const %half: float32[] = dense[0.5]
      const %b: float32[2] = dense[0.5,-0.25]
      %mm: float32[2,2] = MatMul(%x, %w) {name="mm", v=13}
      %s: float32[2,2] = Mul(%mm, %half) {name="scale", v=14}
      %a: float32[2,2] = Add(%s, %b) {name="bias", v=14}
      %y: float32[2,2] = Relu(%a) {name="relu", v=14}
    }
"""

EPILOGUE_AFTER = ir("""
    graph @main(%x: float32[2,4]) -> (%y) {
      const %w: float32[4,2] = dense[1.0,-1.0,2.0,0.5,-0.5,1.0,0.25,-2.0]
      const %half: float32[] = dense[0.5]
      const %b: float32[2] = dense[0.5,-0.25]
      %y: float32[2,2] = MatMul(%x, %w, %b) {name="mm", v=13, fused_add=1, fused_relu=1, fused_scale=0.5}
    }
""")


def test_fuse_epilogues_takes_scale_bias_and_relu_into_the_matmul():
    after, ctx = run_pass("fuse-epilogues", EPILOGUE_BEFORE)
    assert after == EPILOGUE_AFTER
    assert ctx.stats == {"fused_epilogues": 3}
    same_numbers(EPILOGUE_BEFORE, EPILOGUE_AFTER)


RESIDUAL_BEFORE = """
    graph @main(%x: float32[1,1,2,2], %z: float32[1,2,2,2]) -> (%y) {
      const %w: float32[2,1,1,1] = dense[1.0,-2.0]
      %c: float32[1,2,2,2] = Conv(%x, %w) {name="conv", v=11}
      %r: float32[1,2,2,2] = Neg(%z) {name="neg", v=13}
      %a: float32[1,2,2,2] = Add(%c, %r) {name="residual", v=14}
      %y: float32[1,2,2,2] = Relu(%a) {name="relu", v=14}
    }
"""

RESIDUAL_AFTER = ir("""
    graph @main(%x: float32[1,1,2,2], %z: float32[1,2,2,2]) -> (%y) {
      const %w: float32[2,1,1,1] = dense[1.0,-2.0]
      %r: float32[1,2,2,2] = Neg(%z) {name="neg", v=13}
      %y: float32[1,2,2,2] = Conv(%x, %w, %none, %r) {name="conv", v=11, fused_add=1, fused_relu=1}
    }
""")


def test_fuse_epilogues_adds_a_residual_after_the_bias_slot_and_runs_where_the_add_was():
    """A Conv without bias takes the residual as input 3 (input 2 omitted), and runs in the
    Add's place, after the node that makes the residual."""
    after, ctx = run_pass("fuse-epilogues", RESIDUAL_BEFORE)
    assert after == RESIDUAL_AFTER
    assert ctx.stats == {"fused_epilogues": 2}
    same_numbers(RESIDUAL_BEFORE, RESIDUAL_AFTER)


def test_fuse_epilogues_leaves_a_result_read_elsewhere():
    text = ir("""
        graph @main(%x: float32[2,4]) -> (%mm, %y) {
          const %w: float32[4,2] = dense[1.0,-1.0,2.0,0.5,-0.5,1.0,0.25,-2.0]
          %mm: float32[2,2] = MatMul(%x, %w) {name="mm", v=13}
          %y: float32[2,2] = Relu(%mm) {name="relu", v=14}
        }
    """)
    after, ctx = run_pass("fuse-epilogues", text)
    assert after == text
    assert ctx.stats == {"fused_epilogues": 0}


# ----------------------------------------------------------------------- fuse-elementwise
CHAIN_BEFORE = """
    graph @main(%x: float32[2,3]) -> (%y) {
      const %c: float32[] = dense[2.0]
      const %k: float32[3] = dense[1.0,2.0,3.0]
      %a: float32[2,3] = Mul(%x, %c) {name="mul", v=14}
      %b: float32[2,3] = Sub(%k, %a) {name="sub", v=14}
      %d: float32[2,3] = Add(%b, %x) {name="add", v=14}
      %y: float32[2,3] = Tanh(%d) {name="tanh", v=13}
    }
"""

CHAIN_AFTER = ir("""
    graph @main(%x: float32[2,3]) -> (%y) {
      const %c: float32[] = dense[2.0]
      const %k: float32[3] = dense[1.0,2.0,3.0]
      %y: float32[2,3] = ElementwiseChain(%x, %c, %k) {name="mul/chain", domain="aircc", v=1, operands=["x","c","k"], steps=[["Mul","c",0],["Sub","k",1],["Add","x",0],["Tanh","",0]]}
    }
""")


def test_fuse_elementwise_makes_one_chain_with_constants_and_the_head_as_operands():
    """Sub(k, a) has the running value on the right (flag 1); Add(b, x) reads the chain's
    own first input, which a chain may."""
    after, ctx = run_pass("fuse-elementwise", CHAIN_BEFORE)
    assert after == CHAIN_AFTER
    assert ctx.stats == {"fused_elementwise_chains": 1}
    same_numbers(CHAIN_BEFORE, CHAIN_AFTER)


def test_fuse_elementwise_stops_at_a_value_with_two_readers():
    text = ir("""
        graph @main(%x: float32[2]) -> (%y, %z) {
          %a: float32[2] = Relu(%x) {name="relu", v=14}
          %y: float32[2] = Neg(%a) {name="neg", v=13}
          %z: float32[2] = Abs(%a) {name="abs", v=13}
        }
    """)
    after, ctx = run_pass("fuse-elementwise", text)
    assert after == text
    assert ctx.stats == {"fused_elementwise_chains": 0}


# ----------------------------------------------------------------------- fuse-add-layernorm
ADD_LN_BEFORE = """
    graph @main(%x: float32[2,4], %r: float32[4]) -> (%y) {
      const %g: float32[4] = dense[1.0,2.0,0.5,1.0]
      const %b: float32[4] = dense[0.0,1.0,0.0,-1.0]
      %s: float32[2,4] = Add(%r, %x) {name="residual", v=14}
      %y: float32[2,4] = LayerNormalization(%s, %g, %b) {name="ln", v=17, axis=-1, epsilon=1e-05}
    }
"""

ADD_LN_AFTER = ir("""
    graph @main(%x: float32[2,4], %r: float32[4]) -> (%y) {
      const %g: float32[4] = dense[1.0,2.0,0.5,1.0]
      const %b: float32[4] = dense[0.0,1.0,0.0,-1.0]
      %y: float32[2,4] = LayerNormalization(%x, %g, %b, %r) {name="ln", v=17, axis=-1, epsilon=1e-05, fused_add=1}
    }
""")


def test_fuse_add_layernorm_takes_the_full_shape_operand_as_x_and_the_other_as_input_3():
    after, ctx = run_pass("fuse-add-layernorm", ADD_LN_BEFORE)
    assert after == ADD_LN_AFTER
    assert ctx.stats == {"fused_add_layernorm": 1}
    same_numbers(ADD_LN_BEFORE, ADD_LN_AFTER)


# ----------------------------------------------------------------------- fuse-add-softmax
ADD_SOFTMAX_BEFORE = """
    graph @main(%s: float32[2,4], %m: float32[4], %t: float32[2,4]) -> (%y, %z) {
      %a: float32[2,4] = Add(%s, %m) {name="mask", v=14}
      %y: float32[2,4] = Softmax(%a) {name="softmax", v=13, axis=-1}
      %b: float32[2,4] = Add(%t, %m) {name="mask_old", v=14}
      %z: float32[2,4] = Softmax(%b) {name="softmax_old", v=11, axis=1}
    }
"""

ADD_SOFTMAX_AFTER = ir("""
    graph @main(%s: float32[2,4], %m: float32[4], %t: float32[2,4]) -> (%y, %z) {
      %y: float32[2,4] = Softmax(%s, %m) {name="softmax", v=13, axis=-1, fused_add=1}
      %b: float32[2,4] = Add(%t, %m) {name="mask_old", v=14}
      %z: float32[2,4] = Softmax(%b) {name="softmax_old", v=11, axis=1}
    }
""")


def test_fuse_add_softmax_fuses_opset_13_softmax_only():
    """Before opset 13 Softmax flattens from ``axis`` on: it keeps its Add."""
    after, ctx = run_pass("fuse-add-softmax", ADD_SOFTMAX_BEFORE)
    assert after == ADD_SOFTMAX_AFTER
    assert ctx.stats == {"fused_add_softmax": 1}
    same_numbers(ADD_SOFTMAX_BEFORE, ADD_SOFTMAX_AFTER)


BIAS_SOFTMAX_BEFORE = """
    graph @main(%x: float32[2,4], %m: float32[2]) -> (%y, %z) {
      const %w: float32[4,2] = dense[1.0,-1.0,2.0,0.5,-0.5,1.0,0.25,-2.0]
      const %b: float32[2] = dense[0.5,-0.25]
      %p: float32[2,2] = MatMul(%x, %w) {name="fc", v=13}
      %a: float32[2,2] = Add(%p, %b) {name="bias", v=14}
      %y: float32[2,2] = Softmax(%a) {name="softmax", v=13, axis=-1}
      %q: float32[2,2] = MatMul(%x, %w) {name="scores", v=13}
      %c: float32[2,2] = Add(%q, %m) {name="mask", v=14}
      %z: float32[2,2] = Softmax(%c) {name="probs", v=13, axis=-1}
    }
"""


def test_fuse_add_softmax_leaves_a_products_bias_to_its_epilogue():
    """A constant added to a MatMul's product is the product's bias (fuse-epilogues adds
    it as it writes); a runtime mask is the Softmax's."""
    after, ctx = run_pass("fuse-add-softmax", BIAS_SOFTMAX_BEFORE)
    assert 'Add(%p, %b) {name="bias"' in after and 'Add(%q, %m)' not in after
    assert ctx.stats == {"fused_add_softmax": 1}
    same_numbers(BIAS_SOFTMAX_BEFORE, after)
    epilogues, _ = run_pass("fuse-epilogues", after)
    assert 'MatMul(%x, %w, %b) {name="fc", v=13, fused_add=1}' in epilogues


# ----------------------------------------------------------------------- fuse-gelu
GELU_BEFORE = """
    graph @main(%x: float32[2,3]) -> (%y) {
      const %sqrt2: float32[] = dense[1.4142135381698608]
      const %one: float32[] = dense[1.0]
      const %half: float32[] = dense[0.5]
      %d: float32[2,3] = Div(%x, %sqrt2) {name="div", v=14}
      %e: float32[2,3] = Erf(%d) {name="erf", v=13}
      %p: float32[2,3] = Add(%e, %one) {name="add", v=14}
      %m: float32[2,3] = Mul(%x, %p) {name="mul", v=14}
      %y: float32[2,3] = Mul(%m, %half) {name="mul_half", v=14}
    }
"""

GELU_AFTER = ir("""
    graph @main(%x: float32[2,3]) -> (%y) {
      const %sqrt2: float32[] = dense[1.4142135381698608]
      const %one: float32[] = dense[1.0]
      const %half: float32[] = dense[0.5]
      %y: float32[2,3] = Gelu(%x) {name="erf/gelu", v=20}
    }
""")

GELU_HALF_FIRST_BEFORE = """
    graph @main(%x: float32[2,3]) -> (%y) {
      const %rsqrt2: float32[] = dense[0.7071067690849304]
      const %one: float32[] = dense[1.0]
      const %half: float32[] = dense[0.5]
      %h: float32[2,3] = Mul(%x, %half) {name="half", v=14}
      %d: float32[2,3] = Mul(%rsqrt2, %x) {name="scale", v=14}
      %e: float32[2,3] = Erf(%d) {name="erf", v=13}
      %p: float32[2,3] = Add(%one, %e) {name="add", v=14}
      %y: float32[2,3] = Mul(%h, %p) {name="mul", v=14}
    }
"""

GELU_HALF_FIRST_AFTER = ir("""
    graph @main(%x: float32[2,3]) -> (%y) {
      const %rsqrt2: float32[] = dense[0.7071067690849304]
      const %one: float32[] = dense[1.0]
      const %half: float32[] = dense[0.5]
      %y: float32[2,3] = Gelu(%x) {name="erf/gelu", v=20}
    }
""")


def test_fuse_gelu_replaces_the_five_exported_nodes():
    after, ctx = run_pass("fuse-gelu", GELU_BEFORE)
    assert after == GELU_AFTER
    assert ctx.stats == {"fused_gelu": 1}
    same_numbers(GELU_BEFORE, GELU_AFTER)


def test_fuse_gelu_with_the_half_taken_first_and_a_multiply_by_one_over_sqrt2():
    after, ctx = run_pass("fuse-gelu", GELU_HALF_FIRST_BEFORE)
    assert after == GELU_HALF_FIRST_AFTER
    assert ctx.stats == {"fused_gelu": 1}
    same_numbers(GELU_HALF_FIRST_BEFORE, GELU_HALF_FIRST_AFTER)


# ----------------------------------------------------------------------- fuse-matmul-transpose
TRANSPOSE_BEFORE = """
    graph @main(%a: float32[2,3,4], %b: float32[3,2,4]) -> (%y) {
      %at: float32[3,2,4] = Transpose(%a) {name="ta", v=13, perm=[1,0,2]}
      %bt: float32[3,4,2] = Transpose(%b) {name="tb", v=13, perm=[0,2,1]}
      %p: float32[3,2,2] = MatMul(%at, %bt) {name="mm", v=13}
      %y: float32[2,3,2] = Transpose(%p) {name="ty", v=13, perm=[1,0,2]}
    }
"""

TRANSPOSE_AFTER = ir("""
    graph @main(%a: float32[2,3,4], %b: float32[3,2,4]) -> (%y) {
      %bt: float32[3,4,2] = Transpose(%b) {name="tb", v=13, perm=[0,2,1]}
      %y: float32[2,3,2] = MatMul(%a, %bt) {name="mm", v=13, perm_a=[1,0,2], perm_y=[1,0,2]}
    }
""")


def test_fuse_matmul_transpose_looks_through_transposes_that_keep_the_last_axis():
    """The Transposes of A and of the result become perm_a / perm_y; B's moves its last
    axis (a matrix read down its columns) and stays."""
    after, ctx = run_pass("fuse-matmul-transpose", TRANSPOSE_BEFORE)
    assert after == TRANSPOSE_AFTER
    assert ctx.stats == {"fused_matmul_transposes": 2}
    same_numbers(TRANSPOSE_BEFORE, TRANSPOSE_AFTER)


# ----------------------------------------------------------------------- fuse-softmax-matmul
SOFTMAX_MM_BEFORE = """
    graph @main(%s: float32[2,3,4], %m: float32[4], %v: float32[4,2,2]) -> (%y, %z) {
      %p: float32[2,3,4] = Softmax(%s, %m) {name="softmax", v=13, axis=-1, fused_add=1}
      %y: float32[2,3,2] = MatMul(%p, %v) {name="mm", v=13, perm_b=[1,0,2]}
      %q: float32[2,3,4] = Softmax(%s) {name="softmax_rows", v=13, axis=1}
      %z: float32[2,3,2] = MatMul(%q, %v) {name="mm_rows", v=13, perm_b=[1,0,2]}
    }
"""

SOFTMAX_MM_AFTER = ir("""
    graph @main(%s: float32[2,3,4], %m: float32[4], %v: float32[4,2,2]) -> (%y, %z) {
      %y: float32[2,3,2] = SoftmaxMatMul(%s, %v, %m) {name="mm/softmax", domain="aircc", v=1, perm_b=[1,0,2]}
      %q: float32[2,3,4] = Softmax(%s) {name="softmax_rows", v=13, axis=1}
      %z: float32[2,3,2] = MatMul(%q, %v) {name="mm_rows", v=13, perm_b=[1,0,2]}
    }
""")


def test_fuse_softmax_matmul_fuses_a_last_axis_softmax_with_its_mask():
    """The mask the Softmax took from ``fuse-add-softmax`` becomes input 2 and perm_b
    carries over; a Softmax along another axis stays."""
    after, ctx = run_pass("fuse-softmax-matmul", SOFTMAX_MM_BEFORE)
    assert after == SOFTMAX_MM_AFTER
    assert ctx.stats == {"fused_softmax_matmul": 1}
    same_numbers(SOFTMAX_MM_BEFORE, SOFTMAX_MM_AFTER)


# ----------------------------------------------------------------------- fuse-attention
WQ = [0.5, -1.0, 0.25, 1.0, -0.5, 0.75, 1.0, -0.25]
BQ = [0.125, -0.5, 0.25, 0.0]
WK = [1.0, 0.5, -0.75, 0.25, 0.5, -1.0, 0.25, 0.5]
WV = [-0.5, 1.0, 0.5, -0.25, 1.0, 0.25, -1.0, 0.75]
BV = [0.5, 0.25, -0.125, 1.0]


def _dense(values) -> str:
    return "dense[" + ",".join(repr(float(v)) for v in values) + "]"


ATTENTION_BEFORE = f"""
    graph @main(%x: float32[?B,?S,2]) -> (%y) {{
      const %wq: float32[2,4] = {_dense(WQ)}
      const %bq: float32[4] = {_dense(BQ)}
      const %wk: float32[2,4] = {_dense(WK)}
      const %wv: float32[2,4] = {_dense(WV)}
      const %bv: float32[4] = {_dense(BV)}
      const %i0: int64[1] = dense[0]
      const %i1: int64[1] = dense[1]
      const %hd: int64[2] = dense[2,2]
      %shp: int64[3] = Shape(%x) {{name="shape", v=15}}
      %nb: int64[1] = Gather(%shp, %i0) {{name="gather_b", v=13, axis=0}}
      %ns: int64[1] = Gather(%shp, %i1) {{name="gather_s", v=13, axis=0}}
      %heads: int64[4] = Concat(%nb, %ns, %hd) {{name="target", v=13, axis=0}}
      %q: float32[?B,?S,4] = MatMul(%x, %wq, %bq) {{name="q", v=13, fused_add=1}}
      %qh: float32[?B,?S,2,2] = Reshape(%q, %heads) {{name="q_heads", v=14}}
      %k: float32[?B,?S,4] = MatMul(%x, %wk) {{name="k", v=13}}
      %kh: float32[?B,?S,2,2] = Reshape(%k, %heads) {{name="k_heads", v=14}}
      %kt: float32[?B,2,2,?S] = Transpose(%kh) {{name="k_t", v=13, perm=[0,2,3,1]}}
      %v: float32[?B,?S,4] = MatMul(%x, %wv, %bv) {{name="v", v=13, fused_add=1}}
      %vh: float32[?B,?S,2,2] = Reshape(%v, %heads) {{name="v_heads", v=14}}
      %s: float32[?B,2,?S,?S] = MatMul(%qh, %kt) {{name="scores", v=13, perm_a=[0,2,1,3]}}
      %y: float32[?B,?S,2,2] = SoftmaxMatMul(%s, %vh) {{name="ctx", domain="aircc", v=1, perm_b=[0,2,1,3], perm_y=[0,2,1,3]}}
    }}
"""


def test_fuse_attention_makes_one_kernel_of_the_block_and_drops_its_shape_arithmetic():
    """Q, K and V's weights side by side (Q's, and its bias, times log2 e for the kernel's
    exp2; K has no bias: zeros), the heads from the Reshape target that the Shape /
    Gather / Concat arithmetic gives, which goes dead with the block."""
    wq, wk, wv = (np.array(w, np.float32).reshape(2, 4) for w in (WQ, WK, WV))
    bq, bv = np.array(BQ, np.float32), np.array(BV, np.float32)
    log2e = np.log2(np.e)
    weight = np.concatenate([(wq.astype(np.float64) * log2e).astype(np.float32), wk, wv], axis=-1)
    bias = np.concatenate([(bq.astype(np.float64) * log2e).astype(np.float32), np.zeros(4, np.float32), bv])
    expected = ir(f"""
        graph @main(%x: float32[?B,?S,2]) -> (%y) {{
          const %"ctx/qkv.weight": float32[2,12] = {digest(weight)}
          const %"ctx/qkv.bias": float32[12] = {digest(bias)}
          %y: float32[?B,?S,2,2] = Attention(%x, %"ctx/qkv.weight", %"ctx/qkv.bias") {{name="ctx/attention", domain="aircc", v=1, base2=1, heads=2}}
        }}
    """)
    graph, ctx = run_pass_graph("fuse-attention", ATTENTION_BEFORE)
    assert print_graph(graph) == expected
    assert declared(ctx, "fuse-attention") == {"fused_attention": 1}
    np.testing.assert_array_equal(graph.constants["ctx/qkv.weight"], weight)
    np.testing.assert_array_equal(graph.constants["ctx/qkv.bias"], bias)
    same_numbers(ATTENTION_BEFORE, graph, dims={"B": 2, "S": 3})


def test_fuse_attention_leaves_a_block_whose_weights_come_at_run_time():
    """K's weights are an input: there is nothing to pack at compile time."""
    text = ir(ATTENTION_BEFORE.replace("graph @main(%x: float32[?B,?S,2])",
                                       "graph @main(%x: float32[?B,?S,2], %wk: float32[2,4])")
              .replace(f"      const %wk: float32[2,4] = {_dense(WK)}\n", ""))
    assert "const %wk" not in text
    after, ctx = run_pass("fuse-attention", text)
    assert after == text
    assert declared(ctx, "fuse-attention") == {"fused_attention": 0}


INSTANCE_NORM_RELU_BEFORE = """
    graph @main(%x: float32[2,3,4,4]) -> (%y) {
      const %s: float32[3] = dense[1.0,0.5,-2.0]
      const %b: float32[3] = dense[0.25,0.0,-0.5]
      %n: float32[2,3,4,4] = InstanceNormalization(%x, %s, %b) {name="norm", v=6}
      %y: float32[2,3,4,4] = Relu(%n) {name="relu", v=14}
    }
"""


def test_fuse_epilogues_takes_the_relu_after_an_instance_norm():
    after, ctx = run_pass("fuse-epilogues", INSTANCE_NORM_RELU_BEFORE)
    assert after == ir("""
        graph @main(%x: float32[2,3,4,4]) -> (%y) {
          const %s: float32[3] = dense[1.0,0.5,-2.0]
          const %b: float32[3] = dense[0.25,0.0,-0.5]
          %y: float32[2,3,4,4] = InstanceNormalization(%x, %s, %b) {name="norm", v=6, fused_relu=1}
        }
    """)
    assert ctx.stats == {"fused_epilogues": 1}
    same_numbers(INSTANCE_NORM_RELU_BEFORE, after)

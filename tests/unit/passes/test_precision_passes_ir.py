"""The precision-mode pass: force_fp32 widens float16 and bfloat16 values, constants and
type attributes to float32, bodies included, and keeps the model's inputs and outputs in
their declared types with one Cast each."""
from __future__ import annotations

import pytest

from aircc.compiler.context import CompileOptions
from aircc.errors import CompileOptionError
from ir_cases import declared, ir, run_pass, same_numbers

COVERS = ("precision-mode", "mix-precision")

HALF_BEFORE = """
    graph @main(%x: float16[2,4], %c: bool[]) -> (%y, %x, %z) {
      const %w: float16[4,2] = dense[1.0,-1.0,2.0,0.5,-0.5,1.0,0.25,-2.0]
      %m: float16[2,2] = MatMul(%x, %w) {name="mm", v=17}
      %h: float16[2,2] = Cast(%m) {name="round", v=17, to=10}
      %y: float16[2,2] = Relu(%h) {name="relu", v=17}
      %z: float16[2,2] = If(%c) {name="if", v=17}
        graph @then_branch() -> (%t) as then_branch {
          %t: float16[2,2] = Neg(%m) {name="neg", v=17}
        }
        graph @else_branch() -> (%m) as else_branch {
        }
    }
"""

HALF_AFTER = ir("""
    graph @main(%x: float16[2,4], %c: bool[]) -> (%y, %x, %z) {
      const %w: float32[4,2] = dense[1.0,-1.0,2.0,0.5,-0.5,1.0,0.25,-2.0]
      %x__fp32: float32[2,4] = Cast(%x) {name="x__to_fp32", v=17, to=1}
      %m: float32[2,2] = MatMul(%x__fp32, %w) {name="mm", v=17}
      %h: float32[2,2] = Cast(%m) {name="round", v=17, to=1}
      %y__fp32: float32[2,2] = Relu(%h) {name="relu", v=17}
      %z__fp32: float32[2,2] = If(%c) {name="if", v=17}
        graph @then_branch() -> (%t) as then_branch {
          %t: float32[2,2] = Neg(%m) {name="neg", v=17}
        }
        graph @else_branch() -> (%m) as else_branch {
        }
      %y: float16[2,2] = Cast(%y__fp32) {name="y__from_fp32", v=17, to=10}
      %z: float16[2,2] = Cast(%z__fp32) {name="z__from_fp32", v=17, to=10}
    }
""")


def test_force_fp32_computes_in_float32_and_keeps_the_declared_inputs_and_outputs():
    after, ctx = run_pass("precision-mode", HALF_BEFORE, precision_mode="force_fp32")
    assert after == HALF_AFTER
    assert declared(ctx, "precision-mode") == {"precision_casts": 3, "precision_values": 7}


PLAIN_HALF = """
    graph @main(%x: float16[2,4]) -> (%y) {
      const %w: float16[4,2] = dense[1.0,-1.0,2.0,0.5,-0.5,1.0,0.25,-2.0]
      %m: float16[2,2] = MatMul(%x, %w) {name="mm", v=17}
      %y: float16[2,2] = Sigmoid(%m) {name="sigmoid", v=17}
    }
"""


def test_force_fp32_gives_the_float16_graphs_numbers_to_float16_rounding():
    after, _ = run_pass("precision-mode", PLAIN_HALF, precision_mode="force_fp32")
    same_numbers(PLAIN_HALF, after, rtol=2e-3, atol=2e-3)


def test_must_keep_origin_dtype_leaves_the_graph_alone():
    after, ctx = run_pass("precision-mode", HALF_BEFORE)
    assert after == ir(HALF_BEFORE)
    assert declared(ctx, "precision-mode") == {"precision_casts": 0, "precision_values": 0}


BF16_BEFORE = """
    graph @main(%x: float32[3]) -> (%y) {
      %b: bfloat16[3] = Cast(%x) {name="narrow", v=17, to=16}
      %y: bfloat16[3] = Abs(%b) {name="abs", v=17}
    }
"""


def test_force_fp32_widens_bfloat16_and_casts_a_declared_bfloat16_output_back():
    after, _ = run_pass("precision-mode", BF16_BEFORE, precision_mode="force_fp32")
    assert 'Cast(%x) {name="narrow", v=17, to=1}' in after
    assert '%y: bfloat16[3] = Cast(%y__fp32) {name="y__from_fp32", v=17, to=16}' in after


@pytest.mark.parametrize("mode, message", [
    ("force_fp16", "not available in this version of aircc .* the modes it has: "
                   "must_keep_origin_dtype, force_fp32, allow_mix_precision_bf16, force_bf16"),
    ("fp64", "--precision_mode must be one of must_keep_origin_dtype, force_fp32, "
             "allow_mix_precision_bf16, force_bf16, got 'fp64'"),
])
def test_a_mode_aircc_cannot_compile_is_refused_with_the_ones_it_can(mode, message):
    with pytest.raises(CompileOptionError, match=message):
        CompileOptions(precision_mode=mode)


# ----------------------------------------------------------------------- mix-precision
CONV_BEFORE = """
    graph @main(%x: float32[1,2,4,4], %v: float32[2,2,1,1]) -> (%y, %z) {
      const %w: float32[2,2,1,1] = dense[1.0,-1.0,0.5,2.0]
      %y: float32[1,2,4,4] = Conv(%x, %w) {name="conv", v=11}
      %z: float32[1,2,4,4] = Conv(%x, %v) {name="conv_runtime_weights", v=11}
    }
"""


def test_mix_precision_marks_the_white_listed_ops_whose_weights_are_constants():
    after, ctx = run_pass("mix-precision", CONV_BEFORE, precision_mode="allow_mix_precision_bf16")
    assert 'Conv(%x, %w) {name="conv", v=11, compute_dtype="bfloat16"}' in after
    assert 'Conv(%x, %v) {name="conv_runtime_weights", v=11}' in after
    assert declared(ctx, "mix-precision") == {"bf16_ops": 1, "bf16_values": 0}
    kept, ctx = run_pass("mix-precision", CONV_BEFORE, precision_mode="force_fp32")
    assert kept == ir(CONV_BEFORE)
    assert declared(ctx, "mix-precision") == {"bf16_ops": 0, "bf16_values": 0}


def test_the_mixlist_blocks_an_op_in_allow_mode_and_not_in_force_mode():
    blocked = {"black-list": {"to-add": ["Conv"]}}
    after, ctx = run_pass("mix-precision", CONV_BEFORE, precision_mode="allow_mix_precision_bf16",
                          modify_mixlist=blocked)
    assert after == ir(CONV_BEFORE)
    assert declared(ctx, "mix-precision") == {"bf16_ops": 0, "bf16_values": 0}
    _, ctx = run_pass("mix-precision", CONV_BEFORE, precision_mode="force_bf16",
                      modify_mixlist=blocked)
    assert declared(ctx, "mix-precision") == {"bf16_ops": 1, "bf16_values": 0}


CHAIN_BEFORE = """
    graph @main(%x: float32[1,2,4,4]) -> (%y, %z) {
      const %w: float32[2,2,1,1] = dense[1.0,-1.0,0.5,2.0]
      %a: float32[1,2,4,4] = Conv(%x, %w) {name="first", v=11}
      %b: float32[1,2,4,4] = Conv(%a, %w) {name="second", v=11}
      %y: float32[1,2,4,4] = Conv(%b, %w) {name="third", v=11}
      %z: float32[1,2,4,4] = Relu(%b) {name="relu", v=14}
    }
"""

CHAIN_AFTER = ir("""
    graph @main(%x: float32[1,2,4,4]) -> (%y, %z) {
      const %w: float32[2,2,1,1] = dense[1.0,-1.0,0.5,2.0]
      %a: bfloat16[1,2,4,4] = Conv(%x, %w) {name="first", v=11, compute_dtype="bfloat16", output_dtype="bfloat16"}
      %b: float32[1,2,4,4] = Conv(%a, %w) {name="second", v=11, compute_dtype="bfloat16"}
      %y: float32[1,2,4,4] = Conv(%b, %w) {name="third", v=11, compute_dtype="bfloat16"}
      %z: float32[1,2,4,4] = Relu(%b) {name="relu", v=14}
    }
""")


def test_a_value_only_bfloat16_kernels_read_is_held_in_bfloat16():
    """``a`` goes from one bfloat16 conv to the next as it is; ``b`` is also read by a
    Relu (float32) and ``y`` is the model's output: both stay float32."""
    after, ctx = run_pass("mix-precision", CHAIN_BEFORE, precision_mode="allow_mix_precision_bf16")
    assert after == CHAIN_AFTER
    assert declared(ctx, "mix-precision") == {"bf16_ops": 3, "bf16_values": 1}
    same_numbers(CHAIN_BEFORE, CHAIN_AFTER, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("mixlist, message", [
    ({"grey-list": {}}, "unknown list 'grey-list'; the lists are black-list, white-list, gray-list"),
    ({"white-list": {"to-add": ["Softmax"]}}, r"\['Softmax'\] have no bfloat16 kernel; the ops "
                                              r"that do: Conv, MatMul, Gemm"),
    ({"black-list": ["Conv"]}, "black-list must map to-add and to-remove to lists of op types"),
])
def test_a_wrong_mixlist_is_refused_naming_what_is_wrong(mixlist, message):
    with pytest.raises(CompileOptionError, match=message):
        run_pass("mix-precision", CONV_BEFORE, precision_mode="allow_mix_precision_bf16",
                 modify_mixlist=mixlist)


def test_the_bfloat16_modes_need_the_onednn_kernels():
    with pytest.raises(CompileOptionError, match="needs the oneDNN kernels .* not target cpu-avx2"):
        run_pass("mix-precision", CONV_BEFORE, precision_mode="force_bf16", target="cpu-avx2")

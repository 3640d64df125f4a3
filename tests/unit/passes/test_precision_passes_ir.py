"""The precision-mode pass: force_fp32 widens float16 and bfloat16 values, constants and
type attributes to float32, bodies included, and keeps the model's inputs and outputs in
their declared types with one Cast each."""
from __future__ import annotations

import pytest

from aircc.compiler.context import CompileOptions
from aircc.errors import CompileOptionError
from ir_cases import declared, ir, run_pass, same_numbers

COVERS = ("precision-mode",)

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
    ("force_bf16", "not available in this version of aircc .* the modes it has: "
                   "must_keep_origin_dtype, force_fp32"),
    ("fp64", "--precision_mode must be one of must_keep_origin_dtype, force_fp32, got 'fp64'"),
])
def test_a_mode_aircc_cannot_compile_is_refused_with_the_ones_it_can(mode, message):
    with pytest.raises(CompileOptionError, match=message):
        CompileOptions(precision_mode=mode)

"""The lowering passes as IR text before and after: static control flow spliced into the
task order, and the tiling every kernel node gets."""
from __future__ import annotations

import numpy as np
import pytest

from aircc.compiler.context import CompileContext, CompileOptions
from aircc.compiler.ir.printer import print_graph
from aircc.compiler.ir.graph import TensorType
from aircc.errors import CompileOptionError
from testdata import numpy_target
from ir_cases import digest, ir, run_pass, run_pass_graph

COVERS = ("expand-control-flow", "tiling")


# ----------------------------------------------------------------------- expand-control-flow
IF_BEFORE = """
    graph @main(%c: bool[], %x: float32[2]) -> (%y) [streams=1, events=0] {
      %y: float32[2] = If(%c) {name="if", v=16} [stream=0]
        graph @then_branch() -> (%t) as then_branch {
          %t: float32[2] = Neg(%x) {name="neg", v=13}
        }
        graph @else_branch() -> (%e) as else_branch {
          %e: float32[2] = Abs(%x) {name="abs", v=13}
        }
    }
"""

IF_AFTER = ir("""
    graph @main(%c: bool[], %x: float32[2]) -> (%y) [streams=1, events=0] {
      %y: float32[2] = IfInit() {name="if#init", domain="aircc", v=1} [stream=0]
      StreamSwitch(%c) {name="if#switch0", domain="aircc", v=1, label=0} [stream=0]
      %t: float32[2] = Neg(%x) {name="neg", v=13} [stream=0]
      BranchOut(%t, %y) {name="if#then_out", domain="aircc", v=1} [stream=0]
      Goto() {name="if#goto0", domain="aircc", v=1, label=1} [stream=0]
      Label() {name="if#else0", domain="aircc", v=1, label=0} [stream=0]
      %e: float32[2] = Abs(%x) {name="abs", v=13} [stream=0]
      BranchOut(%e, %y) {name="if#else_out", domain="aircc", v=1} [stream=0]
      Label() {name="if#end0", domain="aircc", v=1, label=1} [stream=0]
    }
""")


def test_expand_control_flow_splices_an_if_between_a_switch_and_labels():
    """The switch jumps to the else label when the condition is false; the then branch
    ends in a jump past the else branch; each branch hands its result to the If's."""
    graph, ctx = run_pass_graph("expand-control-flow", IF_BEFORE)
    assert print_graph(graph) == IF_AFTER
    assert (graph.meta["streams"], graph.meta["events"]) == (1, 0)
    assert graph.meta["spans"] == [("if#init", "if#end0")]
    assert ctx.stats == {}


LOOP_BEFORE = """
    graph @main(%x: float32[2]) -> (%y) [streams=1, events=0] {
      const %M: int64[] = dense[3]
      %y: float32[2] = Loop(%M, %none, %x) {name="loop", v=16} [stream=0]
        graph @body(%i: int64[], %cond: bool[], %h: float32[2]) -> (%cond_out, %h_out) as body {
          %cond_out: bool[] = Identity(%cond) {name="keep", v=16}
          %h_out: float32[2] = Neg(%h) {name="neg", v=13}
        }
    }
"""

LOOP_AFTER = ir("""
    graph @main(%x: float32[2]) -> (%y) [streams=2, events=2] {
      const %M: int64[] = dense[3]
      %i: int64[], %cond: bool[], %"loop#trip": int64[], %h: float32[2] = LoopInit(%M, %none, %x) {name="loop#init", domain="aircc", v=1} [stream=0]
      Label() {name="loop#head0", domain="aircc", v=1, label=0} [stream=0]
      Label() {name="loop#head1", domain="aircc", v=1, label=0} [stream=1]
      %"loop#flag": bool[] = LoopCheck(%i, %cond, %"loop#trip") {name="loop#check", domain="aircc", v=1} [stream=0]
      EventRecord() {name="record_e0", domain="aircc", v=1, dst="loop", event=0, src="loop"} [stream=0]
      EventWait() {name="wait_e0", domain="aircc", v=1, dst="loop", event=0, src="loop"} [stream=1]
      StreamSwitch(%"loop#flag") {name="loop#switch0", domain="aircc", v=1, label=1} [stream=0]
      StreamSwitch(%"loop#flag") {name="loop#switch1", domain="aircc", v=1, label=1} [stream=1]
      %cond_out: bool[] = Identity(%cond) {name="keep", v=16} [stream=0]
      %h_out: float32[2] = Neg(%h) {name="neg", v=13} [stream=1]
      EventRecord() {name="record_e1", domain="aircc", v=1, dst="loop", event=1, src="loop"} [stream=1]
      EventWait() {name="wait_e1", domain="aircc", v=1, dst="loop", event=1, src="loop"} [stream=0]
      LoopUpdate(%i, %cond, %h, %cond_out, %h_out) {name="loop#update", domain="aircc", v=1, carried=1} [stream=0]
      Goto() {name="loop#goto0", domain="aircc", v=1, label=0} [stream=0]
      Goto() {name="loop#goto1", domain="aircc", v=1, label=0} [stream=1]
      Label() {name="loop#exit0", domain="aircc", v=1, label=1} [stream=0]
      Label() {name="loop#exit1", domain="aircc", v=1, label=1} [stream=1]
      %y: float32[2] = LoopFinish(%h) {name="loop#finish", domain="aircc", v=1} [stream=0]
    }
""")


def test_expand_control_flow_runs_a_loop_body_on_its_own_streams():
    """With no size threshold the body's Neg opens a stream (1): the check is handed to it
    by an event, every stream switches and jumps at the labels, and the iteration joins
    stream 1 back into the loop's stream before the update."""
    graph, ctx = run_pass_graph("expand-control-flow", LOOP_BEFORE, min_branch_bytes=0)
    assert print_graph(graph) == LOOP_AFTER
    assert (graph.meta["streams"], graph.meta["events"]) == (2, 2)
    assert graph.meta["spans"] == [("loop#init", "loop#finish")]
    assert ctx.stats == {}


def test_expand_control_flow_refuses_a_loop_with_scan_outputs():
    """Scan outputs grow by an iteration each: their size is only known at run time."""
    before = LOOP_BEFORE.replace("-> (%cond_out, %h_out) as body", "-> (%cond_out, %h_out, %h) as body") \
        .replace('%y: float32[2] = Loop(', '%y: float32[2], %ys: float32[?T,2] = Loop(')
    with pytest.raises(CompileOptionError, match="scan outputs"):
        run_pass("expand-control-flow", before)


# ----------------------------------------------------------------------- tiling
W = np.random.default_rng(5).standard_normal((1, 2, 3, 3)).astype(np.float32)

TILING = """
    graph @main(%x: float32[1,2,5,5]) -> (%y) {{
      const %w: float32[1,2,3,3] = {digest}
      %x.dev: float32[1,2,5,5] = MemcpyH2D(%x) {{name="h2d_0", domain="aircc", v=1, binding=0}} [stream=0]
      %c: float32[1,1,3,3] = Conv(%x.dev, %w) {{name="conv", v=11}} [stream=0{conv}]
      %y: float32[1,1,3,3] = Relu(%c) {{name="relu", v=14}} [stream=0{relu}]
      MemcpyD2H(%y) {{name="d2h_0", domain="aircc", v=1, binding=0}} [stream=0]
    }}
"""


def test_tiling_gives_kernel_nodes_the_backends_tiling_and_workspace():
    """The Conv's workspace (its im2col columns) is what the target's backend asks for on
    these shapes; the Relu needs none; the copies are device tasks and get no tiling."""
    ctx = CompileContext(CompileOptions(target=numpy_target()))
    conv_tiling = ctx.backend.impl("Conv", 11, "", "conv").tile(
        [TensorType("float32", (1, 2, 5, 5)), TensorType("float32", (1, 2, 3, 3))], {}, ctx.target)
    workspace = conv_tiling["workspace"]
    assert workspace > 0
    before = TILING.format(digest=digest(W), conv="", relu="")
    after = ir(TILING.format(digest=digest(W), conv=f", workspace={workspace}", relu=", workspace=0"))
    graph, ctx = run_pass_graph("tiling", before, {"w": W}, target=numpy_target())
    assert print_graph(graph) == after
    assert graph.node("conv").meta["tiling"] == conv_tiling
    assert graph.node("relu").meta["tiling"] == {}
    assert "tiling" not in graph.node("h2d_0").meta and "tiling" not in graph.node("d2h_0").meta
    assert ctx.stats == {}

"""The cleanup passes as IR text before and after: shape inference, constant folding,
Identity/Dropout removal and dead-code elimination."""
from __future__ import annotations

import numpy as np

from graphs import run_ir
from ir_cases import ir, parse, run_pass, run_pass_graph, same_numbers

COVERS = ("infer-shapes", "fold-constants", "remove-identity", "dce")


# ----------------------------------------------------------------------- infer-shapes
INFER_BEFORE = """
    graph @main(%x: float32[?N,4], %z: float32[2,3], %p: float32[1,2,4,4]) -> (%y, %n, %r, %d, %i) {
      const %w: float32[4,2] = dense[1.0,0.0,0.0,1.0,1.0,0.0,0.0,1.0]
      const %shape: int64[2] = dense[3,2]
      %h: ? = MatMul(%x, %w) {name="mm", v=17}
      %y: ? = Relu(%h) {name="relu", v=17}
      %n: ? = Shape(%h) {name="shape", v=17}
      %r: ? = Reshape(%z, %shape) {name="reshape", v=17}
      %d: ?, %i: ? = MaxPool(%p) {name="pool", v=12, kernel_shape=[2,2], strides=[2,2]}
    }
"""

INFER_AFTER = ir("""
    graph @main(%x: float32[?N,4], %z: float32[2,3], %p: float32[1,2,4,4]) -> (%y, %n, %r, %d, %i) {
      const %w: float32[4,2] = dense[1.0,0.0,0.0,1.0,1.0,0.0,0.0,1.0]
      const %shape: int64[2] = dense[3,2]
      %h: float32[?N,2] = MatMul(%x, %w) {name="mm", v=17}
      %y: float32[?N,2] = Relu(%h) {name="relu", v=17}
      %n: int64[2] = Shape(%h) {name="shape", v=17}
      %r: float32[3,2] = Reshape(%z, %shape) {name="reshape", v=17}
      %d: float32[1,2,2,2], %i: int64[1,2,2,2] = MaxPool(%p) {name="pool", v=12, kernel_shape=[2,2], strides=[2,2]} [impl="fallback"]
    }
""")


def test_infer_shapes_types_every_value_and_marks_fallbacks():
    """Symbolic dims flow through, a Reshape reads its constant target, and a use of an op
    the native kernels do not cover (MaxPool's Indices output) is typed by the fallback."""
    after, ctx = run_pass("infer-shapes", INFER_BEFORE)
    assert after == INFER_AFTER
    assert ctx.stats == {}


# ----------------------------------------------------------------------- fold-constants
FOLD_BEFORE = """
    graph @main(%x: float32[2,2]) -> (%y) {
      const %a: float32[2] = dense[1.0,2.0]
      const %b: float32[2] = dense[3.0,4.0]
      %s: float32[2] = Add(%a, %b) {name="add", v=17}
      %shape: int64[2] = Shape(%x) {name="shape", v=17}
      %k: float32[2,2] = Expand(%s, %shape) {name="expand", v=17}
      %y: float32[2,2] = Mul(%x, %k) {name="mul", v=17}
    }
"""

FOLD_AFTER = ir("""
    graph @main(%x: float32[2,2]) -> (%y) {
      const %a: float32[2] = dense[1.0,2.0]
      const %b: float32[2] = dense[3.0,4.0]
      const %s: float32[2] = dense[4.0,6.0]
      const %shape: int64[2] = dense[2,2]
      const %k: float32[2,2] = dense[4.0,6.0,4.0,6.0]
      %y: float32[2,2] = Mul(%x, %k) {name="mul", v=17}
    }
""")


def test_fold_constants_evaluates_constant_nodes_and_static_shapes():
    """a + b folds; Shape of a static value folds whatever made it; the Expand of the two
    then folds too.  The Mul reads a runtime input and stays; the unread constants stay
    (dce's business)."""
    after, ctx = run_pass("fold-constants", FOLD_BEFORE)
    assert after == FOLD_AFTER
    assert ctx.stats == {"folded_nodes": 3}
    same_numbers(FOLD_BEFORE, FOLD_AFTER)


FOLD_IF_BEFORE = """
    graph @main(%x: float32[2]) -> (%y) {
      const %c: bool[] = dense[true]
      %y: float32[2] = If(%c) {name="if", v=17}
        graph @then_branch() -> (%t) as then_branch {
          %t: float32[2] = Neg(%x) {name="neg", v=17}
        }
        graph @else_branch() -> (%e) as else_branch {
          %e: float32[2] = Relu(%x) {name="relu", v=17}
        }
    }
"""

FOLD_IF_AFTER = ir("""
    graph @main(%x: float32[2]) -> (%y) {
      const %c: bool[] = dense[true]
      %t: float32[2] = Neg(%x) {name="neg", v=17}
      %y: float32[2] = Identity(%t) {name="if/out0", v=17}
    }
""")


def test_fold_constants_inlines_the_branch_a_constant_condition_takes():
    after, ctx = run_pass("fold-constants", FOLD_IF_BEFORE)
    assert after == FOLD_IF_AFTER
    assert ctx.stats == {"folded_nodes": 1}
    x = np.array([1.5, -2.0], np.float32)     # run_ir has no If: the then branch is -x
    np.testing.assert_array_equal(run_ir(parse(FOLD_IF_AFTER), {"x": x})["y"], -x)


# ----------------------------------------------------------------------- remove-identity
IDENTITY_BEFORE = """
    graph @main(%x: float32[2]) -> (%y, %z) {
      %a: float32[2] = Relu(%x) {name="relu", v=17}
      %b: float32[2] = Identity(%a) {name="id_inner", v=17}
      %c: float32[2] = Neg(%b) {name="neg", v=17}
      %y: float32[2] = Identity(%c) {name="id_output", v=17}
      %z: float32[2] = Identity(%x) {name="id_copy", v=17}
    }
"""

IDENTITY_AFTER = ir("""
    graph @main(%x: float32[2]) -> (%y, %z) {
      %a: float32[2] = Relu(%x) {name="relu", v=17}
      %y: float32[2] = Neg(%a) {name="neg", v=17}
      %z: float32[2] = Identity(%x) {name="id_copy", v=17}
    }
""")


def test_remove_identity_rewires_readers_and_keeps_output_names():
    """An inner Identity goes (its reader reads its input); one that makes a graph output
    goes by renaming its producer to the output; one that copies a graph input to an
    output is a real copy and stays."""
    after, ctx = run_pass("remove-identity", IDENTITY_BEFORE)
    assert after == IDENTITY_AFTER
    assert ctx.stats == {"identity_removed": 2}


DROPOUT_BEFORE = """
    graph @main(%x: float32[2]) -> (%y, %t, %m2) {
      const %train: bool[] = dense[true]
      %d: float32[2], %m: bool[2] = Dropout(%x) {name="drop", v=13}
      %y: float32[2] = Relu(%d) {name="relu", v=13}
      %t: float32[2] = Dropout(%x, %none, %train) {name="drop_train", v=13}
      %d2: float32[2], %m2: bool[2] = Dropout(%x) {name="drop_mask", v=13}
    }
"""

DROPOUT_AFTER = ir("""
    graph @main(%x: float32[2]) -> (%y, %t, %m2) {
      const %train: bool[] = dense[true]
      %y: float32[2] = Relu(%x) {name="relu", v=13}
      %t: float32[2] = Dropout(%x, %none, %train) {name="drop_train", v=13}
      %d2: float32[2], %m2: bool[2] = Dropout(%x) {name="drop_mask", v=13}
    }
""")


def test_remove_identity_drops_inference_dropouts_only():
    """A Dropout whose mask nobody reads goes; one in training mode, or whose mask is
    read, stays."""
    after, ctx = run_pass("remove-identity", DROPOUT_BEFORE)
    assert after == DROPOUT_AFTER
    assert ctx.stats == {"identity_removed": 1}


# ----------------------------------------------------------------------- dce
DCE_BEFORE = """
    graph @main(%x: float32[2]) -> (%y) {
      const %k: float32[2] = dense[1.0,2.0]
      const %unused: float32[2] = dense[3.0,4.0]
      %a: float32[2] = Relu(%x) {name="relu", v=17}
      %dead: float32[2] = Mul(%a, %k) {name="dead_mul", v=17}
      %dead2: float32[2] = Neg(%dead) {name="dead_neg", v=17}
      EventRecord() {name="record", domain="aircc", v=1, dst="add", event=0, src="relu"}
      %y: float32[2] = Add(%a, %k) {name="add", v=17}
    }
"""

DCE_AFTER = ir("""
    graph @main(%x: float32[2]) -> (%y) {
      const %k: float32[2] = dense[1.0,2.0]
      %a: float32[2] = Relu(%x) {name="relu", v=17}
      EventRecord() {name="record", domain="aircc", v=1, dst="add", event=0, src="relu"}
      %y: float32[2] = Add(%a, %k) {name="add", v=17}
    }
""")


def test_dce_drops_unread_nodes_and_constants_and_keeps_side_effects():
    after, ctx = run_pass("dce", DCE_BEFORE)
    assert after == DCE_AFTER
    assert ctx.stats == {"dead_nodes": 2}


DCE_REGION_BEFORE = """
    graph @main(%x: float32[2], %c: bool[]) -> (%y) {
      %a: float32[2] = Relu(%x) {name="relu", v=17}
      %u: float32[2] = Neg(%x) {name="outer_dead", v=17}
      %y: float32[2] = If(%c) {name="if", v=17}
        graph @then_branch() -> (%t) as then_branch {
          %t: float32[2] = Neg(%a) {name="neg", v=17}
          %t2: float32[2] = Abs(%a) {name="body_dead", v=17}
        }
        graph @else_branch() -> (%e) as else_branch {
          %e: float32[2] = Abs(%x) {name="abs", v=17}
        }
    }
"""

DCE_REGION_AFTER = ir("""
    graph @main(%x: float32[2], %c: bool[]) -> (%y) {
      %a: float32[2] = Relu(%x) {name="relu", v=17}
      %y: float32[2] = If(%c) {name="if", v=17}
        graph @then_branch() -> (%t) as then_branch {
          %t: float32[2] = Neg(%a) {name="neg", v=17}
        }
        graph @else_branch() -> (%e) as else_branch {
          %e: float32[2] = Abs(%x) {name="abs", v=17}
        }
    }
""")


def test_dce_cleans_bodies_and_keeps_what_a_body_captures():
    """The Relu is read only from inside the then branch: it stays; the dead node of the
    branch and the dead node outside go."""
    after, ctx = run_pass("dce", DCE_REGION_BEFORE)
    assert after == DCE_REGION_AFTER
    assert ctx.stats == {"dead_nodes": 2}


def test_dce_keeps_a_live_graph_unchanged():
    after, ctx = run_pass("dce", DCE_AFTER)
    assert after == DCE_AFTER
    assert ctx.stats == {"dead_nodes": 0}


def test_infer_shapes_graph_is_typed():
    graph, _ = run_pass_graph("infer-shapes", INFER_BEFORE)
    assert graph.meta["typed"] is True

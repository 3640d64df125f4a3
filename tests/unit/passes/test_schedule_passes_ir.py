"""The scheduling passes as IR text before and after: host-device copies, streams, events,
host placement (dynamic mode) and the scheduling of control-flow bodies.

The text form carries node meta (``[stream=0]``, ``[placement="host"]``) and the graph's
schedule facts in its header (``[streams=3, events=4]``): what an earlier scheduling pass
left on the graph."""
from __future__ import annotations

from aircc.compiler.ir.printer import print_graph
from testdata import numpy_target
from ir_cases import ir, run_pass, run_pass_graph

COVERS = ("insert-memcpy", "assign-streams", "insert-events", "place-host-ops",
          "schedule-device-nodes", "schedule-regions")


# ----------------------------------------------------------------------- insert-memcpy
MEMCPY_BEFORE = """
    graph @main(%x: float32[2], %y: float32[2]) -> (%z, %x) {
      %z: float32[2] = Add(%x, %y) {name="add", v=14}
    }
"""

MEMCPY_AFTER = ir("""
    graph @main(%x: float32[2], %y: float32[2]) -> (%z, %x) {
      %x.dev: float32[2] = MemcpyH2D(%x) {name="h2d_0", domain="aircc", v=1, binding=0}
      %y.dev: float32[2] = MemcpyH2D(%y) {name="h2d_1", domain="aircc", v=1, binding=1}
      %z: float32[2] = Add(%x.dev, %y.dev) {name="add", v=14}
      MemcpyD2H(%z) {name="d2h_0", domain="aircc", v=1, binding=0}
      MemcpyD2H(%x.dev) {name="d2h_1", domain="aircc", v=1, binding=1}
    }
""")


def test_insert_memcpy_copies_inputs_in_and_outputs_out_by_binding():
    """Readers read the device copies; an input that is also an output is copied out from
    its device copy."""
    after, ctx = run_pass("insert-memcpy", MEMCPY_BEFORE)
    assert after == MEMCPY_AFTER
    assert ctx.stats == {}


# ----------------------------------------------------------------------- assign-streams
DIAMOND = """
    graph @main(%x: float32[2,4]) -> (%y){3} {{
      %r: float32[2,4] = Relu(%x) {{name="stem", v=14}}{0}
      %a: float32[2,4] = Tanh(%r) {{name="a", v=13}}{0}
      %b: float32[2,4] = Sigmoid(%r) {{name="b", v=13}}{1}
      %c: float32[2,4] = Neg(%r) {{name="c", v=13}}{2}
      %y: float32[2,4] = Sum(%a, %b, %c) {{name="sum", v=13}}{0}
    }}
"""
STREAMS_BEFORE = DIAMOND.format("", "", "", "")
STREAMS_AFTER = ir(DIAMOND.format(" [stream=0]", " [stream=1]", " [stream=2]", " [streams=3]"))


def test_assign_streams_puts_branches_on_their_own_streams():
    """With no size threshold the stem's chain continues on stream 0, the two other
    branches open streams 1 and 2, and the Sum continues a chain (the busiest: 0)."""
    graph, ctx = run_pass_graph("assign-streams", STREAMS_BEFORE, min_branch_bytes=0,
                                target=numpy_target())   # kernels of one core: worth streams
    assert print_graph(graph) == STREAMS_AFTER
    assert graph.meta["streams"] == 3
    assert ctx.stats == {}


def test_assign_streams_keeps_small_branches_and_a_one_stream_cap_on_stream_0():
    single = ir(DIAMOND.format(" [stream=0]", " [stream=0]", " [stream=0]", " [streams=1]"))
    after, _ = run_pass("assign-streams", STREAMS_BEFORE)          # 32-byte branches: too small
    assert after == single
    after, _ = run_pass("assign-streams", STREAMS_BEFORE, streams=1, min_branch_bytes=0)
    assert after == single


# ----------------------------------------------------------------------- insert-events
EVENTS_AFTER = ir("""
    graph @main(%x: float32[2,4]) -> (%y) [streams=3, events=4] {
      %r: float32[2,4] = Relu(%x) {name="stem", v=14} [stream=0]
      EventRecord() {name="record_e0", domain="aircc", v=1, dst="b", event=0, src="stem"} [stream=0]
      EventRecord() {name="record_e1", domain="aircc", v=1, dst="c", event=1, src="stem"} [stream=0]
      %a: float32[2,4] = Tanh(%r) {name="a", v=13} [stream=0]
      EventWait() {name="wait_e0", domain="aircc", v=1, dst="b", event=0, src="stem"} [stream=1]
      %b: float32[2,4] = Sigmoid(%r) {name="b", v=13} [stream=1]
      EventRecord() {name="record_e2", domain="aircc", v=1, dst="sum", event=2, src="b"} [stream=1]
      EventWait() {name="wait_e1", domain="aircc", v=1, dst="c", event=1, src="stem"} [stream=2]
      %c: float32[2,4] = Neg(%r) {name="c", v=13} [stream=2]
      EventRecord() {name="record_e3", domain="aircc", v=1, dst="sum", event=3, src="c"} [stream=2]
      EventWait() {name="wait_e2", domain="aircc", v=1, dst="sum", event=2, src="b"} [stream=0]
      EventWait() {name="wait_e3", domain="aircc", v=1, dst="sum", event=3, src="c"} [stream=0]
      %y: float32[2,4] = Sum(%a, %b, %c) {name="sum", v=13} [stream=0]
    }
""")


def test_insert_events_pairs_a_record_and_a_wait_per_cross_stream_edge():
    """Stem -> b and stem -> c cross streams, as do b -> sum and c -> sum; stem -> a and
    a -> sum stay on stream 0.  Events are numbered in recording order."""
    graph, ctx = run_pass_graph("insert-events", STREAMS_AFTER)
    assert print_graph(graph) == EVENTS_AFTER
    assert graph.meta["events"] == 4
    assert ctx.stats == {}


def test_insert_events_prunes_a_wait_an_earlier_wait_implies():
    """a (stream 1) waits on the stem; d (stream 2) reads a and the stem's result, and its
    wait on a covers the stem too: the stem -> d edge needs no event of its own."""
    before = """
        graph @main(%x: float32[2]) -> (%y) [streams=3] {
          %r: float32[2] = Relu(%x) {name="stem", v=14} [stream=0]
          %a: float32[2] = Neg(%r) {name="a", v=13} [stream=1]
          %y: float32[2] = Add(%a, %r) {name="d", v=14} [stream=2]
        }
    """
    after, _ = run_pass("insert-events", before)
    assert after == ir("""
        graph @main(%x: float32[2]) -> (%y) [streams=3, events=2] {
          %r: float32[2] = Relu(%x) {name="stem", v=14} [stream=0]
          EventRecord() {name="record_e0", domain="aircc", v=1, dst="a", event=0, src="stem"} [stream=0]
          EventWait() {name="wait_e0", domain="aircc", v=1, dst="a", event=0, src="stem"} [stream=1]
          %a: float32[2] = Neg(%r) {name="a", v=13} [stream=1]
          EventRecord() {name="record_e1", domain="aircc", v=1, dst="d", event=1, src="a"} [stream=1]
          EventWait() {name="wait_e1", domain="aircc", v=1, dst="d", event=1, src="a"} [stream=2]
          %y: float32[2] = Add(%a, %r) {name="d", v=14} [stream=2]
        }
    """)


# ----------------------------------------------------------------------- place-host-ops
PLACE_BEFORE = """
    graph @main(%x: float32[?N,4]) -> (%y, %z) {
      const %i0: int64[1] = dense[0]
      const %minus1: int64[1] = dense[-1]
      %s: int64[2] = Shape(%x) {name="shape", v=15}
      %g: int64[1] = Gather(%s, %i0) {name="gather", v=13, axis=0}
      %tgt: int64[2] = Concat(%g, %minus1) {name="concat", v=13, axis=0}
      %y: float32[?R0,?R1] = Reshape(%x, %tgt) {name="reshape", v=14}
      %f: float32[1] = Cast(%g) {name="cast", v=13, to=1}
      %z: float32[?N,4] = Mul(%x, %f) {name="mul", v=14}
    }
"""

PLACE_AFTER = ir("""
    graph @main(%x: float32[?N,4]) -> (%y, %z) [host_ops=4] {
      const %i0: int64[1] = dense[0]
      const %minus1: int64[1] = dense[-1]
      %s: int64[2] = Shape(%x) {name="shape", v=15} [placement="host"]
      %g: int64[1] = Gather(%s, %i0) {name="gather", v=13, axis=0} [placement="host"]
      %tgt: int64[2] = Concat(%g, %minus1) {name="concat", v=13, axis=0} [placement="host"]
      %y: float32[?R0,?R1] = Reshape(%x, %tgt) {name="reshape", v=14} [placement="device"]
      %f: float32[1] = Cast(%g) {name="cast", v=13, to=1} [placement="host"]
      %f.dev: float32[1] = MemcpyH2D(%f) {name="h2d_f", domain="aircc", v=1, from_host=1} [placement="device"]
      %z: float32[?N,4] = Mul(%x, %f.dev) {name="mul", v=14} [placement="device"]
    }
""")


def test_place_host_ops_runs_shape_arithmetic_on_the_host():
    """Shape always runs on the host, and so does what reads only host values and
    constants and makes a small result; the Reshape reads its target on the host (no
    copy), the Mul reads the Cast's result as data (one copy to the device)."""
    graph, ctx = run_pass_graph("place-host-ops", PLACE_BEFORE)
    assert print_graph(graph) == PLACE_AFTER
    assert graph.meta["host_ops"] == 4
    assert ctx.stats == {}


# ----------------------------------------------------------------------- schedule-device-nodes
DEVICE_BEFORE = """
    graph @main(%x: float32[?N,4]) -> (%y) {
      const %i0: int64[1] = dense[0]
      const %minus1: int64[1] = dense[-1]
      %s: int64[2] = Shape(%x) {name="shape", v=15} [placement="host"]
      %g: int64[1] = Gather(%s, %i0) {name="gather", v=13, axis=0} [placement="host"]
      %tgt: int64[2] = Concat(%g, %minus1) {name="concat", v=13, axis=0} [placement="host"]
      %a: float32[?N,4] = Relu(%x) {name="relu", v=14} [placement="device"]
      %b: float32[?N,4] = Neg(%x) {name="neg", v=13} [placement="device"]
      %c: float32[?N,4] = Add(%a, %b) {name="add", v=14} [placement="device"]
      %y: float32[?R0,?R1] = Reshape(%c, %tgt) {name="reshape", v=14} [placement="device"]
    }
"""

DEVICE_AFTER = ir("""
    graph @main(%x: float32[?N,4]) -> (%y) [streams=2, events=1] {
      const %i0: int64[1] = dense[0]
      const %minus1: int64[1] = dense[-1]
      %s: int64[2] = Shape(%x) {name="shape", v=15} [placement="host"]
      %g: int64[1] = Gather(%s, %i0) {name="gather", v=13, axis=0} [placement="host"]
      %tgt: int64[2] = Concat(%g, %minus1) {name="concat", v=13, axis=0} [placement="host"]
      %a: float32[?N,4] = Relu(%x) {name="relu", v=14} [placement="device", stream=0]
      %b: float32[?N,4] = Neg(%x) {name="neg", v=13} [placement="device", stream=1]
      EventRecord() {name="record_e0", domain="aircc", v=1, dst="add", event=0, src="neg"} [stream=1]
      EventWait() {name="wait_e0", domain="aircc", v=1, dst="add", event=0, src="neg"} [stream=0]
      %c: float32[?N,4] = Add(%a, %b) {name="add", v=14} [placement="device", stream=0]
      %y: float32[?R0,?R1] = Reshape(%c, %tgt) {name="reshape", v=14} [placement="device", stream=0]
    }
""")


def test_schedule_device_nodes_streams_and_events_over_device_nodes_only():
    """The host nodes keep their places and get no stream; the two device branches get a
    stream each and one event where they join."""
    graph, ctx = run_pass_graph("schedule-device-nodes", DEVICE_BEFORE, min_branch_bytes=0)
    assert print_graph(graph) == DEVICE_AFTER
    assert (graph.meta["streams"], graph.meta["events"]) == (2, 1)
    assert ctx.stats == {}


# ----------------------------------------------------------------------- schedule-regions
REGIONS_BEFORE = """
    graph @main(%x: float32[2,4], %c: bool[]) -> (%y) [streams=1, events=2] {
      %y: float32[2,4] = If(%c) {name="if", v=16} [placement="device", stream=0]
        graph @then_branch() -> (%t) as then_branch {
          %p: float32[2,4] = Relu(%x) {name="relu", v=14}
          %q: float32[2,4] = Neg(%x) {name="neg", v=13}
          %t: float32[2,4] = Add(%p, %q) {name="add", v=14}
        }
        graph @else_branch() -> (%e) as else_branch {
          %e: float32[2,4] = Abs(%x) {name="abs", v=13}
        }
    }
"""

REGIONS_AFTER = ir("""
    graph @main(%x: float32[2,4], %c: bool[]) -> (%y) [streams=2, events=3, host_ops=0] {
      %y: float32[2,4] = If(%c) {name="if", v=16} [placement="device", stream=0]
        graph @then_branch() -> (%t) as then_branch [streams=2, events=1, host_ops=0] {
          %p: float32[2,4] = Relu(%x) {name="relu", v=14} [placement="device", stream=0]
          %q: float32[2,4] = Neg(%x) {name="neg", v=13} [placement="device", stream=1]
          EventRecord() {name="record_e0_if", domain="aircc", v=1, dst="add", event=2, src="neg"} [stream=1]
          EventWait() {name="wait_e0_if", domain="aircc", v=1, dst="add", event=2, src="neg"} [stream=0]
          %t: float32[2,4] = Add(%p, %q) {name="add", v=14} [placement="device", stream=0]
        }
        graph @else_branch() -> (%e) as else_branch [streams=1, events=0, host_ops=0] {
          %e: float32[2,4] = Abs(%x) {name="abs", v=13} [placement="device", stream=0]
        }
    }
""")


def test_schedule_regions_schedules_bodies_with_event_ids_after_the_models():
    """The main graph used events 0 and 1: the then branch's one event is 2, named after
    its If; the model now has three events and two streams."""
    graph, ctx = run_pass_graph("schedule-regions", REGIONS_BEFORE, min_branch_bytes=0)
    assert print_graph(graph) == REGIONS_AFTER
    assert (graph.meta["streams"], graph.meta["events"]) == (2, 3)
    assert ctx.stats == {}


LOOP_REGION_BEFORE = """
    graph @main(%M: int64[], %x: float32[2]) -> (%y) {
      %y: float32[2] = Loop(%M, %none, %x) {name="loop", v=16} [placement="device", stream=0]
        graph @body(%i: int64[], %cond: bool[], %h: float32[2]) -> (%cond_out, %h_out) as body {
          %cond_out: bool[] = Identity(%cond) {name="keep", v=16}
          %f: float32[] = Cast(%i) {name="cast", v=13, to=1}
          %h_out: float32[2] = Add(%h, %f) {name="add", v=14}
        }
    }
"""

LOOP_REGION_AFTER = ir("""
    graph @main(%M: int64[], %x: float32[2]) -> (%y) [streams=1, events=0, host_ops=2] {
      %y: float32[2] = Loop(%M, %none, %x) {name="loop", v=16} [placement="device", stream=0]
        graph @body(%i: int64[], %cond: bool[], %h: float32[2]) -> (%cond_out, %h_out) as body [streams=1, events=0, host_ops=2] {
          %cond_out: bool[] = Identity(%cond) {name="keep", v=16} [placement="host"]
          %f: float32[] = Cast(%i) {name="cast", v=13, to=1} [placement="host"]
          %f.dev: float32[] = MemcpyH2D(%f) {name="h2d_f", domain="aircc", v=1, from_host=1} [placement="device", stream=0]
          %h_out: float32[2] = Add(%h, %f.dev) {name="add", v=14} [placement="device", stream=0]
        }
    }
""")


def test_schedule_regions_keeps_a_loops_iteration_and_condition_on_the_host():
    """The iteration number and the condition are host values: what reads only them runs
    on the host, and the Add that reads the Cast's result as data gets a copy."""
    after, ctx = run_pass("schedule-regions", LOOP_REGION_BEFORE)
    assert after == LOOP_REGION_AFTER
    assert ctx.stats == {}

"""The IR text form of control flow: If and Loop bodies print nested under their node,
each with the attribute it came from, and read back to the same graph."""
from __future__ import annotations

import numpy as np

from aircc.compiler.frontend.onnx_import import import_onnx
from aircc.compiler.ir.graph import Graph, Node, TensorType
from aircc.compiler.ir.parser import parse_graph
from aircc.compiler.ir.printer import print_graph
from aircc.compiler.passes.control_flow import region
from aircc.compiler.passes.pipeline import run_pipeline
from graphs import loop_if_model
from ir_cases import ir


def test_if_and_loop_round_trip_with_their_region_attributes():
    graph = run_pipeline(import_onnx(loop_if_model(two_branches=True)), ["infer-shapes"])
    text = print_graph(graph)
    assert "dense<sha1:" in text            # W and W2 print as digests: read from resources
    parsed = parse_graph(text, dict(graph.constants))
    assert print_graph(parsed) == text

    loop, if_ = parsed.node("Loop_0"), parsed.node("If_3")
    assert [r.meta["attribute"] for r in loop.regions] == ["body"]
    assert sorted(r.meta["attribute"] for r in if_.regions) == ["else_branch", "then_branch"]
    assert [n.op for n in region(if_, "then_branch").nodes] == ["Add"]
    assert [n.op for n in region(if_, "else_branch").nodes] == ["Neg"]
    body = region(loop, "body")
    assert body.inputs == ["i", "cond_in", "h_in"] and body.outputs == ["cond_out", "h_out"]
    assert body.types["h_in"] == graph.node("Loop_0").regions[0].types["h_in"]
    for name, arr in graph.constants.items():
        np.testing.assert_array_equal(parsed.constants[name], arr)


NESTED = ir("""
    graph @main(%c: bool[], %M: int64[], %x: float32[2]) -> (%y) {
      const %k: float32[2] = dense[0.5,-1.0]
      %y: float32[2] = If(%c) {name="if", v=16} [stream=0]
        graph @then_branch() -> (%t) as then_branch {
          %t: float32[2] = Loop(%M, %none, %x) {name="loop", v=16}
            graph @body(%i: int64[], %cond: bool[], %h: float32[2]) -> (%cond, %h_out) as body {
              %h_out: float32[2] = Mul(%h, %k) {name="mul", v=14}
            }
        }
        graph @else_branch() -> (%x) as else_branch {
        }
    }
""")


def test_a_loop_inside_an_if_branch_round_trips():
    graph = parse_graph(NESTED)
    assert print_graph(graph) == NESTED
    then_b = region(graph.node("if"), "then_branch")
    assert region(then_b.node("loop"), "body").meta["attribute"] == "body"
    assert region(graph.node("if"), "else_branch").outputs == ["x"]
    assert graph.node("if").meta == {"stream": 0}


def test_awkward_values_names_and_facts_round_trip():
    """Infinite and NaN constants (attention masks), a value named ``none`` (which must not
    read back as an omitted input), a region name with a dash, an attribute tensor of more
    than 8 elements, and the schedule's facts all read back as they were."""
    g = Graph(name="then-branch", inputs=["none"], outputs=["y"],
              types={"none": TensorType("float32", (3,)), "y": TensorType("float32", (3,)),
                     "m": TensorType("float32", (3,))},
              constants={"m": np.array([-np.inf, np.nan, 1e-5], np.float32)})
    g.nodes.append(Node("Add", ["none", "m"], ["y"], {"t": np.arange(20, dtype=np.int64)},
                        name="a", version=13))
    g.meta.update(streams=2, events=1)
    text = print_graph(g)
    back = parse_graph(text)
    assert print_graph(back) == text
    assert back.name == "then-branch" and back.inputs == ["none"] and back.nodes[0].inputs == ["none", "m"]
    assert (back.meta["streams"], back.meta["events"]) == (2, 1)
    m = back.constants["m"]
    assert np.isneginf(m[0]) and np.isnan(m[1]) and m[2] == np.float32(1e-5)
    np.testing.assert_array_equal(back.nodes[0].attrs["t"], np.arange(20))

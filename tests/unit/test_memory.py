"""The static memory planner."""
from __future__ import annotations

import pytest

from aircc.compiler.driver import CompileOptions, compile_model
from aircc.compiler.ir.graph import Graph, Node, TensorType
from aircc.compiler.memory.lower_bound import heaviest_antichain, peak_live_bytes
from aircc.compiler.memory.planner import STRATEGIES, Buffer, conflicts, place, plan_memory
from aircc.compiler.schedule.happens_before import HappensBefore
from aircc.errors import CompileOptionError
from graphs import concat_model, diamond, model, tensor
from schedule_check import overlapping_live_buffers
from onnx import helper


def _chain(n: int, size: int, streams: list[int] | None = None) -> Graph:
    g = Graph()
    prev = []
    for k in range(n):
        g.nodes.append(Node("Relu", prev, [f"v{k}"], name=f"n{k}",
                            meta={"stream": (streams or [0] * n)[k]}))
        g.types[f"v{k}"] = TensorType("uint8", (size,))
        prev = [f"v{k}"]
    return g


def test_chain_on_one_stream_ping_pongs_two_buffers():
    plan = plan_memory(_chain(6, 1024))
    assert plan.arena_bytes == 2048 == plan.lower_bound_bytes
    assert plan.no_reuse_bytes == 6 * 1024
    offsets = [plan.buffers[f"v{k}"].offset for k in range(6)]
    assert all(offsets[k] != offsets[k + 1] for k in range(5))


def test_one_stream_plan_builds_no_happens_before_closure(monkeypatch):
    # the closure is a bitset per task (quadratic in the task count); one stream's order
    # is its schedule, so the plan must not need it
    import aircc.compiler.memory.planner as planner

    def refuse(graph):
        raise AssertionError("HappensBefore built for a one-stream graph")

    monkeypatch.setattr(planner, "HappensBefore", refuse)
    plan = plan_memory(_chain(6, 1024))
    assert plan.arena_bytes == 2048 == plan.lower_bound_bytes
    with pytest.raises(AssertionError, match="one-stream"):
        plan_memory(_chain(4, 1024, streams=[0, 1, 0, 1]))    # two streams: it is needed


def test_no_reuse_across_streams_without_an_event():
    # same chain but every node on its own stream and no events: nothing is ordered
    g = _chain(4, 1024, streams=[0, 1, 2, 3])
    plan = plan_memory(g)
    offs = sorted(b.offset for b in plan.buffers.values())
    assert offs == [0, 1024, 2048, 3072]
    assert plan.arena_bytes == 4096


def test_reuse_across_streams_along_an_event():
    g = _chain(3, 1024, streams=[0, 0, 1])
    # v1's reader n2 is on stream 1; order n1 -> n2 with an event, then n3 on stream 0 after a wait
    g.nodes.insert(2, Node("EventRecord", [], [], {"event": 0}, name="r0", meta={"stream": 0}))
    g.nodes.insert(3, Node("EventWait", [], [], {"event": 0}, name="w0", meta={"stream": 1}))
    g.nodes.append(Node("EventRecord", [], [], {"event": 1}, name="r1", meta={"stream": 1}))
    g.nodes.append(Node("EventWait", [], [], {"event": 1}, name="w1", meta={"stream": 0}))
    g.nodes.append(Node("Relu", ["v2"], ["v3"], name="n3", meta={"stream": 0}))
    g.types["v3"] = TensorType("uint8", (1024,))
    hb = HappensBefore(g)
    idx = hb.index
    assert hb.before(idx["n0"], idx["n2"]) and hb.before(idx["n2"], idx["n3"])
    assert not hb.before(idx["n2"], idx["n0"])
    plan = plan_memory(g)
    assert plan.buffers["v3"].offset == plan.buffers["v1"].offset   # reuse is safe here
    assert plan.arena_bytes == 2048


def _random_streams_graph(seed: int, n: int = 40, streams: int = 3) -> Graph:
    """n Relu tasks over ``streams`` streams, each reading one or two earlier values,
    with an event from a reader's producer where the streams differ (as insert-events
    does), and some events recorded but never waited on."""
    import random

    rnd = random.Random(seed)
    g = Graph()
    event = 0
    for k in range(n):
        s = rnd.randrange(streams)
        ins = sorted({f"v{rnd.randrange(k)}" for _ in range(rnd.randint(1, 2))}) if k else []
        for v in ins:
            prod = next(x for x in g.nodes if v in x.outputs)
            if prod.meta["stream"] != s and rnd.random() < 0.7:
                g.nodes.append(Node("EventRecord", [], [], {"event": event}, name=f"r{event}",
                                    meta={"stream": prod.meta["stream"]}))
                g.nodes.append(Node("EventWait", [], [], {"event": event}, name=f"w{event}",
                                    meta={"stream": s}))
                event += 1
        g.nodes.append(Node("Relu", ins, [f"v{k}"], name=f"n{k}", meta={"stream": s}))
        g.types[f"v{k}"] = TensorType("uint8", (rnd.choice([64, 128, 256]),))
    return g


def _reachability(g: Graph) -> set[tuple[int, int]]:
    """Happens-before by brute force: paths along stream order and record -> wait edges."""
    import networkx as nx

    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(g.nodes)))
    last, record = {}, {}
    for k, n in enumerate(g.nodes):
        s = n.meta["stream"]
        if s in last:
            dag.add_edge(last[s], k)
        last[s] = k
        if n.op == "EventRecord":
            record[n.attrs["event"]] = k
        if n.op == "EventWait":
            dag.add_edge(record[n.attrs["event"]], k)
    return {(a, b) for a in dag for b in nx.descendants(dag, a)}


@pytest.mark.parametrize("seed", range(6))
def test_vector_clocks_and_conflicts_match_brute_force(seed):
    import itertools

    from aircc.compiler.memory.planner import collect_buffers

    g = _random_streams_graph(seed)
    hb, pairs = HappensBefore(g), _reachability(g)
    n = len(g.nodes)
    assert {(a, b) for a in range(n) for b in range(n) if hb.before(a, b)} == pairs
    bufs = [b for b in collect_buffers(g) if b.size]

    def done_before(a, c):
        return all((t, w) in pairs for t in [*a.all_writers, *a.readers] for w in c.all_writers)

    expect = {b.name: sorted(c.name for c in bufs if c is not b
                             and not done_before(b, c) and not done_before(c, b)) for b in bufs}
    clashes = conflicts(bufs, hb, one_stream=False)
    assert {k: sorted(c.name for c in v) for k, v in clashes.items()} == expect
    # the heaviest antichain against every subset of the first 12 buffers written
    few = sorted(bufs, key=lambda b: b.writer)[:12]
    best = max(sum(b.size for b in sub) for r in range(len(few) + 1)
               for sub in itertools.combinations(few, r)
               if all(c.name in expect[b.name] for b, c in itertools.combinations(sub, 2)))
    few_clashes = conflicts(few, hb, one_stream=False)
    assert heaviest_antichain(few, few_clashes) == best
    plan = plan_memory(g)
    assert plan.lower_bound_bytes <= plan.arena_bytes


def test_greedy_by_size_fills_the_smallest_fitting_gap():
    hb_graph = _chain(1, 1)
    hb = HappensBefore(hb_graph)
    # all buffers written by task 0 and never ordered: they all conflict
    bufs = [Buffer("a", 300, 0), Buffer("b", 200, 0), Buffer("c", 100, 0)]
    assert place(bufs, hb, alignment=1) == 600
    assert sorted(b.offset for b in bufs) == [0, 300, 500]


def test_lower_bound_is_peak_of_live_bytes_on_one_stream():
    bufs = [Buffer("a", 10, 0, [2]), Buffer("b", 20, 1, [3]), Buffer("c", 5, 3, [4])]
    assert peak_live_bytes(bufs) == 30   # a and b live together at tasks 1..2
    g = _chain(5, 1)
    assert heaviest_antichain(bufs, conflicts(bufs, HappensBefore(g), one_stream=False)) == 30


def test_lower_bound_counts_buffers_that_other_streams_can_keep_alive():
    # four unordered streams: the linear sweep sees 2 buffers live, but all four can be
    g = _chain(4, 1024, streams=[0, 1, 2, 3])
    plan = plan_memory(g)
    assert peak_live_bytes(list(plan.buffers.values())) == 2048
    assert plan.lower_bound_bytes == 4096 == plan.arena_bytes


def test_every_strategy_gives_a_valid_plan_and_the_best_is_kept():
    g = _chain(6, 1024)
    hb = HappensBefore(g)
    from aircc.compiler.memory.planner import collect_buffers
    sizes = {}
    for name in STRATEGIES:
        bufs = collect_buffers(g)
        sizes[name] = place(bufs, hb, 64, name)
        assert sizes[name] >= 2048
    plan = plan_memory(g)
    assert plan.arena_bytes == min(sizes.values()) and plan.strategy in STRATEGIES


def test_static_mode_needs_static_shapes():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", ["N", 4])], [tensor("y", ["N", 4])])
    with pytest.raises(CompileOptionError, match="--input-shape"):
        compile_model(m, CompileOptions(mode="static"))
    assert compile_model(m, CompileOptions(input_shapes={"x": [2, 4]})).report.mode == "static"


def test_plan_of_multistream_sample_has_no_live_overlap():
    compiled = compile_model(diamond(width=1000, branches=4),
                             CompileOptions(min_branch_bytes=0, split_matrix_branches=True))
    s = compiled.om.sections
    assert s["tasks"]["streams"] == 4
    assert overlapping_live_buffers(s["tasks"], s["memory_plan"]) == []


def test_one_stream_conflicts_by_sweep_equal_the_happens_before_test():
    from aircc.compiler.memory.planner import collect_buffers, conflicts
    from testdata import light_path
    import aircc.compiler.stages as driver

    seen = {}
    original = driver.plan_memory

    def spy(graph, alignment=64):
        seen["graph"] = graph
        return original(graph, alignment)

    driver.plan_memory = spy
    try:
        compile_model(light_path("squeezenet"), CompileOptions(streams=1))
    finally:
        driver.plan_memory = original
    g = seen["graph"]
    buffers = collect_buffers(g)
    hb = HappensBefore(g)
    sweep = {k: sorted(b.name for b in v) for k, v in conflicts(buffers, hb, True).items()}
    exact = {k: sorted(b.name for b in v) for k, v in conflicts(buffers, hb, False).items()}
    assert sweep == exact and sum(map(len, sweep.values())) > 0


def test_concat_with_strided_parts_copies():
    compiled = compile_model(concat_model(batch=2), CompileOptions())
    plan = compiled.om.sections["memory_plan"]
    assert plan["aliases"] == [] and compiled.report.memory.concats_in_place == 0


def test_alias_group_is_one_buffer_with_every_writer():
    compiled = compile_model(concat_model(batch=1), CompileOptions(streams=1))
    plan = compiled.om.sections["memory_plan"]
    root = next(b for b in plan["buffers"] if b["name"] == "cat")
    assert not any(b["name"] in "abcd" for b in plan["buffers"])   # placed as part of "cat"
    assert len(root["writers"]) == 5                               # four producers + the Concat
    assert root["first_task"] == min(root["writers"]) < max(root["writers"])

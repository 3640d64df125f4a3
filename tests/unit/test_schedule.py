"""Stream assignment, event insertion and pruning."""
from __future__ import annotations

import pytest

import aircc

from aircc.compiler.context import CompileContext
from aircc.compiler.driver import CompileOptions, compile_model
from aircc.compiler.frontend.onnx_import import import_onnx
from aircc.compiler.ir.graph import Graph, Node, TensorType
from aircc.compiler.ir.verifier import verify
from aircc.compiler.passes.pipeline import run_pipeline
from aircc.compiler.schedule.events import insert_events
from aircc.compiler.schedule.memcpy import insert_memcpy
from aircc.compiler.schedule.streams import assign_streams
from aircc.errors import CompileOptionError
from testdata import light_path
from graphs import diamond
from schedule_check import data_dependencies, unordered_dependencies
from testdata import numpy_target
from aircc.ops.backend import KernelBackend


UNFUSED = ["fold-constants", "infer-shapes", "remove-identity", "dce", "infer-shapes"]


def _ctx(**options) -> CompileContext:
    """For the numpy backend, whose vector kernels run on one core: branches are worth
    streams there (a backend whose kernels span the cores keeps them on one)."""
    return CompileContext(CompileOptions(**{"target": numpy_target(), **options}))


def _scheduled(source, streams=None):
    g = run_pipeline(import_onnx(source), UNFUSED)
    ctx = _ctx(streams=streams, min_branch_bytes=0)
    g = insert_events(assign_streams(insert_memcpy(g, ctx), ctx), ctx)
    verify(g)
    return g


def test_memcpy_nodes_bind_inputs_and_outputs():
    g = run_pipeline(import_onnx(diamond()))
    insert_memcpy(g)
    verify(g)
    assert g.nodes[0].op == "MemcpyH2D" and g.nodes[0].attrs["binding"] == 0
    assert g.nodes[-1].op == "MemcpyD2H" and g.nodes[-1].inputs == ["y"]
    assert all("x" not in n.inputs for n in g.nodes[1:])   # kernels read the device copy


def test_parallel_branches_get_their_own_streams():
    g = _scheduled(diamond(branches=3))
    streams = {n.name: n.meta["stream"] for n in g.nodes}
    assert g.meta["streams"] == 3
    assert len({streams["mul0"], streams["mul1"], streams["mul2"]}) == 3
    for b in range(3):   # a chain stays on one stream
        assert streams[f"mul{b}"] == streams[f"tanh{b}"]
    assert sorted(set(streams.values())) == [0, 1, 2]   # dense ids


def test_gemm_branches_stay_with_a_predecessor_unless_asked():
    """The matrix engine spans every core: a Conv-led branch on a stream of its own only
    queues for it, so by default only the MaxPool branch of the sample gets a stream."""
    from testdata import SAMPLES

    def ops_per_stream(**kw):
        om = aircc.compile(f"{SAMPLES}/branches.onnx", min_branch_bytes=0, **kw).om
        return [[t["op"] for t in lst if t["kind"] == "kernel"] for lst in om.sections["tasks"]["lists"]]

    default = ops_per_stream(target=numpy_target())
    assert len(default) == 2 and default[1] == ["MaxPool"] and default[0].count("Conv") == 5
    split = ops_per_stream(split_matrix_branches=True, target=numpy_target())
    assert len(split) == 3 and sum(lst.count("Conv") > 0 for lst in split) == 2


def test_a_backend_whose_kernels_span_the_cores_keeps_branches_on_one_stream():
    """oneDNN spreads every op over every core: a branch on a second stream would only
    queue for them (and two OpenMP teams slow each other), unless asked."""
    g = run_pipeline(import_onnx(diamond(width=65536, branches=3)))
    spanning = CompileContext(CompileOptions(min_branch_bytes=0))
    spanning._backend = KernelBackend("spanning", "test", ("avx2",), base="numpy",
                                      kernels_span_cores=True)
    assign_streams(insert_memcpy(g, spanning), spanning)
    assert g.meta["streams"] == 1
    g = run_pipeline(import_onnx(diamond(width=65536, branches=3)))
    spanning.options = CompileOptions(min_branch_bytes=0, split_matrix_branches=True)
    assign_streams(insert_memcpy(g, spanning), spanning)
    assert g.meta["streams"] == 3


def test_stream_cap_and_single_stream():
    assert _scheduled(diamond(branches=3), streams=2).meta["streams"] == 2
    g = _scheduled(diamond(branches=3), streams=1)
    assert g.meta["streams"] == 1 and g.meta["events"] == 0
    assert not any(n.op.startswith("Event") for n in g.nodes)
    with pytest.raises(CompileOptionError):
        assign_streams(run_pipeline(import_onnx(diamond())), _ctx(streams=0))


def test_events_pair_record_before_wait_and_are_dense():
    g = _scheduled(diamond(branches=3))
    records = [n for n in g.nodes if n.op == "EventRecord"]
    waits = [n for n in g.nodes if n.op == "EventWait"]
    ids = sorted(n.attrs["event"] for n in records)
    assert ids == list(range(g.meta["events"])) == sorted(n.attrs["event"] for n in waits)
    pos = {n.name: k for k, n in enumerate(g.nodes)}
    for r in records:
        w = next(w for w in waits if w.attrs["event"] == r.attrs["event"])
        assert pos[r.name] < pos[w.name]
        assert r.meta["stream"] != w.meta["stream"]
        # the record sits right after its producer, the wait right before its consumer
        assert g.nodes[pos[r.name] - 1].name == r.attrs["src"] or g.nodes[pos[r.name] - 1].op == "EventRecord"
        assert g.nodes[pos[w.name] + 1].name == w.attrs["dst"] or g.nodes[pos[w.name] + 1].op == "EventWait"


def _hand_graph(edges: list[tuple[str, str]], streams: dict[str, int]) -> Graph:
    """Nodes named by ``streams`` (in that order), one value per node, data edges as given."""
    g = Graph(outputs=[])
    for name in streams:
        ins = [f"v_{a}" for a, b in edges if b == name]
        g.nodes.append(Node("Sum", ins or [], [f"v_{name}"], name=name, version=13,
                            meta={"stream": streams[name]}))
        g.types[f"v_{name}"] = TensorType("float32", (1,))
    g.meta["streams"] = max(streams.values()) + 1
    return g


def test_pruning_drops_waits_implied_transitively():
    # a0 -> a1 on stream 0; b0 on stream 1 needs a0; c0 on stream 2 needs a0 (via b0's wait? no: directly)
    # and b0.  Waiting for b0 already implies a0, so c0 needs ONE wait, not two.
    g = _hand_graph([("a0", "b0"), ("a0", "c0"), ("b0", "c0"), ("a0", "a1")],
                    {"a0": 0, "a1": 0, "b0": 1, "c0": 2})
    insert_events(g)
    waits = [(n.attrs["src"], n.attrs["dst"]) for n in g.nodes if n.op == "EventWait"]
    assert sorted(waits) == [("a0", "b0"), ("b0", "c0")]


def test_pruning_keeps_only_latest_of_several_waits_on_one_stream():
    g = _hand_graph([("a0", "b0"), ("a1", "b0"), ("a0", "a1")], {"a0": 0, "a1": 0, "b0": 1})
    insert_events(g)
    assert [(n.attrs["src"], n.attrs["dst"]) for n in g.nodes if n.op == "EventWait"] == [("a1", "b0")]


def test_pruning_uses_earlier_waits_of_the_same_stream():
    # b0 waited for a1 already; b1 (later on stream 1) needs a0, which a1 follows on stream 0
    g = _hand_graph([("a0", "a1"), ("a1", "b0"), ("a0", "b1"), ("b0", "b1")],
                    {"a0": 0, "a1": 0, "b0": 1, "b1": 1})
    insert_events(g)
    assert [(n.attrs["src"], n.attrs["dst"]) for n in g.nodes if n.op == "EventWait"] == [("a1", "b0")]


def test_inception_v1_uses_several_streams_and_no_event_is_redundant():
    compiled = compile_model(light_path("inception_v1"), CompileOptions(target=numpy_target()))
    tasks = compiled.om.sections["tasks"]
    assert tasks["streams"] > 1
    assert tasks["events"] > 0
    assert unordered_dependencies(tasks) == []
    cross = [d for d in data_dependencies(tasks)]
    assert cross
    for e in range(tasks["events"]):
        broken = unordered_dependencies(tasks, drop_event=e)
        assert broken, f"event {e} is redundant: every dependency stays ordered without it"


def test_single_stream_inception_has_no_events():
    tasks = compile_model(light_path("inception_v1"), CompileOptions(streams=1)).om.sections["tasks"]
    assert tasks["streams"] == 1 and tasks["events"] == 0
    assert unordered_dependencies(tasks) == []


def test_small_branches_stay_on_one_stream_and_big_ones_split():
    g = run_pipeline(import_onnx(diamond(width=4, branches=3)))
    assign_streams(insert_memcpy(g, _ctx()), _ctx())  # 4 floats per branch: not worth a stream
    assert g.meta["streams"] == 1
    g = run_pipeline(import_onnx(diamond(width=65536, branches=3)))
    assign_streams(insert_memcpy(g, _ctx()), _ctx())  # 512 KiB per branch: one stream each
    assert g.meta["streams"] == 3

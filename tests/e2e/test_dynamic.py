"""Dynamic shape mode: Host Kernel execute graph, tiling cache, host pipeline, gears."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from aircc.compiler.driver import CompileOptions, compile_model
from aircc.errors import CompileOptionError, ConfigError, InputError, KernelError
from aircc.formats import dump_om, load_om
from bert_encoder import build_bert_encoder, make_inputs
from testdata import SAMPLES, light_path, random_feeds
from graphs import model, tensor

SHAPES = [(1, 16), (4, 64), (8, 128), (3, 7)]


@pytest.fixture(scope="module")
def bert():
    proto = build_bert_encoder()
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = aircc.compile(proto, min_branch_bytes=0,   # its branches on several streams
                             split_matrix_branches=True)
    om = load_om(dump_om(compiled.om))         # through real .om bytes
    return proto, session, compiled, om


def _compare(got: dict, expected: list, rtol=1e-3, atol=1e-4):
    assert len(got) == len(expected)
    for g, e in zip(got.values(), expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


def test_auto_mode_picks_dynamic_for_symbolic_inputs_and_static_when_fixed(bert):
    proto, _, compiled, om = bert
    assert compiled.report.mode == "dynamic" and om.mode == "dynamic"
    assert om.sections["model"]["inputs"][0]["shape"] == ["batch", "seq"]
    fixed = aircc.compile(proto, input_shapes={"input_ids": [2, 8], "attention_mask": [2, 8]})
    assert fixed.report.mode == "static"
    with pytest.raises(CompileOptionError, match="--input-shape"):
        aircc.compile(proto, mode="static")
    with pytest.raises(CompileOptionError, match="--mode"):
        aircc.compile(proto, mode="sometimes")


@pytest.mark.parametrize("cores", [1, 3], ids=["sequential", "pipelined"])
def test_bert_one_om_matches_onnxruntime_at_many_shapes(bert, device, cores):
    _, session, _, om = bert
    m = aircc.load(om, device=device, runtime_core_number=cores)
    try:
        for b, s in SHAPES:
            feeds = make_inputs(b, s)
            _compare(m.run(feeds), session.run(None, feeds))
        stats = m.run_stats()
        assert stats.host_ops > 10 and stats.d2h_syncs == 0   # shape math stayed on the host
        assert stats.peak_allocated_bytes > 0
        assert stats.peak_reserved_bytes >= stats.peak_allocated_bytes
    finally:
        m.close()


def test_pipelined_and_sequential_hosts_give_identical_outputs(bert, device):
    _, _, _, om = bert
    seq = aircc.load(om, device=device, runtime_core_number=1)
    pipe = aircc.load(om, device=device, runtime_core_number=3)
    try:
        for b, s in SHAPES:
            feeds = make_inputs(b, s, seed=b * 100 + s)
            a, c = seq.run(feeds), pipe.run(feeds)
            for k in a:
                np.testing.assert_array_equal(a[k], c[k])
    finally:
        seq.close(), pipe.close()


def test_runtime_core_number_comes_from_the_environment(bert, device, aircc_env):
    _, _, _, om = bert
    aircc_env("AIR_RUNTIME_CORE_NUMBER", "1")
    m = aircc.load(om, device=device)
    assert m.run_stats().runtime_core_number == 1
    m.close()
    with pytest.raises(ConfigError, match="AIR_RUNTIME_CORE_NUMBER='2': must be 1 \\(sequential\\) or 3"):
        aircc_env("AIR_RUNTIME_CORE_NUMBER", "2")


def test_tiling_cache_hits_on_repeats_and_a_new_shape_misses_then_hits(bert, device):
    _, _, _, om = bert
    m = aircc.load(om, device=device, replay=False)      # every run goes through the host kernels
    try:
        feeds = make_inputs(2, 24)
        m.run(feeds)
        first = m.run_stats()
        assert first.tiling_cache_misses > 0 and first.tiling_cache_hits == 0
        for _ in range(30):
            m.run(feeds)
        s = m.run_stats()
        repeat_hits = s.tiling_cache_hits
        assert s.tiling_cache_misses == first.tiling_cache_misses       # nothing new missed
        assert s.tiling_cache_hit_rate >= 0.95
        m.run(make_inputs(2, 25))                                           # a new shape misses
        s2 = m.run_stats()
        assert s2.tiling_cache_misses > s.tiling_cache_misses
        m.run(make_inputs(2, 25))                                           # and then hits
        s3 = m.run_stats()
        assert s3.tiling_cache_misses == s2.tiling_cache_misses
        assert s3.tiling_cache_hits > s2.tiling_cache_hits > repeat_hits - 1
    finally:
        m.close()


def test_tiling_cache_is_lru_bounded():
    from aircc.executor.runtime.tiling_cache import TilingCache

    c = TilingCache(capacity=10, evict=3)
    for k in range(10):
        c.get(k, lambda: {"k": k})
    c.get(0, lambda: {})            # 0 becomes most recent
    c.get(10, lambda: {"k": 10})    # full: evicts the 3 least recently used (1, 2, 3)
    assert len(c.entries) == 8 and c.evictions == 3
    assert 0 in c.entries and 1 not in c.entries and 3 not in c.entries and 4 in c.entries
    assert (c.hits, c.misses) == (1, 11)


def test_execute_graph_has_host_kernels_and_frees_every_buffer_once(bert):
    _, _, _, om = bert
    eg = om.sections["exec_graph"]
    kinds = [k["kind"] for k in eg["kernels"]]
    nodes = eg["nodes"]
    for idx, node in enumerate(nodes):
        own = [k["kind"] for k in eg["kernels"] if k.get("node") == idx]
        if node["placement"] == "host":
            assert own in (["host_compute"], ["memcpy_d2h"])
        elif node["op"] not in ("MemcpyH2D", "MemcpyD2H"):
            assert own == ["infer_shape", "tiling", "alloc", "launch"], node["name"]
            assert node["stream"] is not None
    freed = [v for k in eg["kernels"] if k["kind"] == "free" for v in k["values"]]
    assert sorted(freed) == sorted(eg["device_values"])           # each device buffer, once
    position = {}
    for p, k in enumerate(eg["kernels"]):
        if k["kind"] in ("launch", "memcpy_h2d", "memcpy_d2h"):
            for v in nodes[k["node"]]["inputs"]:
                position[v] = p                                    # last launch reading v
        if k["kind"] == "free":
            assert all(position.get(v, -1) < p for v in k["values"])
    assert "event_record" in kinds and "event_wait" in kinds and eg["streams"] > 1


def test_static_model_compiled_dynamic_gives_the_same_outputs(device):
    for path, streams in ((light_path("squeezenet"), None), (light_path("inception_v1"), None),
                          (f"{SAMPLES}/branches.onnx", 1)):
        static = aircc.load(aircc.compile(path, mode="static", streams=streams).om, device=device)
        dynamic = aircc.load(aircc.compile(path, mode="dynamic", streams=streams).om, device=device)
        feeds = random_feeds(static.inputs, seed=3)
        a, b = static.run(feeds), dynamic.run(feeds)
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-6)
        static.close(), dynamic.close()


def test_dynamic_errors_are_clear_and_the_next_run_works(bert, device):
    _, session, _, om = bert
    m = aircc.load(om, device=device)
    try:
        good = make_inputs(2, 8)
        with pytest.raises(InputError, match="int64"):
            m.run({k: v.astype(np.int32) for k, v in good.items()})
        with pytest.raises(InputError, match="dim 'seq' is 8"):
            m.run({"input_ids": good["input_ids"], "attention_mask": good["attention_mask"][:, :5]})
        with pytest.raises(InputError, match="shape"):
            m.run({"input_ids": good["input_ids"][0], "attention_mask": good["attention_mask"]})
        _compare(m.run(good), session.run(None, good))
        # a kernel that fails on the device names its node, and nothing leaks
        before = device.caching_allocator.stats()["allocated_bytes"]
        bad = dict(good, input_ids=np.full_like(good["input_ids"], 10**6))   # out-of-range ids
        with pytest.raises(KernelError, match="Gather"):
            m.run(bad)
        assert device.caching_allocator.stats()["allocated_bytes"] == before
        _compare(m.run(good), session.run(None, good))
    finally:
        m.close()


def test_gears_answer_batches_1_2_4_8_from_one_file(tmp_path, device):
    path = tmp_path / "mlp_gears.om"
    compiled = aircc.compile(f"{SAMPLES}/mlp.onnx", path, dynamic_batch=[1, 2, 4, 8])
    om = load_om(path)
    assert om.sections["gears"]["sizes"] == [1, 2, 4, 8]
    single = aircc.compile(f"{SAMPLES}/mlp.onnx", input_shapes={"input": [4, 784]})
    assert len(om.weights) == len(single.om.weights)          # the gears share their weights
    session = ort.InferenceSession(f"{SAMPLES}/mlp.onnx", providers=["CPUExecutionProvider"])
    m = aircc.load(path, device=device)
    x = np.random.default_rng(0).standard_normal((8, 784)).astype(np.float32)
    for b in (1, 2, 4, 8):
        before = device.stats["host_submissions"]
        y = m.run({"input": x[:b]})["probs"]
        assert device.stats["host_submissions"] - before == 1
        assert y.shape == (b, 10)
        np.testing.assert_allclose(y, session.run(None, {"input": x[:b]})[0], rtol=1e-4, atol=1e-6)
    with pytest.raises(InputError, match="no gear"):
        m.run({"input": x[:3]})
    m.close()
    padded = aircc.load(path, device=device, pad_to_gear=True)
    y3 = padded.run({"input": x[:3]})["probs"]
    np.testing.assert_allclose(y3, session.run(None, {"input": x[:3]})[0], rtol=1e-4, atol=1e-6)
    padded.close()
    assert compiled.report.gears == [1, 2, 4, 8]


def test_gear_options_are_checked():
    with pytest.raises(CompileOptionError, match="batch sizes"):
        aircc.compile(f"{SAMPLES}/mlp.onnx", dynamic_batch=[4])
    m = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2, 3])], [tensor("y", [2, 3])])
    with pytest.raises(CompileOptionError, match="symbolic"):
        compile_model(m, CompileOptions(dynamic_batch=[1, 2]))


def test_replay_runs_a_known_shape_with_one_submission_and_the_same_outputs(bert, device):
    _, session, _, om = bert
    m = aircc.load(om, device=device)
    plain = aircc.load(om, device=device, replay=False)
    try:
        for b, s in [(2, 9), (1, 16), (2, 9)]:
            feeds = make_inputs(b, s, seed=b + s)
            first = m.run(feeds)                               # host kernels, launches recorded
            before = device.stats["host_submissions"]
            again = m.run(feeds)                               # replayed
            assert device.stats["host_submissions"] - before == 1
            for k in first:
                np.testing.assert_array_equal(again[k], first[k])
                np.testing.assert_array_equal(again[k], plain.run(feeds)[k])
            other = make_inputs(b, s, seed=99)                 # same shapes, new values
            _compare(m.run(other), session.run(None, other))
        stats = m.run_stats()
        assert stats.replays >= 4 and stats.replay_shapes == 2
        assert m.last_host_seconds < 0.01
    finally:
        m.close(), plain.close()


def test_models_with_control_flow_do_not_replay(device):
    from graphs import loop_if_model

    m = aircc.load(aircc.compile(loop_if_model(), mode="dynamic").om, device=device)
    feeds = {"M": np.array(3, np.int64), "x": np.ones((2, 8), np.float32)}
    m.run(feeds), m.run(feeds)
    assert m.run_stats().replays == 0          # the host must read the condition each run
    m.close()


def test_replay_memory_never_crosses_streams():
    """The pool behind recorded launches reuses a block only on the stream that freed it."""
    from aircc.executor.device.caching_allocator import CachingAllocator
    from aircc.executor.device.memory import DeviceMemory
    from aircc.executor.device.stream import Stream

    a, b = Stream(0), Stream(1)
    pool = CachingAllocator(DeviceMemory(16 << 20), same_stream_only=True)
    x = pool.malloc(4096, a)
    pool.free(x, [a])
    z = pool.malloc(4096, a)
    assert z.offset == x.offset           # same stream: reused at once
    pool.free(z, [a])
    a.synchronize()                       # the event has run: a normal pool would hand it to b
    y = pool.malloc(4096, b)
    assert not (y.offset < x.offset + x.size and x.offset < y.offset + y.size)
    normal = CachingAllocator(DeviceMemory(16 << 20))
    x2 = normal.malloc(4096, a)
    normal.free(x2, [a])
    a.synchronize()
    assert normal.malloc(4096, b).offset == x2.offset     # the contrast: reused after the event
    a.close(), b.close()


def test_replay_memory_used_by_another_stream_stays_out_of_reach_after_coalescing():
    """A block made on stream a and read on stream b, freed, then merged with a neighbour a
    freed later: a may not take those bytes, even once b's event ran (a replay has no such
    event to wait for)."""
    from aircc.executor.device.caching_allocator import CachingAllocator
    from aircc.executor.device.memory import DeviceMemory
    from aircc.executor.device.stream import Stream

    a, b = Stream(0), Stream(1)
    pool = CachingAllocator(DeviceMemory(16 << 20), same_stream_only=True)
    shared, mine = pool.malloc(8192, a), pool.malloc(8192, a)
    assert mine.offset == shared.offset + 8192          # neighbours in one segment
    pool.free(shared, [a, b])
    b.synchronize()                                       # b's last use has run
    pool.free(mine, [a])                                  # merges with the shared block
    a.synchronize()
    again = pool.malloc(4096, a)
    assert not (again.offset < shared.offset + shared.size and shared.offset < again.offset + 4096)
    a.close(), b.close()


def test_a_two_stream_dynamic_model_gives_the_same_numbers_on_every_replay(device):
    """BERT at (8, 128) with its shapes fixed runs the mask on one stream and the
    embeddings on another: the input ids' block, read across streams, must not be reused
    by the mask's stream in the recorded launches (it was: replays gathered garbage ids)."""
    import onnxruntime as ort

    feeds = make_inputs(8, 128)
    proto = build_bert_encoder()
    c = aircc.compile(proto, mode="dynamic", input_shapes={k: list(v.shape) for k, v in feeds.items()},
                      split_matrix_branches=True)
    m = aircc.load(c.om, device=device)
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for _ in range(4):
        got = m.run(feeds)
        for g, w in zip(got.values(), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    stats = m.run_stats()
    assert stats.replays == 3 and len(m.engine.streams) >= 2
    m.close()


def test_out_of_memory_in_a_dynamic_run_is_clear_and_the_next_run_works():
    from aircc.errors import DeviceOutOfMemoryError
    from aircc.executor.device.device import VirtualDevice

    dev = VirtualDevice(3 << 20)
    for replay in (True, False):
        m = aircc.load(aircc.compile(build_bert_encoder()).om, device=dev, replay=replay)
        small = make_inputs(1, 8)
        expected = m.run(small)
        with pytest.raises(DeviceOutOfMemoryError, match="bytes are available"):
            m.run(make_inputs(8, 128))                 # does not fit in 3 MiB
        for _ in range(2):                             # nothing leaked: runs (and replays) go on
            again = m.run(small)
            for k in expected:
                np.testing.assert_array_equal(again[k], expected[k])
        m.close()
    for s in dev.streams:
        s.synchronize()
    dev.caching_allocator.release_cached()
    assert dev.memory.used == 0                        # every byte came back
    dev.close()


def test_reshapes_are_views_of_their_input_block_in_dynamic_mode():
    """A Reshape (or Flatten) in dynamic mode shares its input's device block: no launch,
    no copy.  The block lives until every name on it is freed (the input is read after
    the reshape, and an alias of an alias is a graph output), results match onnxruntime
    on several streams and shapes, with and without replay, and every byte comes back."""
    from aircc.executor.device.device import VirtualDevice

    from graphs import const

    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Reshape", ["a", "shape"], ["r"]),
             helper.make_node("Neg", ["r"], ["y1"]),
             helper.make_node("Tanh", ["a"], ["y2"]),
             helper.make_node("Flatten", ["r"], ["y3"], axis=1)]
    proto = model(nodes, [tensor("x", ["B", 6])],
                  [tensor("y1", ["B", 3, 2]), tensor("y2", ["B", 6]), tensor("y3", ["B", 6])],
                  [const("shape", np.array([-1, 3, 2], np.int64))])
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    dev = VirtualDevice(16 << 20)
    compiled = aircc.compile(proto, mode="dynamic", min_branch_bytes=0, split_matrix_branches=True)
    for replay in (True, False):
        m = aircc.load(compiled.om, device=dev, replay=replay)
        for b in (2, 5, 2, 5):
            x = np.random.default_rng(b).standard_normal((b, 6)).astype(np.float32)
            _compare(m.run({"x": x}), session.run(None, {"x": x}), rtol=1e-6, atol=1e-7)
        if replay:
            launched = [d.get("op") for rep in m.engine.replays.recorded() for lst in rep.program.lists
                        for _, d in lst]
            assert "Relu" in launched and "Reshape" not in launched and "Flatten" not in launched
        m.close()
    for s in dev.streams:
        s.synchronize()
    dev.caching_allocator.release_cached()
    assert dev.memory.used == 0
    dev.close()

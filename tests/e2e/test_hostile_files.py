"""Files built as an attacker would build them (the shapes tests/om_hostile.py gives the fuzz),
one by one: each is refused at load with a ModelFormatError naming what is wrong, or, for a
model that is valid but never ends, runs to its deadline.  No crash, no other exception, no
hang."""
from __future__ import annotations

import copy
import time

import msgpack
import numpy as np
import pytest

import aircc
import om_hostile
from aircc.errors import ModelFormatError, RunTimeoutError
from aircc.formats import OmFile, load_om
from fuzz_om import endless_loop_model
from graphs import diamond, loop_if_model
from om_mutations import join, split
from test_om_contract import forge


@pytest.fixture(scope="module")
def static_om() -> OmFile:
    return aircc.compile(diamond(), mode="static", streams=None, min_branch_bytes=0,
                         split_matrix_branches=True).om


@pytest.fixture(scope="module")
def loop_om() -> OmFile:
    return aircc.compile(loop_if_model(), mode="dynamic").om


def _spliced(om: OmFile, kind: int, key: str, raw: bytes) -> bytes:
    """``om``'s file with the value under ``key`` of section ``kind`` replaced by raw msgpack."""
    flags, secs = split(forge(om))
    sec = next(s for s in secs if s[0] == kind)
    sec[2] = om_hostile.splice(sec[2], key, raw)
    return join(flags, secs)


def _refused(data: bytes, *fragments: str) -> str:
    with pytest.raises(ModelFormatError) as e:
        aircc.load(data)
    for f in fragments:
        assert f in str(e.value), str(e.value)
    return str(e.value)


def test_a_static_loop_that_never_exits_loads_and_runs_to_its_deadline():
    """Constant-true condition, no trip count: loading does not run it; each run ends at its
    deadline with RunTimeoutError naming where it was, and the model runs again after."""
    t0 = time.monotonic()
    with aircc.load(aircc.formats.dump_om(aircc.compile(endless_loop_model(), mode="static").om)) as m:
        assert time.monotonic() - t0 < 10
        for _ in range(2):
            t0 = time.monotonic()
            with pytest.raises(RunTimeoutError, match="passed its deadline of 0.3 s in stream 0"):
                m.run({"x": np.zeros(4, np.float32)}, timeout=0.3)
            assert time.monotonic() - t0 < 0.3 + 2.0


def test_deep_or_lying_msgpack_is_refused_by_name(static_om):
    """Nesting past msgpack's 1024 levels, nesting within them where a count belongs, and
    headers declaring gigabytes the file does not hold."""
    _refused(_spliced(static_om, 4, "pad", om_hostile.nested(100_000)), "section 'tasks' is not valid msgpack")
    _refused(_spliced(static_om, 4, "streams", om_hostile.nested(1000)),
             "section 'tasks': streams must be an int in [1, 257), got list [[[[...]]]]")
    for header in om_hostile.LYING_HEADERS:
        _refused(_spliced(static_om, 5, "buffers", header), "section 'memory_plan' is not valid msgpack")
    ext = om_hostile.pack(msgpack.ExtType(1, msgpack.packb(["float32", [2**40, 2**20], b""])))
    _refused(_spliced(static_om, 6, "entries", msgpack.Packer().pack_array_header(1) + ext),
             "section 'tiling' is not valid msgpack", "has more elements than an array can hold")


def test_long_strings_and_a_deep_compile_report_are_refused(static_om):
    name = om_hostile.pack("x" * (2 << 20))
    _refused(_spliced(static_om, 4, "pad", name), "section 'tasks' is not valid msgpack",
             "exceeds max_str_len(1048576)")
    report = om_hostile.splice({}, "x", om_hostile.nested(100))
    _refused(_spliced(static_om, 1, "compile_report", report),
             "section 'model': compile_report nests more than 32 levels")


def test_non_finite_and_huge_counts_are_refused(static_om):
    for key, value, fragment in [("events", float("nan"), "events must be an int >= 0, got float nan"),
                                 ("count", float("inf"), "count must be an int >= 0, got float inf"),
                                 ("events", 2**62, "is never recorded (events = 4611686018427387904)"),
                                 ("count", 2**63 - 1, "count is 9223372036854775807, but the lists hold")]:
        bad = OmFile(static_om.mode, copy.deepcopy(static_om.sections), static_om.weights)
        bad.sections["tasks"][key] = value
        _refused(forge(bad), f"section 'tasks': ", fragment)
    bad = OmFile(static_om.mode, copy.deepcopy(static_om.sections), static_om.weights)
    bad.sections["tasks"]["lists"][0][1]["outputs"][0]["shape"] = [2**40, 2**40]
    _refused(forge(bad), "lists[0][1].outputs[0].shape [1099511627776, 1099511627776] has more "
                         "elements than an array can hold")


def test_waits_nobody_records_and_circular_waits_are_refused(static_om):
    tasks = static_om.sections["tasks"]
    assert tasks["streams"] > 1 and tasks["events"] > 0
    bad = OmFile(static_om.mode, copy.deepcopy(static_om.sections), static_om.weights)
    t = bad.sections["tasks"]
    t["lists"][1].insert(0, {"kind": "event_wait", "id": t["count"], "event": t["events"]})
    t["count"], t["events"] = t["count"] + 1, t["events"] + 1
    _refused(forge(bad), f"event {tasks['events']} is never recorded")
    bad = OmFile(static_om.mode, copy.deepcopy(static_om.sections), static_om.weights)
    lists = bad.sections["tasks"]["lists"]
    s, i = next((s, i) for s, tl in enumerate(lists) for i, x in enumerate(tl) if x["kind"] == "event_record")
    lists[s].append(lists[s].pop(i))                 # recorded after a wait on its own stream
    _refused(forge(bad), "the streams would wait for each other forever")


def test_control_bodies_must_match_their_node(loop_om):
    """A Loop body's outputs that nothing makes, or fewer than the Loop has, used to reach the
    run as a KeyError or an unnamed error."""
    k = next(k for k, h in enumerate(loop_om.sections["exec_graph"]["kernels"]) if h["kind"] == "control")
    for outputs, fragment in [(["cond_out", "object"], "outputs name ['object'], which the body neither makes"),
                              (["h_out"], "has 3 inputs and 1 outputs, but the body of Loop node")]:
        bad = OmFile(loop_om.mode, copy.deepcopy(loop_om.sections), loop_om.weights)
        bad.sections["exec_graph"]["kernels"][k]["bodies"]["body"]["outputs"] = outputs
        _refused(forge(bad), f"section 'exec_graph': kernels[{k}].bodies['body']", fragment)
    bad = OmFile(loop_om.mode, copy.deepcopy(loop_om.sections), loop_om.weights)
    bad.sections["exec_graph"]["kernels"] = [h for h in bad.sections["exec_graph"]["kernels"]
                                             if h["kind"] != "memcpy_d2h"]
    _refused(forge(bad), "kernels copy out outputs []: each output of the model is copied out by one")


def test_gears_batch_nothing_or_a_shape_they_do_not_say():
    om = aircc.compile(diamond(), input_shapes={"x": [-1, 4]}, dynamic_batch=[1, 2]).om
    bad = OmFile(om.mode, copy.deepcopy(om.sections), om.weights)
    bad.sections["gears"]["batch_inputs"] = []
    _refused(forge(bad), "section 'gears': batch_inputs must name one or more distinct inputs")
    bad = OmFile(om.mode, copy.deepcopy(om.sections), om.weights)
    bad.sections["gears"]["plans"][1]["inputs"][0]["shape"][0] = 1
    _refused(forge(bad), "plans[1].inputs[0].shape is [1, 4], but input 'x' has the gear's batch 2")
    with aircc.load(forge(om), pad_to_gear=True) as m:           # the file as written runs
        x = np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)
        np.testing.assert_allclose(m.run({"x": x})["y"], aircc.load(forge(om)).run({"x": x})["y"])


def test_the_writer_refuses_what_the_reader_refuses(static_om):
    """The checks above hold for the writer too: it cannot write a file the reader refuses."""
    bad = OmFile(static_om.mode, copy.deepcopy(static_om.sections), static_om.weights)
    k = next(t for t in bad.sections["tasks"]["lists"][0] if t["kind"] == "kernel")
    k["attrs"]["channels_last"] = "yes"
    with pytest.raises(ModelFormatError, match="attrs.channels_last of node .* must be an int"):
        aircc.formats.dump_om(bad)
    with pytest.raises(ModelFormatError, match="attrs.channels_last"):
        load_om(forge(bad))

"""Every size in a file and in a feed is bounded before it is allocated (formats/payload.py,
formats/section_limits.py, executor/runtime/feeds.py; the limits: docs/om-format.md).  Each
hostile file is built and loaded in a fresh process, whose peak memory and time are measured:
a file of empty msgpack maps (which took 70 bytes of memory per byte of file), a memory plan
of a million buffers (882 MB and 17.5 s), a feed of 8 GiB broadcast from 8 bytes (copied in
full before its shape was looked at)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import aircc
from aircc.errors import InputError, ModelFormatError
from aircc.formats import OmFile, load_om
from onnx import helper

from graphs import diamond, model, tensor
from test_om_contract import forge

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Runs in a fresh process: builds the file ``kind`` (of about ``mb`` megabytes), loads it and
#: prints what happened, the seconds it took and how much the process's peak memory rose.
PROBE = textwrap.dedent("""
    import json, sys, time
    sys.path[:0] = [{tests!r}, {tests!r} + "/e2e"]
    import numpy as np, aircc, om_hostile
    from fuzz_om import peak_rss
    from aircc.formats import OmFile
    from graphs import diamond
    from om_mutations import join, split
    from test_om_contract import forge

    kind, mb = sys.argv[1], float(sys.argv[2])
    flags, secs = split(forge(aircc.compile(diamond(), mode="static").om))
    sec = {{k: s for k, _, s in secs}}
    if kind == "empty_maps":           # the compile report: maps of nothing, by the million
        model = next(s for s in secs if s[0] == 1)
        model[2] = om_hostile.splice(model[2], "compile_report", om_hostile.splice(
            {{}}, "x", om_hostile.repeated(b"\\x80", int(mb * 2**20))))
    elif kind == "many_buffers":       # a memory plan of a million buffers (about 75 bytes each)
        plan = next(s for s in secs if s[0] == 5)
        one = om_hostile.pack(plan[2]["buffers"][0])
        plan[2] = om_hostile.splice(plan[2], "buffers",
                                    om_hostile.repeated(one, int(mb * 2**20) // len(one)))
    elif kind == "tiny_lists":         # one-element lists: two bytes, 64 decoded (and a slot)
        tiling = next(s for s in secs if s[0] == 6)
        tiling[2] = om_hostile.splice(tiling[2], "pad",
                                      om_hostile.repeated(b"\\x91\\x00", int(mb * 2**20) // 2))
    elif kind == "short_strings":      # two-letter strings, the densest scalars
        tiling = next(s for s in secs if s[0] == 6)
        tiling[2] = om_hostile.splice(tiling[2], "pad",
                                      om_hostile.repeated(b"\\xa2ab", int(mb * 2**20) // 3))
    data = join(flags, secs)
    before = peak_rss()
    t0 = time.monotonic()
    try:
        aircc.load(data).close()
        what = "loaded"
    except aircc.AirccError as e:
        what = f"{{type(e).__name__}}: {{e}}"
    grew = peak_rss() - before
    print(json.dumps({{"what": what, "seconds": time.monotonic() - t0, "grew": grew,
                      "size": len(data)}}))
""").format(tests=TESTS)


def _probe(kind: str, mb: float) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, kind, str(mb)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_file_of_empty_maps_is_refused_within_bounded_memory():
    """30 MB of empty maps in the compile report (read by nothing) used to add 2.1 GB and
    load; now the model section is refused by its size, and 12 MB of them (under that cap) are
    refused once there are more maps than one per 8 bytes, having cost at most 16 bytes of
    memory per byte of the file."""
    r = _probe("empty_maps", 30)
    assert r["what"].startswith("ModelFormatError") and "section 'model' is 31457" in r["what"] \
        and "at most 16777216" in r["what"], r
    assert r["seconds"] < 1.0 and r["grew"] < r["size"], r
    r = _probe("empty_maps", 12)
    assert r["what"].startswith("ModelFormatError") and "section 'model' is too large for its " \
        "size: it holds more than" in r["what"], r
    assert r["grew"] < 16 * r["size"], r


def test_a_memory_plan_of_a_million_buffers_is_refused_at_its_length():
    """The plan's buffer list is longer than its tasks' operands allow: msgpack refuses it as
    it reads the list's length, before making any of the million records."""
    r = _probe("many_buffers", 75)
    assert r["what"].startswith("ModelFormatError") and "section 'memory_plan'" in r["what"] \
        and "exceeds max_array_len" in r["what"], r
    assert r["seconds"] < 2.0 and r["grew"] < 2 * r["size"], r


def test_the_densest_payloads_stay_within_the_bound():
    """One-element lists (two bytes each, some 80 decoded) are refused once their lists take
    24 bytes per byte of the section; two-letter strings (three bytes, some 60 decoded with
    their slot), the costliest scalars, load: both cost less than the stated 32 bytes of
    memory per byte of the file."""
    r = _probe("tiny_lists", 8)
    assert r["what"].startswith("ModelFormatError") and "section 'tiling' is too large for its " \
        "size: its lists and maps take more than" in r["what"], r
    assert r["grew"] < 32 * r["size"], r
    r = _probe("short_strings", 8)
    assert r["grew"] < 32 * r["size"], r


def test_a_section_past_its_limit_is_refused_by_the_writer_too():
    """The writer decodes what it writes with the reader's limits: a model it would write is
    one the reader loads."""
    om = aircc.compile(diamond(), mode="static").om
    bad = OmFile(om.mode, dict(om.sections), om.weights)
    bad.sections["model"] = {**om.sections["model"], "compile_report": {"x": [{}] * 100_000}}
    with pytest.raises(ModelFormatError, match="section 'model' is too large for its size"):
        aircc.formats.dump_om(bad)
    with pytest.raises(ModelFormatError, match="section 'model' is too large for its size"):
        load_om(forge(bad))


def _broadcast(nbytes: int, columns: int) -> np.ndarray:
    """A float32 array of ``nbytes`` logical bytes, every element the same 4 bytes."""
    return np.broadcast_to(np.float32(1.0), (nbytes // (4 * columns), columns))


def test_a_huge_broadcast_feed_is_refused_by_its_shape_before_any_copy():
    """8 GiB broadcast from 4 bytes: a dynamic model (whose batch is a symbol) refuses it by
    its size against the device's memory, a gear model by its shape, neither copies it."""
    big = _broadcast(8 << 30, 4)
    relu = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", ["N", 4])], [tensor("y", ["N", 4])])
    with aircc.load(aircc.compile(relu, mode="dynamic"), device=aircc.VirtualDevice(256 << 20)) as m:
        with pytest.raises(InputError, match=r"input 'x' of shape \[536870912, 4\] \(8589934592 bytes\) "
                                             r"makes the feeds 8589934592 bytes: more than the "
                                             r"device's 268435456"):
            m.run({"x": big})
        small = np.broadcast_to(np.float32(-1.5), (3, 4))      # a small broadcast runs as any feed
        np.testing.assert_array_equal(m.run({"x": small})["y"], np.maximum(small, 0))
        x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
        np.testing.assert_array_equal(m.run({"x": x})["y"], np.maximum(x, 0))
    gears = aircc.compile(diamond(), input_shapes={"x": [-1, 4]}, dynamic_batch=[2, 4])
    with aircc.load(gears, pad_to_gear=True, device=aircc.VirtualDevice(256 << 20)) as m:
        wide = _broadcast(8 << 30, 2**28)[:1]           # batch 1 (padded to 2), 2**28 columns
        with pytest.raises(InputError, match=r"input 'x' must have shape \['batch', 4\], "
                                             r"got \[1, 268435456\]"):
            m.run({"x": wide})

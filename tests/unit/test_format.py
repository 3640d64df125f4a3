"""Tests of the .om file format: round trips, layout, zero-copy loading, and rejections."""
from __future__ import annotations

import copy
import os
import random
import struct
import zlib

import msgpack
import numpy as np
import pytest

from aircc.errors import ModelFormatError
from aircc.formats import (FORMAT_MAJOR, FORMAT_MINOR, SCHEMA_VERSION, OmFile, dump_om, load_om,
                           save_om)
from aircc.formats import om as omod

HDR = struct.Struct("<8sHHIIIQQI")
ENT = struct.Struct("<IIQQII")


# ------------------------------------------------------------------ fixtures
def _op(offset: int, shape=(2, 3), mem: str = "arena") -> dict:
    return {"mem": mem, "offset": offset, "dtype": "float32", "shape": list(shape)}


def _kernel(tid: int, op: str, node: str, inputs: list, outputs: list, tiling: int) -> dict:
    return {"kind": "kernel", "id": tid, "op": op, "domain": "", "version": 13, "node": node,
            "impl": "native", "inputs": inputs, "outputs": outputs, "attrs": {},
            "tiling": tiling, "workspace": None}


TARGET = {"name": "cpu-avx2", "backend": "numpy", "vector_class": "avx2"}


def sections(mode: str = "static") -> dict:
    """A small model of either mode whose sections are all valid (the reader's contract)."""
    shape = [2, 3] if mode == "static" else ["N", 3]
    s = {
        "model": {"name": "tiny", "mode": mode, "producer": "aircc-test", "opsets": {"": 17},
                  "source_producer": "", "target": dict(TARGET),
                  "inputs": [{"name": "x", "dtype": "float32", "shape": shape}],
                  "outputs": [{"name": "y", "dtype": "float32", "shape": shape}],
                  "compile_report": {"passes": ("fold", "fuse")}},
        "tiling": {"entries": [{"node": "add0", "block": 64, "idx": np.arange(5, dtype=np.int32)},
                               {"node": "mm0", "tiles": (2, 2), 7: "int key"}]},
    }
    if mode == "static":
        s["tasks"] = {"streams": 2, "events": 1, "count": 6, "lists": [
            [{"kind": "memcpy_h2d", "id": 0, "binding": 0, "dst": _op(0)},
             _kernel(1, "Add", "add0", [_op(0), _op(0, (3, 5), "weights")], [_op(64)], 0),
             {"kind": "event_record", "id": 2, "event": 0}],
            [{"kind": "event_wait", "id": 3, "event": 0},
             _kernel(4, "Relu", "relu0", [_op(64)], [_op(128)], 1),
             {"kind": "memcpy_d2h", "id": 5, "binding": 0, "src": _op(128)}]]}
        s["memory_plan"] = {"arena_bytes": 256, "lower_bound_bytes": 128, "no_reuse_bytes": 512,
                            "weights_bytes": 64, "alignment": 64, "strategy": "by-size",
                            "buffers": [
                                {"name": "t2", "offset": 0, "size": 128, "first_task": 1,
                                 "last_task": 4, "readers": [4], "writers": [1]},
                                {"name": "t3", "offset": 128, "size": 128, "first_task": 4,
                                 "last_task": 5, "readers": [5], "writers": [4]}],
                            "aliases": [], "weights": [{"name": "f32", "offset": 0, "size": 60}]}
    else:
        vt = {"dtype": "float32", "shape": ["N", 3]}
        s["exec_graph"] = {
            "inputs": ["x"], "outputs": ["y"], "values": {"x": vt, "x.dev": vt, "h": vt, "y": vt},
            "streams": 1, "events": 0, "host_ops": 0, "device_values": ["x.dev", "h"],
            "nodes": [{"op": "MemcpyH2D", "domain": "aircc", "version": 1, "name": "h2d_0",
                       "inputs": ["x"], "outputs": ["x.dev"], "attrs": {"binding": 0},
                       "placement": "device", "stream": 0, "impl": "native"},
                      {"op": "Relu", "domain": "", "version": 14, "name": "relu0",
                       "inputs": ["x.dev"], "outputs": ["h"], "attrs": {},
                       "placement": "device", "stream": 0, "impl": "native"},
                      {"op": "MemcpyD2H", "domain": "aircc", "version": 1, "name": "d2h_0",
                       "inputs": ["h"], "outputs": [], "attrs": {"binding": 0},
                       "placement": "device", "stream": 0, "impl": "native"}],
            "kernels": [{"kind": "infer_shape", "node": 0},
                        {"kind": "alloc", "node": 0, "stream": 0, "values": ["x.dev"]},
                        {"kind": "memcpy_h2d", "node": 0, "stream": 0},
                        {"kind": "infer_shape", "node": 1}, {"kind": "tiling", "node": 1},
                        {"kind": "alloc", "node": 1, "stream": 0, "values": ["h"]},
                        {"kind": "launch", "node": 1, "stream": 0},
                        {"kind": "free", "values": ["x.dev"]},
                        {"kind": "memcpy_d2h", "node": 2, "stream": 0},
                        {"kind": "free", "values": ["h"]}]}
    return s


def weights() -> dict:
    rng = np.random.default_rng(0)
    return {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "f16": rng.standard_normal(7).astype(np.float16),
        "f64": rng.standard_normal((2, 2, 2)),
        "bool": np.array([True, False, True]),
        "scalar": np.array(2.5, dtype=np.float32),           # 0-d
        "empty": np.zeros((0, 4), dtype=np.int64),            # empty
        "i8": np.arange(-5, 5, dtype=np.int8),
        "u16": np.arange(9, dtype=np.uint16).reshape(3, 3),
        "i32": np.arange(6, dtype=np.int32)[::2],             # non-contiguous
        "u64": np.array([2**64 - 1, 0], dtype=np.uint64),
        "be": np.arange(4, dtype=">i4"),                      # big-endian input
    }


def model(mode: str = "static") -> OmFile:
    return OmFile(mode, sections(mode), weights())


def table(b: bytes) -> list[tuple]:
    """(kind, flags, offset, size, crc) of each table entry."""
    _, _, _, _, _, count, toff, _, _ = HDR.unpack_from(b, 0)
    return [ENT.unpack_from(b, toff + 32 * i)[:5] for i in range(count)]


def entry(b: bytes, name: str) -> tuple[int, tuple]:
    kind = omod.SECTION_KINDS[name]
    return next((i, e) for i, e in enumerate(table(b)) if e[0] == kind)


def set_entry(b: bytearray, i: int, **kw) -> None:
    toff = HDR.unpack_from(b, 0)[6]
    fields = list(ENT.unpack_from(b, toff + 32 * i))
    for k, v in kw.items():
        fields[["kind", "flags", "offset", "size", "crc"].index(k)] = v
    ENT.pack_into(b, toff + 32 * i, *fields)


def fix_header_crc(b: bytearray) -> None:
    h = bytearray(b[:64])
    h[40:44] = bytes(4)
    struct.pack_into("<I", b, 40, zlib.crc32(h))


def forge(payloads: dict, flags: int = 0, raw: dict | None = None, wtable: list | None = None,
          wdata: bytes = b"", extra: list | None = None) -> bytes:
    """A container with any sections (no writer-side schema checks)."""
    secs = [(omod.SECTION_KINDS[n], 0, [omod.encode_payload(n, p)]) for n, p in payloads.items()]
    secs += [(omod.SECTION_KINDS[n], 0, [d]) for n, d in (raw or {}).items()]
    secs.append((omod.WEIGHT_TABLE, 0, [omod.encode_payload("weight_table", wtable or [])]))
    secs.append((omod.WEIGHTS_DATA, 0, [wdata]))
    secs += extra or []
    return b"".join(omod.assemble(flags, secs)[1])


def rejects(data, fragment: str, **kw) -> ModelFormatError:
    with pytest.raises(ModelFormatError) as ei:
        load_om(bytes(data), **kw)
    assert fragment in str(ei.value), str(ei.value)
    return ei.value


def assert_same(a: OmFile, b: OmFile) -> None:
    assert a.mode == b.mode
    assert list(a.weights) == list(b.weights)
    for k, w in a.weights.items():
        assert b.weights[k].dtype == w.dtype.newbyteorder("<"), k   # stored little-endian
        assert b.weights[k].shape == w.shape, k
        np.testing.assert_array_equal(b.weights[k], w)


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_round_trip(mode):
    m = model(mode)
    b = dump_om(m)
    o = load_om(b)
    assert_same(m, o)
    assert list(o.sections) == sorted(m.sections, key=omod.SECTION_KINDS.__getitem__)
    assert o.sections["model"]["compile_report"] == {"passes": ["fold", "fuse"]}
    ent = o.sections["tiling"]["entries"]
    assert ent[1] == {"node": "mm0", "tiles": [2, 2], 7: "int key"}
    idx = ent[0]["idx"]
    assert idx.dtype == np.int32 and idx.tolist() == [0, 1, 2, 3, 4] and idx.flags.writeable
    if mode == "static":
        assert o.sections["tasks"] == sections()["tasks"]
    assert (b[12] & 1) == (mode == "dynamic")
    assert dump_om(o) == b                      # dump(load(dump(m))) is byte-identical


def test_deterministic_and_header_fields():
    b = dump_om(model())
    assert b == dump_om(model())
    assert HDR.unpack_from(b, 0)[:-1] == (b"AIRCCOM\x00", FORMAT_MAJOR, FORMAT_MINOR, 0, 64,
                                          6, 64, len(b))
    assert struct.unpack_from("<I", b, 44) == (SCHEMA_VERSION,)
    assert b[48:64] == bytes(16)


@pytest.mark.parametrize("version,fragment", [
    (SCHEMA_VERSION + 1, f"the file's payload schema is revision {SCHEMA_VERSION + 1}, newer than "
                         f"revision {SCHEMA_VERSION} that this aircc reads: upgrade aircc"),
    (0, "the file records no payload schema revision (written by an aircc older than format "
        f"1.2); recompile the model with this aircc (schema revision {SCHEMA_VERSION})"),
    (SCHEMA_VERSION - 1, f"revision {SCHEMA_VERSION - 1}, older than revision {SCHEMA_VERSION}"),
])
def test_the_payload_schema_revision_is_written_and_checked(version, fragment):
    """The writer records SCHEMA_VERSION in the header; the reader refuses any other, before
    it decodes a payload whose shape it may not know."""
    b = bytearray(dump_om(model()))
    assert load_om(bytes(b)).mode == "static"
    struct.pack_into("<I", b, 44, version)
    fix_header_crc(b)
    e = rejects(b, fragment)
    assert str(version) in str(e)


def test_numpy_scalars_become_python_values():
    m = model()
    m.sections["tiling"]["entries"].append({"i": np.int64(3), "f": np.float32(0.5),
                                            "b": np.bool_(True), "d": np.float64(1.25)})
    got = load_om(dump_om(m)).sections["tiling"]["entries"][-1]
    assert got == {"i": 3, "f": 0.5, "b": True, "d": 1.25}
    assert [type(v) for v in got.values()] == [int, float, bool, float]


def test_alignment_and_zero_copy_views():
    b = dump_om(model())
    for kind, _, off, size, crc in table(b):
        assert off % (4096 if kind == omod.WEIGHTS_DATA else 64) == 0
        assert zlib.crc32(b[off:off + size]) == crc
    _, (_, _, woff, wsize, _) = entry(b, "weights")
    whole = np.frombuffer(b, np.uint8)
    for name, arr in load_om(b).weights.items():
        assert not arr.flags.writeable, name
        if arr.size:                             # views into the bytes, each 64-aligned
            assert not arr.flags.owndata and np.shares_memory(arr, whole), name
            assert (arr.ctypes.data - whole.ctypes.data) % 64 == 0, name
            assert woff <= arr.ctypes.data - whole.ctypes.data < woff + wsize
    ba = bytearray(b)
    o2 = load_om(ba)                             # writable buffer: views still read-only
    assert not o2.weights["f32"].flags.writeable
    assert np.shares_memory(o2.weights["f32"], np.frombuffer(ba, np.uint8))


def test_file_round_trip_read_whole(tmp_path):
    m = model()
    p = tmp_path / "tiny.om"
    n = save_om(m, p)
    assert n == p.stat().st_size and p.read_bytes() == dump_om(m)
    assert os.listdir(tmp_path) == ["tiny.om"]   # no temp file left behind
    o = load_om(p)
    assert_same(m, o)
    held = np.frombuffer(o.buffer, np.uint8)     # the file's bytes, read into memory
    assert np.shares_memory(o.weights["f32"], held)
    n2 = save_om(model("dynamic"), str(p))       # atomic overwrite of an existing file
    assert load_om(str(p)).mode == "dynamic" and n2 == p.stat().st_size
    np.testing.assert_array_equal(o.weights["f32"], m.weights["f32"])   # untouched by it
    p.write_bytes(b"\0" * 64)                    # overwritten in place, then deleted
    p.unlink()
    np.testing.assert_array_equal(o.weights["f32"], m.weights["f32"])
    (tmp_path / "empty.om").write_bytes(b"")
    with pytest.raises(ModelFormatError, match="truncated"):
        load_om(tmp_path / "empty.om")
    with pytest.raises(ModelFormatError, match="cannot read model file"):
        load_om(tmp_path / "missing.om")


def test_large_weights_are_not_copied(tmp_path):
    big = {f"w{i}": np.full((1024, 1024 * 3 // 4 * 5), i, dtype=np.float32)
           for i in range(6)}                    # 6 x 15 MiB = 90 MiB
    p = tmp_path / "big.om"
    save_om(OmFile("static", sections(), {**big, "f32": weights()["f32"]}), p)   # f32: the task's
    o = load_om(p)
    mapped = np.frombuffer(o.buffer, np.uint8)
    assert sum(a.nbytes for n, a in o.weights.items() if n in big) == 90 * 2**20
    for name, arr in o.weights.items():
        assert not arr.flags.owndata and not arr.flags.writeable
        assert np.shares_memory(arr, mapped), name
        assert name == "f32" or arr[0, 0] == arr[-1, -1] == int(name[1:])


def test_empty_weights_and_verify_flag():
    m = OmFile("dynamic", sections("dynamic"), {})
    o = load_om(dump_om(m), verify=False)
    assert o.weights == {} and o.mode == "dynamic"


# ------------------------------------------------------------------ write errors
@pytest.mark.parametrize("mutate,error,pattern", [
    (lambda m: m.sections["tiling"]["entries"].append({"bad": {1, 2}}), TypeError,
     r"section 'tiling' at \['entries'\]\[2\]\['bad'\] \(builtins.set\)"),
    (lambda m: m.sections["model"].update(obj=object()), TypeError, r"section 'model'.*object"),
    (lambda m: m.sections["tiling"].update(big=2**70), TypeError, r"section 'tiling'.*range"),
    (lambda m: m.sections["tiling"].update(k={(1, 2): 3}), TypeError, r"section 'tiling'.*key"),
    (lambda m: m.weights.update(o=np.array(["a"], dtype=object)), TypeError, "weight 'o'.*dtype"),
    (lambda m: m.weights.update(l=[1, 2, 3]), TypeError, "weight 'l' must be a numpy.ndarray"),
    (lambda m: m.sections["tasks"]["lists"][0][1].pop("op"), ModelFormatError,
     r"section 'tasks': lists\[0\]\[1\] is missing key 'op'"),
    (lambda m: setattr(m, "mode", "dynamic"), ModelFormatError, "missing section 'exec_graph'"),
    (lambda m: m.sections.update(weights={}), ModelFormatError, "unknown section 'weights'"),
    (lambda m: m.sections["model"].update(mode="dynamic"), ModelFormatError,
     "section 'model' has mode 'dynamic'"),
])
def test_write_errors(mutate, error, pattern):
    """Unserialisable values raise TypeError; schema violations ModelFormatError."""
    m = model()
    mutate(m)
    with pytest.raises(error, match=pattern):
        dump_om(m)


# ------------------------------------------------------------------ container rejections
@pytest.mark.parametrize("cut,fragment", [
    (lambda b: 0, "shorter than the 64-byte header"),
    (lambda b: 8, "shorter than the 64-byte header"),
    (lambda b: 63, "shorter than the 64-byte header"),
    (lambda b: 64 + 40, "the section table is cut off"),
    (lambda b: entry(b, "tiling")[1][2] + 3, "section 'tiling' cut off"),
    (lambda b: entry(b, "weights")[1][2] + 100, "section 'weights' cut off"),
    (lambda b: len(b) - 1, "section 'weights' cut off"),
])
def test_truncated(cut, fragment):
    b = dump_om(model())
    e = rejects(b[:cut(b)], "truncated")
    assert fragment in str(e)


def test_newer_minor_accepted():
    b = bytearray(dump_om(model()))
    struct.pack_into("<H", b, 10, FORMAT_MINOR + 5)
    fix_header_crc(b)
    assert load_om(b).mode == "static"


def _poke(fmt: str, at: int, *values, crc: bool = False):
    """An edit of header fields, optionally re-signing the header."""
    def edit(b: bytearray) -> None:
        struct.pack_into(fmt, b, at, *values)
        if crc:
            fix_header_crc(b)
    return edit


def _edit_entry(name: str, **kw):
    """An edit of one table entry; values may be callables of (offset, size, file bytes)."""
    def edit(b: bytearray) -> None:
        i, (_, _, off, size, _) = entry(b, name)
        set_entry(b, i, **{k: v(off, size, b) if callable(v) else v for k, v in kw.items()})
    return edit


def _model_offset(off, size, b):
    return entry(b, "model")[1][2]


@pytest.mark.parametrize("edit,fragment", [
    (lambda b: b.extend(b"\0\0\0"), "size mismatch: 3 trailing bytes"),
    (_poke("8s", 0, b"ONNXMODL"), "bad magic: found b'ONNXMODL', expected b'AIRCCOM\\x00'"),
    (_poke("<HH", 8, 2, 3), "unsupported format version 2.3 (this reader supports major 1)"),
    (_poke("<HH", 8, 2, 3, crc=True), "unsupported format version 2.3"),
    (_poke("B", 50, 1), "header checksum mismatch"),     # a reserved byte, covered by the crc
    (_poke("<I", 12, 1, crc=True), "header flags say the model is dynamic"),
    (_poke("<I", 20, 10**6, crc=True), "truncated: the section table (1000000 entries"),
    (_poke("<I", 16, 10**6, crc=True), "truncated: header size 1000000"),
    # the section table is not covered by the header crc: edit it directly
    (_edit_entry("tiling", size=lambda off, size, b: len(b) - off + 1),
     "truncated: section 'tiling'"),
    (_edit_entry("tiling", offset=_model_offset), "overlap"),
    (_edit_entry("model", offset=64), "overlap (byte 64 <"),
    (_edit_entry("tiling", kind=omod.TASK_INFO), "duplicate section 'tasks'"),
    (_edit_entry("model", offset=lambda off, size, b: off + 8, size=1), "not aligned to 64"),
    (_edit_entry("weights", offset=lambda off, size, b: off - 64), "not aligned to 4096"),
    (_edit_entry("tasks", kind=99), "unknown section kind 99"),
])
def test_corrupt_container(edit, fragment):
    b = bytearray(dump_om(model()))
    edit(b)
    rejects(b, fragment)


def test_unknown_optional_section_is_skipped():
    table, chunks = omod.weight_chunks({"f32": weights()["f32"]})     # the weight its task reads
    o = load_om(forge(sections(), wtable=table, wdata=b"".join(bytes(c) for c in chunks),
                      extra=[(99, 1, [b"future payload"])]))  # optional: skipped
    assert list(o.sections) == ["model", "tasks", "memory_plan", "tiling"]


@pytest.mark.parametrize("name", ["model", "tasks", "tiling", "weight_table", "weights"])
def test_section_checksum_mismatch(name):
    b = bytearray(dump_om(model()))
    _, (_, _, off, size, _) = entry(b, name)
    pos = off if name == "weights" else off + size // 2   # weights: first byte of 'f32'
    b[pos] ^= 0x40
    rejects(b, f"checksum mismatch in section '{name}'")
    if name == "weights":                        # verify=False skips section crcs
        o = load_om(bytes(b), verify=False)
        assert not np.array_equal(o.weights["f32"], weights()["f32"])


# ------------------------------------------------------------------ payload rejections
def test_invalid_msgpack_with_correct_crc():
    s = sections()
    del s["tiling"]
    rejects(forge(s, raw={"tiling": b"\xc1\x00"}), "section 'tiling' is not valid msgpack")
    rejects(forge(s, raw={"tiling": omod.encode_payload("t", {"entries": []}) + b"\x01"}),
            "section 'tiling' is not valid msgpack")
    bad_ext = omod.encode_payload("t", {"entries": [{"a": msgpack.ExtType(1, b"\x93")}]})
    rejects(forge(s, raw={"tiling": bad_ext}), "section 'tiling' is not valid msgpack")


@pytest.mark.parametrize("mode,drop", [("static", "tasks"), ("static", "memory_plan"),
                                       ("static", "tiling"), ("dynamic", "exec_graph"),
                                       ("static", "model")])
def test_missing_required_section(mode, drop):
    s = sections(mode)
    del s[drop]
    rejects(forge(s, flags=int(mode == "dynamic")), f"missing section '{drop}'")


def test_missing_weights_section():
    secs = [(omod.SECTION_KINDS[n], 0, [omod.encode_payload(n, p)]) for n, p in sections().items()]
    rejects(b"".join(omod.assemble(0, secs)[1]), "missing section 'weights'")


def test_flags_disagree_with_model_mode():
    rejects(forge(sections("dynamic"), flags=0), "but section 'model' has mode 'dynamic'")


def _bad(mutate):
    s = copy.deepcopy(sections())
    mutate(s)
    return forge(s)


@pytest.mark.parametrize("mutate,fragment", [
    (lambda s: s["model"].pop("name"), "section 'model': missing key 'name'"),
    (lambda s: s["model"].update(mode="eager"), "section 'model': mode must be"),
    (lambda s: s["model"]["inputs"][0].update(shape=[1.5]), "section 'model': inputs[0].shape[0]"),
    (lambda s: s["model"].update(opsets={"": "17"}), "section 'model': opsets"),
    (lambda s: s["tasks"].update(streams=0), "section 'tasks': streams must be an int in [1, 257)"),
    (lambda s: s["tasks"]["lists"].pop(), "section 'tasks': lists has 1 task lists"),
    (lambda s: s["tasks"]["lists"][0].append({"kind": "spin", "id": 6}), "section 'tasks': lists[0][3].kind"),
    (lambda s: s["tasks"]["lists"][0][2].update(event=1), "section 'tasks': lists[0][2].event"),
    (lambda s: s["tasks"].update(count=7) or s["tasks"]["lists"][1].append(
        {"kind": "event_record", "id": 6, "event": 0}), "event 0 is recorded 2 times"),
    (lambda s: s["tasks"]["lists"][1].__setitem__(0, {"kind": "label", "id": 3, "label": 0}),
     "event 0 is never waited on"),
    (lambda s: s["tasks"]["lists"][1].pop(0), "count is 6, but the lists hold 5 tasks"),
    (lambda s: s["tasks"]["lists"].append([]) or s["tasks"].update(streams=3),
     "section 'tasks': lists[2] is empty"),
    (lambda s: s["tasks"]["lists"][0].__setitem__(0, {"kind": "memcpy_h2d", "id": 0}),
     "section 'tasks': lists[0][0] is missing key 'binding'"),
    (lambda s: s["memory_plan"].update(alignment=-1), "section 'memory_plan': alignment"),
    (lambda s: s["memory_plan"]["buffers"][1].update(size=129), "exceeds arena_bytes 256"),
    (lambda s: s["memory_plan"].update(aliases=[{"name": "p", "of": "y", "offset": 512}]),
     "aliases[0] ('p') offset 512 exceeds arena_bytes 256"),
    (lambda s: s["memory_plan"].update(aliases=[{"name": "p", "offset": 0}]),
     "aliases[0] is missing key 'of'"),
    (lambda s: s["tiling"].update(entries={}), "section 'tiling': entries must be a list"),
    (lambda s: s["tiling"]["entries"].append(3), "section 'tiling': entries[2] must be a dict"),
])
def test_schema_violation(mutate, fragment):
    rejects(_bad(mutate), fragment)


def _wt(**kw):
    e = {"name": "w", "dtype": "float32", "shape": [2, 2], "offset": 0, "nbytes": 16}
    e.update(kw)
    return [e]


@pytest.mark.parametrize("wtable,fragment", [
    (_wt(offset=64), "points outside the weights section"),
    (_wt(shape=[4, 4], nbytes=64), "points outside the weights section"),
    (_wt(dtype="float99"), "unknown dtype 'float99'"),
    (_wt(dtype="object"), "unknown dtype 'object'"),
    (_wt(nbytes=12), "nbytes is 12 but shape [2, 2] of float32 needs 16"),
    (_wt(shape=[2, -2]), "shape must be a list"),
    (_wt(offset=8, shape=[1], nbytes=4), "not aligned"),
    (_wt() + _wt(), "duplicate weight name"),
    (_wt() + _wt(name="v", shape=[1], nbytes=4), "overlap"),
    ({"w": 1}, "section 'weight_table': must be a list"),
    (_wt(shape=[0, 2**62], nbytes=0), "shape [0, 4611686018427387904] has more elements than an "
                                      "array can hold"),   # was numpy's ValueError at load
])
def test_bad_weight_table(wtable, fragment):
    rejects(forge(sections(), wtable=wtable, wdata=bytes(40)), fragment)


def test_control_flow_nested_too_deep_is_refused():
    """Bodies inside bodies are bounded (each level costs the reader a frame and a scope)."""
    s = sections("dynamic")
    body: dict = {"inputs": [], "outputs": [], "kernels": [], "device_values": []}
    for _ in range(40):
        body = {"inputs": [], "outputs": [], "device_values": [],
                "kernels": [{"kind": "control", "node": 1, "stream": 0, "bodies": {"body": body}}]}
    s["exec_graph"]["kernels"] += body["kernels"]
    e = rejects(forge(s, flags=1), "bodies nest control flow more than 32 bodies deep")
    assert "section 'exec_graph': kernels[10].bodies['body'].kernels[0]" in str(e)


def test_only_model_format_errors_escape():
    """Flip every byte of the metadata: the reader succeeds or raises ModelFormatError."""
    b = dump_om(model())
    _, (_, _, woff, _, _) = entry(b, "weights")
    rnd = random.Random(1)
    for pos in range(woff):
        if pos % 3 and pos > 256:
            continue                              # every byte of header+table, 1/3 of the rest
        c = bytearray(b)
        c[pos] ^= 1 << rnd.randrange(8)
        for verify in (True, False):
            try:
                load_om(bytes(c), verify=verify)
            except ModelFormatError:
                pass

"""How the fuzz test mutates an .om: its bytes, its container (header, section table), and
the fields of its decoded sections, re-assembled with valid checksums so that most
mutations reach the reader's semantic checks (tests/fuzz_om.py runs the cases).

A mutation is deterministic from its case id (:func:`mutate`)."""
from __future__ import annotations

import copy
import functools
import random
import struct
import zlib
from typing import Any, Callable

import msgpack
import numpy as np

import om_hostile

_HDR, _ENT = struct.Struct("<8sHHIIIQQI"), struct.Struct("<IIQQII")
WEIGHTS_KIND = 2
SECTION_WEIGHTS = {"tasks": 3, "gears": 4, "exec_graph": 4, "memory_plan": 2, "model": 2,
                   "weight_table": 1, "tiling": 1}
COUNT_KEYS = ("streams", "events", "count", "arena_bytes", "weights_bytes", "host_ops", "batch",
              "alignment", "size", "nbytes", "offset", "binding", "tiling", "label", "event", "node")
TOP_KEYS = COUNT_KEYS[:8] + ("sizes", "batch_inputs", "inputs", "outputs", "values", "nodes",
                             "kernels", "lists", "entries", "buffers", "weights", "plans", "mode",
                             "target", "device_values", "bodies", "shape", "dtype")
GARBAGE = ["", "\x00", "x" * 1000, "ü", "-1", "sequence:", "float32 ", None, 0, [], {}]
EXTRA_WORDS = ["If", "Loop", "Scan", "Conv", "MatMul", "LoopCheck", "LoopInit", "MemcpyH2D",
               "MemcpyD2H", "Identity", "Reshape", "bfloat16", "object", "sequence:float32",
               "then_branch", "else_branch", "body", "aircc", "ai.onnx", "batch", "N"]

SEEDS = ("static_streams", "gears", "dynamic_streams", "static_loop_if", "dynamic_loop_if",
         "static_conv")


# ------------------------------------------------------------------ container
def split(data: bytes) -> tuple[int, list[list]]:
    """Header flags and the sections ``[kind, entry flags, payload]`` of a valid file, in
    table order (payloads decoded; the weights as raw bytes)."""
    from aircc.formats.payload import decode_payload

    _, _, _, flags, _, count, toff, _, _ = _HDR.unpack_from(data, 0)
    entries = [_ENT.unpack_from(data, toff + i * _ENT.size) for i in range(count)]
    return flags, [[kind, ef, data[off:off + size] if kind == WEIGHTS_KIND else
                    decode_payload(str(kind), data[off:off + size])]
                   for kind, ef, off, size, _, _ in entries]


def join(flags: int, secs: list[list]) -> bytes:
    """The file of these sections, laid out with valid checksums (no schema checks)."""
    from aircc.formats.om import assemble
    from aircc.formats.payload import encode_payload

    chunks = [(k, ef, [p if isinstance(p, (bytes, bytearray)) else encode_payload(str(k), p)])
              for k, ef, p in secs]
    return b"".join(assemble(flags, chunks)[1])


# ------------------------------------------------------------------ field mutations
def _walk(x: Any, path: tuple = ()):
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        yield path + (k,), v
        yield from _walk(v, path + (k,))


def _get(tree: Any, path: tuple) -> Any:
    return functools.reduce(lambda t, k: t[k], path, tree)


def _fmt(path: tuple) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")


def _put(tree: dict, path: tuple, new: Any) -> str:
    """Set the value at ``path``; say what changed."""
    parent = _get(tree, path[:-1])
    old, parent[path[-1]] = parent[path[-1]], new
    return f"{_fmt(path)}: {repr(old)[:40]} -> {repr(new)[:40]}"


class Vocabulary:
    """What a seed's sections contain: words, counts, and the values seen under each key."""

    def __init__(self, tree: dict):
        from aircc.formats.checks import DTYPES
        from aircc.formats.kinds import HostKernelKind, Impl, Placement, Region, TaskKind

        words = {w for e in (TaskKind, HostKernelKind, Region, Placement, Impl) for w in
                 (m.value for m in e)} | set(DTYPES) | set(EXTRA_WORDS)
        counts, self.by_key, self.dicts = {0, 1, 2}, {}, []
        for path, v in _walk(tree):
            if "compile_report" in path:
                continue
            words.update([v] if isinstance(v, str) else [])
            counts.update([len(v)] if isinstance(v, list) else [v] if path[-1] in COUNT_KEYS[:7]
                          and isinstance(v, int) else [])
            self.dicts += [v] if isinstance(v, dict) and "mem" in v else []
            seen = self.by_key.setdefault(path[-1], []) if isinstance(path[-1], str) else [v]
            if not isinstance(v, (dict, np.ndarray)) and v not in seen:
                seen.append(v)
        self.words, self.counts = sorted(words), sorted(counts)
        self.by_key = {k: vs for k, vs in self.by_key.items() if len(vs) > 1}


def _pick_path(rng: random.Random, tree: dict, pred: Callable[[tuple, Any], bool]) -> tuple | None:
    names = [n for n in SECTION_WEIGHTS if n in tree]
    for _ in range(8):
        sec = rng.choices(names, [SECTION_WEIGHTS[n] for n in names])[0]
        paths = [p for p, v in _walk(tree[sec], (sec,)) if "compile_report" not in p and pred(p, v)]
        if paths:
            return rng.choice(paths)
    return None


def _new_value(rng: random.Random, old: Any, voc: Vocabulary) -> Any:
    if isinstance(old, bool):
        return rng.choice([not old, None, 0, "yes"])
    if isinstance(old, int):
        n = rng.choice(voc.counts)
        return rng.choice([-1, 0, 1, old - 1, old + 1, n - 1, n, n + 1, 2**31, 2**63 - 1,
                           10**6, -2**63, 0.5, None, "1"])
    if isinstance(old, float):
        return rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e300, None, 1])
    if isinstance(old, str):
        return rng.choice(voc.words) if rng.random() < 0.7 else rng.choice(GARBAGE)
    if isinstance(old, np.ndarray):
        return rng.choice([old.astype(np.float64), old.reshape(-1)[:1], np.zeros(0, old.dtype),
                           old.tolist(), None])
    return rng.choice([0, -1, "", [], {}, copy.deepcopy(rng.choice(voc.dicts or [{}]))])


def _reshape(rng: random.Random, x: Any, voc: Vocabulary) -> str:
    """Change a list (drop, move, duplicate, empty, truncate, reverse, append an element) or a
    dict (delete a key, add one, swap two values, empty it) in place."""
    if isinstance(x, list):
        x += [] if x else [copy.deepcopy(rng.choice(voc.dicts or [0]))]
        i, j = rng.randrange(len(x)), rng.randrange(len(x))
        extra = copy.deepcopy(x[i]) if isinstance(x[i], (list, dict)) else _new_value(rng, x[i], voc)
        op, edit = rng.choice([("drop", lambda: x.pop(i)), ("move", lambda: x.insert(j, x.pop(i))),
                               ("dup", lambda: x.insert(j, copy.deepcopy(x[i]))), ("empty", x.clear),
                               ("truncate", lambda: x.__delitem__(slice(len(x) // 2, None))),
                               ("reverse", x.reverse), ("append", lambda: x.append(extra))])
        edit()
        return f"{op} [{i}]/[{j}]"
    k1, k2 = (rng.choice(list(x)), rng.choice(list(x))) if x else ("kind", "kind")
    op = rng.choice(["del", "add", "swapvals", "clear"] if x else ["add"])
    if op == "del":
        del x[k1]
    elif op == "add":
        key = rng.choice(["extra", "kind", "cond", "stream", "event", "node", 7])
        x[key] = rng.choice([0, "x", None, [1]])
    elif op == "swapvals":
        x[k1], x[k2] = x[k2], x[k1]
    else:
        x.clear()
    return f"{op} {k1!r}/{k2!r}"


def _field(rng: random.Random, tree: dict, voc: Vocabulary) -> str:
    """Any node of the sections (often a count or a table): a leaf to a boundary value or
    another word, a container reshaped."""
    top = rng.random() < 0.3
    path = _pick_path(rng, tree, lambda p, v: not top or p[-1] in TOP_KEYS)
    if path is None:
        return "field: nothing"
    old = _get(tree, path)
    if isinstance(old, (list, dict)) and rng.random() < 0.8:
        return f"field {_fmt(path)}: {_reshape(rng, old, voc)}"
    return "field " + _put(tree, path, _new_value(rng, old, voc))


def _plausible(rng: random.Random, tree: dict, voc: Vocabulary) -> str:
    """A change that keeps the file plausible: a key's value to one seen under the same key
    elsewhere, a count bumped, tasks or kernels reordered or moved between streams."""
    op = rng.choice(["key", "key", "key", "bump", "order"])
    if op == "key":
        path = _pick_path(rng, tree, lambda p, v: isinstance(p[-1], str) and p[-1] in voc.by_key)
        if path:
            old = _get(tree, path)
            new = rng.choice([v for v in voc.by_key[path[-1]] if v != old] or [old])
            return "plausible " + _put(tree, path, copy.deepcopy(new))
    if op == "bump":
        keys = COUNT_KEYS[:7] if rng.random() < 0.5 else COUNT_KEYS
        path = _pick_path(rng, tree, lambda p, v: p[-1] in keys and isinstance(v, int)
                          and not isinstance(v, bool))
        if path:
            old = _get(tree, path)
            new = rng.choice([old + 1, old - 1, old * 2, old + 64, old - 64, old + 2**20, 2**62])
            return "bump " + _put(tree, path, max(-2**63, min(new, 2**64 - 1)))
    path = _pick_path(rng, tree, lambda p, v: isinstance(v, list) and len(v) > 1
                      and all(isinstance(e, (dict, list)) for e in v))
    if path is None:
        return "plausible: nothing"
    x = _get(tree, path)
    i, j = rng.sample(range(len(x)), 2)
    if isinstance(x[i], list) and x[i]:           # task lists of streams: move a task over
        k = rng.randrange(len(x[i]))
        x[j].insert(rng.randrange(len(x[j]) + 1), x[i].pop(k))
        return f"move {_fmt(path)}[{i}][{k}] to [{j}]"
    x[i], x[j] = x[j], x[i]
    return f"swap {_fmt(path)}[{i}] <-> [{j}]"


# ------------------------------------------------------------------ container and byte mutations
def _container(rng: random.Random, flags: int, secs: list[list]) -> tuple[int, str]:
    """Sections dropped, doubled, relabelled or replaced; checksums stay valid."""
    op = rng.choice(["drop", "flag", "garbage", "dup", "unknown", "kinds", "weights"])
    i, j = rng.randrange(len(secs)), rng.randrange(len(secs))
    if op == "drop":
        del secs[i]
    elif op == "flag":
        flags ^= rng.choice([1, 2, 1 << 31])
    elif op == "garbage":
        secs[i][2] = rng.choice([b"", b"\xc1", b"\x92\x01", msgpack.packb(rng.choice([[], {}, 0, "x"])),
                                 bytes(rng.randrange(256) for _ in range(64))])
    elif op == "dup":
        secs.append(copy.deepcopy(secs[i]))
    elif op == "unknown":
        secs.append([rng.choice([0, 9, 2**32 - 1]), rng.choice([0, 1]), {"x": 1}])
    elif op == "kinds":
        secs[i][0], secs[j][0] = secs[j][0], secs[i][0]
    else:
        w = next(s for s in secs if s[0] == WEIGHTS_KIND)
        w[2] = rng.choice([w[2][:len(w[2]) // 2], w[2] + bytes(64), bytes(len(w[2])),
                           b"\xff" * len(w[2])])
    return flags, f"container {op} {i}/{j}"


def _bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """The raw file changed: a bit, a byte, its length, a header field (its crc fixed or not),
    a field of a table entry (the table has no crc)."""
    b = bytearray(data)
    op = rng.choice(["flip", "byte", "truncate", "extend", "header", "table", "table"])
    pos = rng.randrange(len(b))
    if op == "flip":
        b[pos] ^= 1 << rng.randrange(8)
    elif op == "byte":
        b[pos] = rng.randrange(256)
    elif op == "truncate":
        del b[pos:]
    elif op == "extend":
        b += bytes(rng.randrange(1, 5000))
    else:
        count, toff = _HDR.unpack_from(b, 0)[5:7]
        at, fmt = rng.choice([(8, "<H"), (10, "<H"), (12, "<I"), (16, "<I"), (20, "<I"), (24, "<Q"),
                              (32, "<Q")] if op == "header" else
                             [(0, "<I"), (4, "<I"), (8, "<Q"), (16, "<Q"), (24, "<I")])
        pos = at + (0 if op == "header" else toff + 32 * rng.randrange(count))
        val = rng.choice([0, 1, 63, 64, 65, 4096, len(b) - 64, len(b), len(b) + 1, 2**31, 2**63])
        struct.pack_into(fmt, b, pos, val % (1 << 8 * struct.calcsize(fmt)))
        if op == "header" and rng.random() < 0.7:
            struct.pack_into("<I", b, 40, zlib.crc32(bytes(b[:40]) + bytes(4) + bytes(b[44:64])))
    return bytes(b), f"bytes {op} at {pos}"


def mutate(case: int, seeds: dict[str, bytes], vocab: dict[str, Vocabulary]) -> tuple[str, bytes, str]:
    """Case ``case``: its seed's name, the mutated file, and what was changed (a tenth of the
    cases change bytes, a fourteenth the container, a quarter build a hostile shape
    (:mod:`om_hostile`), the rest change fields)."""
    name, rng = SEEDS[case % len(SEEDS)], random.Random(case)
    r = rng.random()
    if r < 0.1:
        return (name, *_bytes(rng, seeds[name]))
    flags, secs = split(seeds[name])
    if r < 0.17:
        flags, what = _container(rng, flags, secs)
        return name, join(flags, secs), what
    from aircc.formats.om import KIND_NAMES
    tree = {KIND_NAMES[k]: p for k, _, p in secs if k != WEIGHTS_KIND}
    if r < 0.42:
        shape = om_hostile.pick(rng)
        if shape == "endless":
            return om_hostile.ENDLESS, seeds[om_hostile.ENDLESS], "hostile endless: the seed as it is"
        what = om_hostile.SHAPES[shape](rng, tree, secs)
        return name, join(flags, secs), f"hostile {what}"
    ops = [_field if rng.random() < 0.5 else _plausible for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    what = "; ".join(op(rng, tree, vocab[name]) for op in ops)
    return name, join(flags, secs), what

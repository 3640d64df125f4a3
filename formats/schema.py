"""Schemas of the .om sections: the structure and types of each payload.

The same checks run when a model is written (so a compiler cannot produce a
file the reader rejects) and when it is read.  They look at structure and
types only, never at kernel semantics.  Every failure is a ModelFormatError
whose message starts with ``section '<name>':``.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from aircc.errors import ModelFormatError

#: Revision of the payload schemas below; bumped whenever a payload's shape changes.
SCHEMA_VERSION = 1

MODES = ("static", "dynamic")

#: Sections a user puts in ``OmFile.sections`` (weights/weight_table belong to the format).
SECTION_NAMES = ("model", "tasks", "memory_plan", "tiling", "exec_graph", "gears")

#: User-facing sections each mode must have (the format always adds weights + weight_table).
REQUIRED_SECTIONS: dict[str, tuple[str, ...]] = {
    "static": ("model", "tasks", "memory_plan", "tiling"),
    "dynamic": ("model", "exec_graph", "tiling"),
}

TASK_KINDS = frozenset({"kernel", "event_record", "event_wait",
                        "memcpy_h2d", "memcpy_d2h", "model_end",
                        "label", "goto", "switch"})

#: dtype names allowed for weights and for ndarrays inside payloads (stored little-endian).
DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64",
                    "uint8", "uint16", "uint32", "uint64",
                    "float16", "float32", "float64", "complex64", "complex128"})

MEMORY_PLAN_INTS = ("arena_bytes", "lower_bound_bytes", "no_reuse_bytes",
                    "weights_bytes", "alignment")


def dtype_from_name(name: Any) -> np.dtype:
    """The little-endian numpy dtype for a stored dtype name; ValueError if not allowed."""
    if not isinstance(name, str) or name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r} (known: {', '.join(sorted(DTYPES))})")
    return np.dtype(name).newbyteorder("<")


def dtype_name(dtype: np.dtype) -> str | None:
    """The stored name of a numpy dtype, or None if the format cannot store it."""
    name = dtype.name if dtype.kind in "biufc" else None
    return name if name in DTYPES else None


def array_spec(dtype: Any, shape: Any, nbytes: Any) -> tuple[np.dtype, tuple[int, ...]]:
    """Check a stored array's dtype name, shape and byte size; ValueError if inconsistent."""
    dt = dtype_from_name(dtype)
    if (not isinstance(shape, (list, tuple)) or len(shape) > 64
            or not all(_is_int(d) and d >= 0 for d in shape)):
        raise ValueError(f"shape must be a list of at most 64 ints >= 0, got {shape!r}")
    expect = math.prod(shape) * dt.itemsize
    if nbytes != expect:
        raise ValueError(f"nbytes is {nbytes} but shape {list(shape)} of {dt.name} "
                         f"needs {expect}")
    return dt, tuple(shape)


# ------------------------------------------------------------------ helpers
def _desc(x: Any) -> str:
    r = repr(x)
    return f"{type(x).__name__} {r[:40] + '...' if len(r) > 40 else r}"


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class _Check:
    """Typed accessors that raise ModelFormatError naming the section and the path."""

    def __init__(self, section: str):
        self.section = section

    def fail(self, where: str, msg: str) -> NoReturn:
        loc = f"{where} " if where else ""
        raise ModelFormatError(f"section '{self.section}': {loc}{msg}")

    def dict(self, x: Any, where: str) -> Mapping:
        if not isinstance(x, Mapping):
            self.fail(where, f"must be a dict, got {_desc(x)}")
        return x

    def list(self, x: Any, where: str) -> Sequence:
        if not isinstance(x, (list, tuple)):
            self.fail(where, f"must be a list, got {_desc(x)}")
        return x

    def get(self, d: Mapping, key: str, where: str) -> Any:
        if key not in d:
            self.fail(where, f"is missing key '{key}'" if where else f"missing key '{key}'")
        return d[key]

    def str(self, d: Mapping, key: str, where: str) -> str:
        v = self.get(d, key, where)
        if not isinstance(v, str):
            self.fail(_join(where, key), f"must be a str, got {_desc(v)}")
        return v

    def int(self, d: Mapping, key: str, where: str, lo: int | None = None,
            hi: int | None = None) -> int:
        v = self.get(d, key, where)
        bad = not _is_int(v) or (lo is not None and v < lo) or (hi is not None and v >= hi)
        if bad:
            rng = "" if lo is None else f" >= {lo}" if hi is None else f" in [{lo}, {hi})"
            self.fail(_join(where, key), f"must be an int{rng}, got {_desc(v)}")
        return v


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


# ------------------------------------------------------------------ sections
def _model(c: _Check, p: Any) -> None:
    d = c.dict(p, "")
    c.str(d, "name", "")
    mode = c.str(d, "mode", "")
    if mode not in MODES:
        c.fail("mode", f"must be 'static' or 'dynamic', got {mode!r}")
    c.str(d, "producer", "")
    opsets = c.dict(c.get(d, "opsets", ""), "opsets")
    for dom, ver in opsets.items():
        if not isinstance(dom, str) or not _is_int(ver):
            c.fail("opsets", f"must map str to int, got {_desc(dom)} -> {_desc(ver)}")
    for key in ("inputs", "outputs"):
        for i, t in enumerate(c.list(c.get(d, key, ""), key)):
            w = f"{key}[{i}]"
            td = c.dict(t, w)
            c.str(td, "name", w)
            c.str(td, "dtype", w)
            shape = c.get(td, "shape", w)
            if shape is None:
                continue      # rank known only at run time (dynamic models)
            for j, dim in enumerate(c.list(shape, f"{w}.shape")):
                if not (_is_int(dim) or isinstance(dim, str)):
                    c.fail(f"{w}.shape[{j}]", f"must be an int or a str, got {_desc(dim)}")


def _tasks(c: _Check, p: Any) -> None:
    d = c.dict(p, "")
    streams = c.int(d, "streams", "", lo=1)
    events = c.int(d, "events", "", lo=0)
    lists = c.list(c.get(d, "lists", ""), "lists")
    if len(lists) != streams:
        c.fail("lists", f"has {len(lists)} task lists but streams is {streams}")
    recorded: Counter[int] = Counter()
    waited: Counter[int] = Counter()
    labels: dict[int, list[int]] = {s: [] for s in range(len(lists))}
    jumps: dict[int, list[int]] = {s: [] for s in range(len(lists))}
    for s, tl in enumerate(lists):
        for i, t in enumerate(c.list(tl, f"lists[{s}]")):
            w = f"lists[{s}][{i}]"
            td = c.dict(t, w)
            kind = c.get(td, "kind", w)
            if kind not in TASK_KINDS:
                c.fail(f"{w}.kind", f"must be one of {sorted(TASK_KINDS)}, got {_desc(kind)}")
            if kind == "kernel":
                c.str(td, "op", w)
                c.str(td, "node", w)
                c.list(c.get(td, "inputs", w), f"{w}.inputs")
                c.list(c.get(td, "outputs", w), f"{w}.outputs")
            elif kind in ("event_record", "event_wait"):
                ev = c.int(td, "event", w, lo=0, hi=events)
                (recorded if kind == "event_record" else waited)[ev] += 1
            elif kind in ("memcpy_h2d", "memcpy_d2h"):
                c.int(td, "binding", w, lo=0)
            elif kind in ("label", "goto", "switch"):
                label = c.int(td, "label", w, lo=0)
                (labels[s] if kind == "label" else jumps[s]).append(label)
                if kind == "switch":
                    c.dict(c.get(td, "cond", w), f"{w}.cond")
        missing = sorted(set(jumps[s]) - set(labels[s]))
        if missing:
            c.fail(f"lists[{s}]", f"jumps to labels {missing} that the list does not define")
        if len(set(labels[s])) != len(labels[s]):
            c.fail(f"lists[{s}]", "defines a label twice")
    for ev, n in sorted(recorded.items()):
        if n != 1:
            c.fail("", f"event {ev} is recorded {n} times (must be exactly once)")
    for table, what in ((recorded, "recorded"), (waited, "waited on")):
        if len(table) < events:  # loop is bounded by len(table) + 1
            ev = next(e for e in range(events) if e not in table)
            c.fail("", f"event {ev} is never {what} (events = {events})")


def _memory_plan(c: _Check, p: Any) -> None:
    d = c.dict(p, "")
    for key in MEMORY_PLAN_INTS:
        c.int(d, key, "", lo=0)
    arena = d["arena_bytes"]
    for i, b in enumerate(c.list(c.get(d, "buffers", ""), "buffers")):
        w = f"buffers[{i}]"
        bd = c.dict(b, w)
        c.str(bd, "name", w)
        off = c.int(bd, "offset", w, lo=0)
        size = c.int(bd, "size", w, lo=0)
        c.int(bd, "first_task", w)
        c.int(bd, "last_task", w)
        if off + size > arena:
            c.fail(w, f"('{bd['name']}') offset {off} + size {size} exceeds arena_bytes {arena}")
    for i, a in enumerate(c.list(d.get("aliases", []), "aliases")):
        w = f"aliases[{i}]"
        ad = c.dict(a, w)
        c.str(ad, "name", w)
        c.str(ad, "of", w)
        if c.int(ad, "offset", w, lo=0) > arena:
            c.fail(w, f"('{ad['name']}') offset {ad['offset']} exceeds arena_bytes {arena}")


def _tiling(c: _Check, p: Any) -> None:
    d = c.dict(p, "")
    for i, e in enumerate(c.list(c.get(d, "entries", ""), "entries")):
        c.dict(e, f"entries[{i}]")


def _any_dict(c: _Check, p: Any) -> None:
    c.dict(p, "")


_VALIDATORS = {"model": _model, "tasks": _tasks, "memory_plan": _memory_plan,
               "tiling": _tiling, "exec_graph": _any_dict, "gears": _any_dict}


# ------------------------------------------------------------------ public
def validate_section(name: str, payload: Any) -> None:
    """Check one user-facing section payload; raise ModelFormatError if it is malformed."""
    check = _VALIDATORS.get(name)
    if check is None:
        hint = " (weights go in OmFile.weights)" if name in ("weights", "weight_table") else ""
        raise ModelFormatError(f"unknown section '{name}'{hint}; "
                               f"known sections: {', '.join(SECTION_NAMES)}")
    check(_Check(name), payload)


def missing_sections(mode: str, names: Any) -> list[str]:
    """Required sections of ``mode`` not among ``names``, in canonical order."""
    present = set(names)
    return [n for n in REQUIRED_SECTIONS[mode] if n not in present]


def validate_sections(mode: str, sections: Mapping[str, Any]) -> None:
    """Check a whole ``OmFile.sections`` dict for ``mode``: names, required sections,
    each payload, and that section 'model' has the same mode."""
    if mode not in MODES:
        raise ModelFormatError(f"mode must be 'static' or 'dynamic', got {mode!r}")
    for name in sections:
        if name not in _VALIDATORS:
            validate_section(name, None)  # raises 'unknown section'
    missing = missing_sections(mode, sections)
    if missing:
        raise ModelFormatError(f"missing section '{missing[0]}' (required for {mode} models)")
    for name, payload in sections.items():
        validate_section(name, payload)
    if sections["model"]["mode"] != mode:
        raise ModelFormatError(f"mode is '{mode}' but section 'model' has mode "
                               f"'{sections['model']['mode']}'")


def validate_weight_table(table: Any, section_size: int,
                          alignment: int) -> list[tuple[str, np.dtype, tuple[int, ...], int, int]]:
    """Check the weight table against a weights section of ``section_size`` bytes.

    Returns ``(name, dtype, shape, offset, nbytes)`` per entry, offsets relative
    to the start of the weights section.
    """
    c = _Check("weight_table")
    out = []
    seen: set[str] = set()
    for i, e in enumerate(c.list(table, "")):
        w = f"entry {i}"
        ed = c.dict(e, w)
        name = c.str(ed, "name", w)
        w = f"entry {i} ('{name}')"
        if name in seen:
            c.fail(w, "is a duplicate weight name")
        seen.add(name)
        offset = c.int(ed, "offset", w, lo=0)
        nbytes = c.int(ed, "nbytes", w, lo=0)
        try:
            dtype, shape = array_spec(c.get(ed, "dtype", w), c.get(ed, "shape", w), nbytes)
        except ValueError as exc:
            c.fail(w, str(exc))
        if offset % alignment:
            c.fail(w, f"offset {offset} is not aligned to {alignment} bytes")
        if offset + nbytes > section_size:
            c.fail(w, f"offset {offset} + nbytes {nbytes} points outside the weights "
                      f"section ({section_size} bytes)")
        out.append((name, dtype, shape, offset, nbytes))
    spans = sorted((off, off + n, name) for name, _, _, off, n in out if n)
    for (_, end_a, a), (start_b, _, b) in zip(spans, spans[1:]):
        if start_b < end_a:
            c.fail("", f"weights '{a}' and '{b}' overlap")
    return out

"""Section ``memory_plan``: where a static model's buffers and weights sit.

The arena holds every activation and workspace, at offsets decided at compile
time; buffers whose lifetimes never overlap (along happens-before) share bytes.
The weights region holds the constants tasks read, at their own offsets.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .checks import Checker

MEMORY_PLAN_INTS = ("arena_bytes", "lower_bound_bytes", "no_reuse_bytes",
                    "weights_bytes", "alignment")


@dataclass(frozen=True)
class BufferRecord:
    """One buffer of the arena and its lifetime in task ids."""

    name: str
    offset: int
    size: int
    first_task: int
    last_task: int
    readers: tuple[int, ...] = ()
    writers: tuple[int, ...] = ()

    def to_payload(self) -> dict:
        return {"name": self.name, "offset": self.offset, "size": self.size,
                "first_task": self.first_task, "last_task": self.last_task,
                "readers": list(self.readers), "writers": list(self.writers)}


@dataclass(frozen=True)
class AliasRecord:
    """A value placed inside another buffer (a Concat part, a reshape's output)."""

    name: str
    of: str
    offset: int

    def to_payload(self) -> dict:
        return {"name": self.name, "of": self.of, "offset": self.offset}


@dataclass(frozen=True)
class WeightRecord:
    """A weight the tasks read, at ``offset`` of the weights region."""

    name: str
    offset: int
    size: int

    def to_payload(self) -> dict:
        return {"name": self.name, "offset": self.offset, "size": self.size}


@dataclass
class MemoryPlanSection:
    """Section ``memory_plan``."""

    arena_bytes: int
    lower_bound_bytes: int
    no_reuse_bytes: int
    weights_bytes: int
    alignment: int
    strategy: str = ""
    buffers: list[BufferRecord] = field(default_factory=list)
    aliases: list[AliasRecord] = field(default_factory=list)
    weights: list[WeightRecord] = field(default_factory=list)

    @staticmethod
    def parse(payload: Any, section: str = "memory_plan", prefix: str = "",
              max_records: int | None = None) -> "MemoryPlanSection":
        """``max_records``: the most buffers (aliases, weights, readers of one buffer) the
        plan may have, checked before any is read (:mod:`.section_limits`)."""
        c = Checker(section, prefix)
        d = c.dict(payload, "")
        if max_records is not None:
            for key in ("buffers", "aliases", "weights"):
                n = len(d[key]) if isinstance(d.get(key), list) else 0
                if n > max_records:
                    c.fail(key, f"has {n} records, more than the tasks' operands allow "
                                f"({max_records})")
        ints = {key: c.int(d, key, "", lo=0) for key in MEMORY_PLAN_INTS}
        arena, wbytes = ints["arena_bytes"], ints["weights_bytes"]
        if ints["alignment"] < 1:
            c.fail("alignment", f"must be an int >= 1, got int {ints['alignment']}")
        strategy = d.get("strategy", "")
        if not isinstance(strategy, str):
            c.fail("strategy", "must be a str")
        buffers = []
        for i, b in enumerate(c.list(c.get(d, "buffers", ""), "buffers")):
            w = f"buffers[{i}]"
            bd = c.dict(b, w)
            for key in ("readers", "writers"):
                if max_records is not None and isinstance(bd.get(key), list) \
                        and len(bd[key]) > max_records:
                    c.fail(f"{w}.{key}", f"has {len(bd[key])} tasks, more than the plan has")
            rec = BufferRecord(c.str(bd, "name", w), c.int(bd, "offset", w, lo=0),
                               c.int(bd, "size", w, lo=0), c.int(bd, "first_task", w),
                               c.int(bd, "last_task", w),
                               tuple(c.int_value(t, f"{w}.readers[{k}]") for k, t in
                                     enumerate(c.list(bd.get("readers", []), f"{w}.readers"))),
                               tuple(c.int_value(t, f"{w}.writers[{k}]") for k, t in
                                     enumerate(c.list(bd.get("writers", []), f"{w}.writers"))))
            if rec.offset + rec.size > arena:
                c.fail(w, f"('{rec.name}') offset {rec.offset} + size {rec.size} exceeds "
                          f"arena_bytes {arena}")
            buffers.append(rec)
        aliases = []
        for i, a in enumerate(c.list(d.get("aliases", []), "aliases")):
            w = f"aliases[{i}]"
            ad = c.dict(a, w)
            rec = AliasRecord(c.str(ad, "name", w), c.str(ad, "of", w), c.int(ad, "offset", w, lo=0))
            if rec.offset > arena:
                c.fail(w, f"('{rec.name}') offset {rec.offset} exceeds arena_bytes {arena}")
            aliases.append(rec)
        weights = []
        for i, x in enumerate(c.list(d.get("weights", []), "weights")):
            w = f"weights[{i}]"
            xd = c.dict(x, w)
            rec = WeightRecord(c.str(xd, "name", w), c.int(xd, "offset", w, lo=0),
                               c.int(xd, "size", w, lo=0))
            if rec.offset + rec.size > wbytes:
                c.fail(w, f"('{rec.name}') offset {rec.offset} + size {rec.size} exceeds "
                          f"weights_bytes {wbytes}")
            weights.append(rec)
        return MemoryPlanSection(arena, ints["lower_bound_bytes"], ints["no_reuse_bytes"], wbytes,
                                 ints["alignment"], strategy, buffers, aliases, weights)

    def to_payload(self) -> dict:
        return {"arena_bytes": self.arena_bytes, "lower_bound_bytes": self.lower_bound_bytes,
                "no_reuse_bytes": self.no_reuse_bytes, "weights_bytes": self.weights_bytes,
                "alignment": self.alignment, "strategy": self.strategy,
                "buffers": [b.to_payload() for b in self.buffers],
                "aliases": [a.to_payload() for a in self.aliases],
                "weights": [w.to_payload() for w in self.weights]}

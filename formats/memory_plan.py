"""Section ``memory_plan``: where a static model's buffers and weights sit.

The arena holds every activation and workspace, at offsets decided at compile
time; buffers whose lifetimes never overlap (along happens-before) share bytes.
The weights region holds the constants tasks read, at their own offsets.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checks import Checker
from .schema import Int, ListOf, Nested, Record, Str, wire


@dataclass(frozen=True)
class BufferRecord(Record):
    """One buffer of the arena and its lifetime in task ids."""

    name: str = wire(Str())
    offset: int = wire(Int(lo=0))
    size: int = wire(Int(lo=0))
    first_task: int = wire(Int())
    last_task: int = wire(Int())
    readers: tuple[int, ...] = wire(ListOf(Int(), as_tuple=True), ())
    writers: tuple[int, ...] = wire(ListOf(Int(), as_tuple=True), ())


@dataclass(frozen=True)
class AliasRecord(Record):
    """A value placed inside another buffer (a Concat part, a reshape's output)."""

    name: str = wire(Str())
    of: str = wire(Str())
    offset: int = wire(Int(lo=0))


@dataclass(frozen=True)
class WeightRecord(Record):
    """A weight the tasks read, at ``offset`` of the weights region."""

    name: str = wire(Str())
    offset: int = wire(Int(lo=0))
    size: int = wire(Int(lo=0))


#: Lists of records a plan holds, each at most as long as the tasks' operands allow.
RECORD_LISTS = ("buffers", "aliases", "weights")


@dataclass
class MemoryPlanSection(Record):
    """Section ``memory_plan``."""

    arena_bytes: int = wire(Int(lo=0))
    lower_bound_bytes: int = wire(Int(lo=0))
    no_reuse_bytes: int = wire(Int(lo=0))
    weights_bytes: int = wire(Int(lo=0))
    alignment: int = wire(Int(lo=1))
    strategy: str = wire(Str(), "")
    buffers: list[BufferRecord] = wire(ListOf(Nested(BufferRecord)), [], required=True)
    aliases: list[AliasRecord] = wire(ListOf(Nested(AliasRecord)), [])
    weights: list[WeightRecord] = wire(ListOf(Nested(WeightRecord)), [])

    @classmethod
    def parse(cls, payload: Any, section: str = "memory_plan", prefix: str = "",
              max_records: int | None = None) -> "MemoryPlanSection":
        """``max_records``: the most buffers (aliases, weights, readers of one buffer) the
        plan may have, checked before any is read (:mod:`.section_limits`)."""
        c = Checker(section, prefix)
        if max_records is not None and isinstance(payload, Mapping):
            for key in RECORD_LISTS:
                n = len(payload[key]) if isinstance(payload.get(key), list) else 0
                if n > max_records:
                    c.fail(key, f"has {n} records, more than the tasks' operands allow "
                                f"({max_records})")
            buffers = payload.get("buffers")
            for i, b in enumerate(buffers if isinstance(buffers, list) else ()):
                for key in ("readers", "writers"):
                    if isinstance(b, Mapping) and isinstance(b.get(key), list) \
                            and len(b[key]) > max_records:
                        c.fail(f"buffers[{i}].{key}", f"has {len(b[key])} tasks, more than the "
                                                       f"plan has")
        return cls.read(c, payload, "")

    def check(self, c: Checker, where: str) -> None:
        """Every buffer and alias lies inside the arena, every weight record inside the
        weights region."""
        arena, wbytes = self.arena_bytes, self.weights_bytes
        for i, b in enumerate(self.buffers):
            if b.offset + b.size > arena:
                c.fail(f"buffers[{i}]", f"('{b.name}') offset {b.offset} + size {b.size} exceeds "
                                        f"arena_bytes {arena}")
        for i, a in enumerate(self.aliases):
            if a.offset > arena:
                c.fail(f"aliases[{i}]", f"('{a.name}') offset {a.offset} exceeds arena_bytes {arena}")
        for i, w in enumerate(self.weights):
            if w.offset + w.size > wbytes:
                c.fail(f"weights[{i}]", f"('{w.name}') offset {w.offset} + size {w.size} exceeds "
                                        f"weights_bytes {wbytes}")

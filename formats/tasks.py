"""Sections ``tasks`` and ``tiling``: a static model's per-stream task lists.

Every operand of a task is an address decided at compile time: a region the
model owns (its activation arena or its weights), an offset, a dtype and a
shape.  Checks here are per section (kinds, events recorded once, labels
defined); :mod:`.contract` checks the addresses against the memory plan.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from .checks import Checker, stream_priorities
from .kinds import Impl, Region, TaskKind
from .node_signature import check_signature
from .schema import JsonMap, ListOf, Record, wire

#: Most streams a model may ask for: each is a device worker thread.
MAX_STREAMS = 256


@dataclass(slots=True)
class Operand:
    """A tensor at a fixed device address."""

    region: Region
    offset: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Exact (no fixed-width overflow: a forged shape cannot wrap around to a small size)."""
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    @staticmethod
    def parse(c: Checker, x: Any, where: str) -> "Operand":
        d = c.dict(x, where)
        return Operand(c.kind(d, "mem", where, Region), c.int(d, "offset", where, lo=0),
                       c.dtype(d, "dtype", where), c.static_shape(d, "shape", where))

    def to_payload(self) -> dict:
        return {"mem": self.region._value_, "offset": self.offset, "dtype": self.dtype,
                "shape": list(self.shape)}


@dataclass(slots=True)
class Workspace:
    """Scratch bytes of a kernel, in the arena."""

    region: Region
    offset: int
    size: int

    @staticmethod
    def parse(c: Checker, x: Any, where: str) -> "Workspace":
        d = c.dict(x, where)
        return Workspace(c.kind(d, "mem", where, Region), c.int(d, "offset", where, lo=0),
                         c.int(d, "size", where, lo=0))

    def to_payload(self) -> dict:
        return {"mem": self.region._value_, "offset": self.offset, "size": self.size}


@dataclass(slots=True)
class KernelTask:
    """Run one node's kernel."""

    id: int
    op: str
    domain: str
    version: int
    node: str
    impl: Impl
    inputs: list[Operand | None]
    outputs: list[Operand | None]
    attrs: dict
    tiling: int
    """Index into the tiling section's entries."""
    workspace: Workspace | None = None
    kind: TaskKind = TaskKind.KERNEL

    def operands(self) -> list[tuple[str, Operand]]:
        """(field path, operand) of every address the task touches."""
        out = [(f"inputs[{i}]", o) for i, o in enumerate(self.inputs) if o is not None]
        out += [(f"outputs[{i}]", o) for i, o in enumerate(self.outputs) if o is not None]
        return out

    def to_payload(self) -> dict:
        return {"kind": self.kind._value_, "id": self.id, "op": self.op, "domain": self.domain,
                "version": self.version, "node": self.node, "impl": self.impl._value_,
                "inputs": [None if o is None else o.to_payload() for o in self.inputs],
                "outputs": [None if o is None else o.to_payload() for o in self.outputs],
                "attrs": self.attrs, "tiling": self.tiling,
                "workspace": None if self.workspace is None else self.workspace.to_payload()}


@dataclass(slots=True)
class EventTask:
    """Record or wait on an event (Signal / Wait between streams)."""

    id: int
    kind: TaskKind
    event: int

    def operands(self) -> list:
        return []

    def to_payload(self) -> dict:
        return {"kind": self.kind._value_, "id": self.id, "event": self.event}


@dataclass(slots=True)
class CopyTask:
    """Copy a feed in (``memcpy_h2d``, into ``operand``) or a result out (``memcpy_d2h``)."""

    id: int
    kind: TaskKind
    binding: int
    """The input (h2d) or output (d2h) it serves, by position."""
    operand: Operand

    def operands(self) -> list[tuple[str, Operand]]:
        return [("dst" if self.kind is TaskKind.MEMCPY_H2D else "src", self.operand)]

    def to_payload(self) -> dict:
        key = "dst" if self.kind is TaskKind.MEMCPY_H2D else "src"
        return {"kind": self.kind._value_, "id": self.id, "binding": self.binding,
                key: self.operand.to_payload()}


@dataclass(slots=True)
class JumpTask:
    """A label, an unconditional jump to one, or a switch on a device boolean."""

    id: int
    kind: TaskKind
    label: int
    cond: Operand | None = None

    def operands(self) -> list[tuple[str, Operand]]:
        return [] if self.cond is None else [("cond", self.cond)]

    def to_payload(self) -> dict:
        out = {"kind": self.kind._value_, "id": self.id, "label": self.label}
        if self.kind is TaskKind.SWITCH:
            out["cond"] = self.cond.to_payload()     # type: ignore[union-attr]
        return out


Task = Union[KernelTask, EventTask, CopyTask, JumpTask]


def _kernel(c: Checker, d: Mapping, where: str, tid: int) -> KernelTask:
    def operands(key: str) -> list[Operand | None]:
        return [None if o is None else Operand.parse(c, o, f"{where}.{key}[{i}]")
                for i, o in enumerate(c.list(c.get(d, key, where), f"{where}.{key}"))]

    ws = d.get("workspace")
    impl = c.kind(d, "impl", where, Impl) if "impl" in d else Impl.NATIVE
    task = KernelTask(tid, c.str(d, "op", where), c.str(d, "domain", where),
                      c.int(d, "version", where, lo=0), c.str(d, "node", where), impl,
                      operands("inputs"), operands("outputs"),
                      dict(c.dict(c.get(d, "attrs", where), f"{where}.attrs")),
                      c.int(d, "tiling", where, lo=0),
                      None if ws is None else Workspace.parse(c, ws, f"{where}.workspace"))
    check_signature(c, where, f"node '{task.node}'", task.domain, task.op, task.version,
                    task.inputs, task.outputs, task.attrs)
    return task


def parse_task(c: Checker, x: Any, where: str) -> Task:
    """One task of any kind."""
    d = c.dict(x, where)
    kind = c.kind(d, "kind", where, TaskKind)
    tid = c.int(d, "id", where, lo=0)
    if kind is TaskKind.KERNEL:
        return _kernel(c, d, where, tid)
    if kind in (TaskKind.EVENT_RECORD, TaskKind.EVENT_WAIT):
        return EventTask(tid, kind, c.int(d, "event", where, lo=0))
    if kind in (TaskKind.MEMCPY_H2D, TaskKind.MEMCPY_D2H):
        key = "dst" if kind is TaskKind.MEMCPY_H2D else "src"
        return CopyTask(tid, kind, c.int(d, "binding", where, lo=0),
                        Operand.parse(c, c.get(d, key, where), f"{where}.{key}"))
    label = c.int(d, "label", where, lo=0)
    cond = Operand.parse(c, c.get(d, "cond", where), f"{where}.cond") \
        if kind is TaskKind.SWITCH else None
    return JumpTask(tid, kind, label, cond)


@dataclass(slots=True)
class TasksSection:
    """Section ``tasks``: one task list per stream, and the events that order them."""

    streams: int
    events: int
    lists: list[list[Task]]
    count: int
    """Tasks in all (the ids run from 0 to count - 1)."""
    priorities: list[int] = field(default_factory=list)
    """Each stream's priority (higher is served first; empty: all 0)."""

    @staticmethod
    def parse(payload: Any, section: str = "tasks", prefix: str = "") -> "TasksSection":
        c = Checker(section, prefix)
        d = c.dict(payload, "")
        streams = c.int(d, "streams", "", lo=1, hi=MAX_STREAMS + 1)
        events = c.int(d, "events", "", lo=0)
        raw = c.list(c.get(d, "lists", ""), "lists")
        if len(raw) != streams:
            c.fail("lists", f"has {len(raw)} task lists but streams is {streams}")
        for s, tl in enumerate(raw):
            if not c.list(tl, f"lists[{s}]"):
                c.fail(f"lists[{s}]", "is empty: every stream has tasks")
        lists = [[parse_task(c, t, f"lists[{s}][{i}]") for i, t in enumerate(c.list(tl, f"lists[{s}]"))]
                 for s, tl in enumerate(raw)]
        total = sum(len(tl) for tl in lists)
        count = c.int(d, "count", "", lo=0) if "count" in d else total
        if count != total:
            c.fail("count", f"is {count}, but the lists hold {total} tasks")
        section_ = TasksSection(streams, events, lists, count, stream_priorities(c, d, streams))
        section_.check(c)
        return section_

    def check(self, c: Checker) -> None:
        """Events in range, each recorded exactly once and waited on; labels defined once
        per list and every jump's label defined in its list; ids unique and below count."""
        recorded: Counter[int] = Counter()
        waited: Counter[int] = Counter()
        ids: set[int] = set()
        for s, tl in enumerate(self.lists):
            labels: list[int] = []
            jumps: list[int] = []
            for i, t in enumerate(tl):
                w = f"lists[{s}][{i}]"
                if t.id >= self.count or t.id in ids:
                    c.fail(f"{w}.id", f"must be a unique task id below count {self.count}, got {t.id}")
                ids.add(t.id)
                if isinstance(t, EventTask):
                    if t.event >= self.events:
                        c.fail(f"{w}.event", f"must be an int in [0, {self.events}), got int {t.event}")
                    (recorded if t.kind is TaskKind.EVENT_RECORD else waited)[t.event] += 1
                elif isinstance(t, JumpTask):
                    (labels if t.kind is TaskKind.LABEL else jumps).append(t.label)
            missing = sorted(set(jumps) - set(labels))
            if missing:
                c.fail(f"lists[{s}]", f"jumps to labels {missing} that the list does not define")
            if len(set(labels)) != len(labels):
                c.fail(f"lists[{s}]", "defines a label twice")
        for ev, n in sorted(recorded.items()):
            if n != 1:
                c.fail("", f"event {ev} is recorded {n} times (must be exactly once)")
        for table, what in ((recorded, "recorded"), (waited, "waited on")):
            if len(table) < self.events:
                ev = next(e for e in range(self.events) if e not in table)
                c.fail("", f"event {ev} is never {what} (events = {self.events})")

    def to_payload(self) -> dict:
        out = {"streams": self.streams, "events": self.events, "count": self.count,
               "lists": [[t.to_payload() for t in tl] for tl in self.lists]}
        if any(self.priorities):
            out["priorities"] = list(self.priorities)
        return out


@dataclass(slots=True)
class TilingSection(Record):
    """Section ``tiling``: each kernel task's tiling data (backend-defined dicts)."""

    entries: list[dict] = wire(ListOf(JsonMap()))

    @classmethod
    def parse(cls, payload: Any, section: str = "tiling", prefix: str = "") -> "TilingSection":
        return cls.read(Checker(section, prefix), payload, "")

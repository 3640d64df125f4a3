"""Sections described once: a record is a dataclass whose fields say how they are stored.

Each field is declared with :func:`wire` and a wire type (:class:`Str`, :class:`Int` with
its bounds, :class:`ListOf`, :class:`MapOf`, :class:`Nested`, ...), and a default when the
key may be absent from a file::

    @dataclass(frozen=True)
    class TargetRecord(Record):
        name: str = wire(Str())
        backend: str = wire(Str())
        vector_class: str = wire(Str())

From that description come the record's strict reading (:meth:`Record.read`, every failure a
ModelFormatError naming the section and the field's path), its payload
(:meth:`Record.to_payload`), what ``aircc inspect`` shows of it (:func:`summary`) and the
type column of its table in ``docs/om-format.md`` (:func:`field_rows`), so adding a field
is one line here plus the doc's row.  What no field's type can say (a check between
fields or between sections, a bound known only as the file is read) is the record's
:meth:`Record.check` hook or a field's ``read`` hook.
"""
from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

from .checks import Checker, describe, is_int


class Wire:
    """How a field's value is stored: read (checked), written, and named in the docs."""

    def read(self, c: Checker, v: Any, where: str) -> Any:
        raise NotImplementedError

    def write(self, v: Any) -> Any:
        return v

    def text(self) -> str:
        raise NotImplementedError


class Scalar(Wire):
    """A value with no parts: a map of them reports a bad entry as ``must map str to <type>``."""

    def accepts(self, v: Any) -> bool:
        raise NotImplementedError


def alternatives(values: list[str]) -> str:
    """``'a', 'b' or 'c'``."""
    quoted = [repr(v) for v in values]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


class Str(Scalar):
    """A str, optionally one of ``choices``."""

    def __init__(self, choices: tuple[str, ...] = ()):
        self.choices = choices

    def read(self, c: Checker, v: Any, where: str) -> str:
        if not isinstance(v, str):
            c.fail(where, f"must be a str, got {describe(v)}")
        if self.choices and v not in self.choices:
            c.fail(where, f"must be {alternatives(list(self.choices))}, got {v!r}")
        return v

    def accepts(self, v: Any) -> bool:
        return isinstance(v, str) and (not self.choices or v in self.choices)

    def text(self) -> str:
        return " \\| ".join(f"`{v}`" for v in self.choices) if self.choices else "str"


class Int(Scalar):
    """An int (never a bool) in ``[lo, hi)``; either bound may be open."""

    def __init__(self, lo: int | None = None, hi: int | None = None):
        self.lo, self.hi = lo, hi

    def read(self, c: Checker, v: Any, where: str) -> int:
        return c.int_value(v, where, self.lo, self.hi)

    def accepts(self, v: Any) -> bool:
        return (is_int(v) and (self.lo is None or v >= self.lo)
                and (self.hi is None or v < self.hi))

    def text(self) -> str:
        if self.lo is None:
            return "int"
        return f"int >= {self.lo}" if self.hi is None else f"int in [{self.lo}, {self.hi})"


class SymbolicShape(Wire):
    """Nil (rank unknown), or a list of ints >= 0 and symbols (strs): a tuple when read."""

    def read(self, c: Checker, v: Any, where: str) -> tuple | None:
        return c.symbolic_shape_of(v, where)

    def write(self, v: tuple | None) -> list | None:
        return None if v is None else list(v)

    def text(self) -> str:
        return "list of int >= 0 or str, or nil"


class ListOf(Wire):
    """A list of ``item``; a tuple when read with ``as_tuple``."""

    def __init__(self, item: Wire, as_tuple: bool = False):
        self.item, self.as_tuple = item, as_tuple

    def read(self, c: Checker, v: Any, where: str) -> list | tuple:
        read = self.item.read
        out = [read(c, x, f"{where}[{i}]") for i, x in enumerate(c.list(v, where))]
        return tuple(out) if self.as_tuple else out

    def write(self, v: list | tuple) -> list:
        write = self.item.write
        return [write(x) for x in v]

    def text(self) -> str:
        return f"list of {self.item.text()}"


class MapOf(Wire):
    """A map from str to ``value``."""

    def __init__(self, value: Wire):
        self.value = value

    def read(self, c: Checker, v: Any, where: str) -> dict:
        d = c.dict(v, where)
        out = {}
        scalar = isinstance(self.value, Scalar)
        for k, x in d.items():
            if scalar:
                if not isinstance(k, str) or not self.value.accepts(x):  # type: ignore[attr-defined]
                    c.fail(where, f"must map str to {self.value.text()}, got {describe(k)} -> "
                                  f"{describe(x)}")
                out[k] = x
            else:
                if not isinstance(k, str):
                    c.fail(where, f"keys must be strs, got {describe(k)}")
                out[k] = self.value.read(c, x, f"{where}.{k}")
        return out

    def write(self, v: dict) -> dict:
        return {k: self.value.write(x) for k, x in v.items()}

    def text(self) -> str:
        return f"map str -> {self.value.text()}"



class Optional(Wire):
    """Nil, or a value of ``inner``."""

    def __init__(self, inner: Wire):
        self.inner = inner

    def read(self, c: Checker, v: Any, where: str) -> Any:
        return None if v is None else self.inner.read(c, v, where)

    def write(self, v: Any) -> Any:
        return None if v is None else self.inner.write(v)

    def text(self) -> str:
        return f"{self.inner.text()} or nil"


class Nested(Wire):
    """A record inside a record, read by its own description; ``text`` names it in the docs
    where it has a table of its own (else its keys are listed)."""

    def __init__(self, record: type[Record], text: str = ""):
        self.record, self.name = record, text

    def read(self, c: Checker, v: Any, where: str) -> Record:
        return self.record.read(c, v, where)

    def write(self, v: Record) -> dict:
        return v.to_payload()

    def text(self) -> str:
        return self.name or "{" + ", ".join(f"`{f.key}`" for f in plan(self.record).fields) + "}"


class JsonMap(Wire):
    """A free-form map (a backend's tiling data, the compile report): the format does not
    interpret it; its record's :meth:`Record.check` may."""

    def read(self, c: Checker, v: Any, where: str) -> dict:
        return dict(c.dict(v, where))

    def text(self) -> str:
        return "map"


class Section(Wire):
    """A whole section's payload inside another (a gear's plan): read by the section's own
    ``parse(payload, section, prefix)``, its messages prefixed with the path to it."""

    def __init__(self, section: Any, name: str):
        self.section, self.name = section, name

    def read(self, c: Checker, v: Any, where: str) -> Any:
        return self.section.parse(v, c.section, prefixed(c, where))

    def write(self, v: Any) -> dict:
        return v.to_payload()

    def text(self) -> str:
        return f"section `{self.name}`"


def prefixed(c: Checker, where: str) -> str:
    """The path ``where`` of ``c``'s payload, from the section's top."""
    if not c.prefix:
        return where
    return f"{c.prefix}{where}" if where.startswith("[") else f"{c.prefix}.{where}"


_ABSENT = object()


def wire(kind: Wire, default: Any = _ABSENT, *, required: bool | None = None,
         read: Callable[[Checker, Mapping, str], Any] | None = None,
         shown: bool = True) -> Any:
    """A record's field stored as ``kind``.  With a ``default``, the key may be absent from a
    file and is read as the default (unless ``required``: the default is then only the
    constructor's); a field whose default is None is not written when None.
    ``read(checker, record dict, record path)`` replaces the reading of the field when it
    depends on its siblings; ``shown=False`` keeps it out of ``aircc inspect``."""
    spec = FieldSpec(kind, default, default is _ABSENT if required is None else required,
                     read, shown)
    if default is _ABSENT:
        return dataclasses.field(metadata={"wire": spec})
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.copy(default), metadata={"wire": spec})
    return dataclasses.field(default=default, metadata={"wire": spec})


class FieldSpec(NamedTuple):
    kind: Wire
    default: Any
    required: bool
    read: Callable[[Checker, Mapping, str], Any] | None
    shown: bool


class Field(NamedTuple):
    """One field of a record as the reader and writer use it."""

    key: str
    kind: Wire
    required: bool
    default: Any
    read: Callable[[Checker, Mapping, str], Any] | None
    shown: bool
    omit_none: bool


class Plan(NamedTuple):
    fields: tuple[Field, ...]
    keys: frozenset[str]
    closed: bool


_PLANS: dict[type, Plan] = {}


def plan(cls: type) -> Plan:
    """The fields of record class ``cls``, in order (made once per class)."""
    p = _PLANS.get(cls)
    if p is None:
        fields = []
        for f in dataclasses.fields(cls):
            spec: FieldSpec = f.metadata["wire"]
            required = spec.required or cls.closed
            fields.append(Field(f.name, spec.kind, required, spec.default, spec.read, spec.shown,
                                not required and spec.default is None))
        p = _PLANS[cls] = Plan(tuple(fields), frozenset(f.key for f in fields), cls.closed)
    return p


class Record:
    """Base of a declared record (see the module doc).  ``closed=True`` in the class
    statement: every key is required in a file and no other key is allowed."""

    __slots__ = ()
    closed: ClassVar[bool] = False

    def __init_subclass__(cls, closed: bool = False, **kw: Any):
        super().__init_subclass__(**kw)
        cls.closed = closed

    @classmethod
    def read(cls, c: Checker, x: Any, where: str) -> Any:
        """The record at path ``where`` of ``c``'s section, checked field by field, then by
        :meth:`check`."""
        d = c.dict(x, where)
        p = plan(cls)
        if p.closed:
            unknown = sorted(str(k) for k in d if k not in p.keys)
            if unknown:
                c.fail(where, f"has unknown keys {unknown} (known: {sorted(p.keys)})")
        args = []
        for f in p.fields:
            if f.read is not None:
                args.append(f.read(c, d, where))
                continue
            v = d.get(f.key, _ABSENT)
            if v is _ABSENT:
                if f.required:
                    c.get(d, f.key, where)               # raises 'missing key'
                args.append(copy.copy(f.default) if isinstance(f.default, (list, dict))
                            else f.default)
            else:
                args.append(f.kind.read(c, v, f"{where}.{f.key}" if where else f.key))
        record = cls(*args)
        record.check(c, where)
        return record

    def check(self, c: Checker, where: str) -> None:
        """Checks beyond each field's type (none by default); ``c.fail`` on a violation."""

    def to_payload(self) -> dict:
        """What the file stores of the record."""
        out = {}
        for f in plan(type(self)).fields:
            v = getattr(self, f.key)
            if v is None and f.omit_none:
                continue
            out[f.key] = f.kind.write(v)
        return out


def summary(record: Record) -> dict:
    """What ``aircc inspect --json`` shows of a record: each shown field as stored, but the
    ones that are nil."""
    out = {}
    for f in plan(type(record)).fields:
        v = getattr(record, f.key)
        if f.shown and v is not None:
            out[f.key] = f.kind.write(v)
    return out


def field_rows(cls: type) -> list[tuple[str, str]]:
    """(field, type) of each field of record class ``cls``: the first two columns of its
    table in ``docs/om-format.md``."""
    rows = []
    for f in plan(cls).fields:
        text = f.kind.text()
        if not f.required:
            text += f"; absent: {_literal(f.kind.write(f.default))}"
        rows.append((f.key, text))
    return rows


def _literal(v: Any) -> str:
    return "nil" if v is None else f"`{json.dumps(v)}`"

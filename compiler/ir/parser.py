"""Parse the IR text form back into a :class:`Graph`.

``print_graph(parse_graph(text, resources)) == text`` for any printed graph.
Constants printed as a digest (``dense<sha1:...>``) take their values from
``resources`` (name -> array); small constants carry their values inline.
"""
from __future__ import annotations

import json
import re

import numpy as np

from aircc.errors import IRParseError

from .graph import Graph, Node, TensorType

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<ref>%(?:"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_.]*))
  | (?P<sym>\?(?:"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_.]*))
  | (?P<at>@(?:"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]+))
  | (?P<digest>dense<sha1:[0-9a-f]+>)
  | (?P<num>-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|\d+|inf|nan)(?![A-Za-z_]))
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<arrow>->)
  | (?P<punct>[()\[\]{}<>,:=*?])
""", re.VERBOSE)


def _tokens(line: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(line):
        m = _TOKEN.match(line, pos)
        if not m:
            raise IRParseError(f"unexpected character {line[pos]!r} in: {line.strip()}")
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    return out


class _Line:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.k = 0

    def peek(self, value: str | None = None) -> bool:
        return self.k < len(self.toks) and (value is None or self.toks[self.k][1] == value)

    def take(self, kind: str | None = None, value: str | None = None) -> str:
        if self.k >= len(self.toks):
            raise IRParseError(f"line ends early: {self.text.strip()}")
        k, v = self.toks[self.k]
        if (kind and k != kind) or (value and v != value):
            raise IRParseError(f"expected {value or kind}, found {v!r} in: {self.text.strip()}")
        self.k += 1
        return v

    def name(self) -> str:
        v = self.take("ref")[1:]
        if v == "none":
            return ""
        return json.loads(v) if v.startswith('"') else v

    def type(self) -> TensorType | None:
        if self.peek("?"):
            self.take(value="?")
            return None
        dtype = self.take("word")
        self.take(value="[")
        if self.peek("*"):
            self.take(value="*")
            self.take(value="]")
            return TensorType(dtype, None)
        dims: list = []
        while not self.peek("]"):
            kind, v = self.toks[self.k]
            self.k += 1
            if kind == "num":
                dims.append(int(v))
            elif kind == "sym":
                dims.append(json.loads(v[1:]) if v[1] == '"' else v[1:])
            elif v != ",":
                raise IRParseError(f"bad dim {v!r} in: {self.text.strip()}")
        self.take(value="]")
        return TensorType(dtype, tuple(dims))

    def value(self):
        kind, v = self.toks[self.k]
        if v == "[":
            self.take()
            items = []
            while not self.peek("]"):
                items.append(self.value())
                if self.peek(","):
                    self.take()
            self.take(value="]")
            return items
        if v == "tensor":
            self.take()
            self.take(value="<")
            t = self.type()
            arr = self.array(t, None)
            self.take(value=">")
            return arr
        self.k += 1
        if kind == "str":
            return json.loads(v)
        if kind == "num":
            return float(v) if any(c in v for c in ".en") or v in ("inf", "nan") else int(v)
        if v in ("true", "false"):
            return v == "true"
        raise IRParseError(f"bad attribute value {v!r} in: {self.text.strip()}")

    def key_values(self) -> dict:
        """``[key=value, ...]``: a node's meta or a region's schedule facts."""
        out = {}
        self.take(value="[")
        while not self.peek("]"):
            key = self.take("word")
            self.take(value="=")
            out[key] = self.value()
            if self.peek(","):
                self.take()
        self.take(value="]")
        return out

    def array(self, t: TensorType, resource: np.ndarray | None) -> np.ndarray:
        kind, v = self.toks[self.k]
        if kind == "digest":
            self.take()
            if resource is None:
                raise IRParseError(f"constant data {v} is not inline; pass its array in resources")
            return resource
        self.take("word", "dense")
        flat = np.array(self.value(), dtype=t.dtype)
        return flat.reshape(t.shape)


def parse_graph(text: str, resources: dict[str, np.ndarray] | None = None) -> Graph:
    """Parse printed IR (nested regions included)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    graph, end = _parse_region(lines, 0, resources or {})
    if end != len(lines):
        raise IRParseError(f"text after the end of the graph: {lines[end].strip()}")
    return graph


def _parse_region(lines: list[str], i: int, resources) -> tuple[Graph, int]:
    head = _Line(lines[i])
    head.take("word", "graph")
    at = head.take("at")[1:]
    g = Graph(name=json.loads(at) if at.startswith('"') else at)
    head.take(value="(")
    while not head.peek(")"):
        name = head.name()
        head.take(value=":")
        g.inputs.append(name)
        g.types[name] = head.type()
        if head.peek(","):
            head.take()
    head.take(value=")")
    head.take("arrow")
    head.take(value="(")
    while not head.peek(")"):
        g.outputs.append(head.name())
        if head.peek(","):
            head.take()
    head.take(value=")")
    if head.peek("as"):                  # a region: the attribute of its node it came from
        head.take()
        g.meta["attribute"] = head.take("word")
    if head.peek("["):                   # facts the schedule recorded (streams, events)
        g.meta.update(head.key_values())
    i += 1
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped == "}":
            return g, i + 1
        if stripped.startswith("graph @"):          # a nested region
            region, i = _parse_region(lines, i, resources)
            g.nodes[-1].regions.append(region)
            continue
        ln = _Line(line)
        if ln.peek("const"):
            ln.take()
            name = ln.name()
            ln.take(value=":")
            t = ln.type()
            ln.take(value="=")
            g.constants[name] = ln.array(t, resources.get(name))
            g.types[name] = t
        else:
            g.nodes.append(_parse_node(ln, g))
        i += 1
    raise IRParseError(f"graph @{g.name} has no closing brace")


def _parse_node(ln: _Line, g: Graph) -> Node:
    outputs = []
    if ln.peek() and ln.toks[ln.k][0] == "ref":
        while True:
            name = ln.name()
            outputs.append(name)
            if name and ln.peek(":"):
                ln.take()
                g.types[name] = ln.type()
            if not ln.peek(","):
                break
            ln.take()
        ln.take(value="=")
    op = ln.take("word")
    ln.take(value="(")
    inputs = []
    while not ln.peek(")"):
        inputs.append(ln.name())
        if ln.peek(","):
            ln.take()
    ln.take(value=")")
    node = Node(op, inputs, outputs)
    ln.take(value="{")
    while not ln.peek("}"):
        key = ln.take("word")
        ln.take(value="=")
        value = ln.value()
        if key == "name":
            node.name = value
        elif key == "domain":
            node.domain = value
        elif key == "v":
            node.version = value
        else:
            node.attrs[key] = value
        if ln.peek(","):
            ln.take()
    ln.take(value="}")
    if ln.peek("["):
        node.meta.update(ln.key_values())
    return node

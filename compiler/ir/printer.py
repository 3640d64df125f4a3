"""Text form of the AIR IR (``aircc compile --emit ir``).

Example::

    graph @main(%x: float32[N,4]) -> (%y) {
      const %w: float32[4,3] = dense<sha1:0e2c5a1b>
      %h: float32[N,3] = MatMul(%x, %w) {name="mm0", v=13}
      %y: float32[N,3] = Relu(%h) {name="relu0", v=13} [stream=0]
    }

Small constants (up to 8 elements) print their values; larger ones print a
digest of their bytes, so the text stays readable and still changes when a
weight changes.  The parser in :mod:`aircc.compiler.ir.parser` reads this form back.
"""
from __future__ import annotations

import hashlib
import json
import re

import numpy as np

from .graph import Graph, Node, TensorType

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
INLINE_CONST_LIMIT = 8


#: Graph facts the schedule records in ``graph.meta``, printed in a region's header.
GRAPH_FACTS = ("streams", "events", "host_ops")


def value_ref(name: str) -> str:
    """``%name``, quoted when the name has characters outside ``[A-Za-z0-9_.]`` (or is
    ``none``, which stands for an omitted input)."""
    if name == "":
        return "%none"
    return "%" + name if _PLAIN.match(name) and name != "none" else "%" + json.dumps(name)


def graph_ref(name: str) -> str:
    """``@name``, quoted when the name is not plain."""
    return "@" + name if _PLAIN.match(name) else "@" + json.dumps(name)


def format_type(t: TensorType | None) -> str:
    if t is None:
        return "?"
    if t.shape is None:
        return f"{t.dtype}[*]"
    dims = ",".join(str(d) if isinstance(d, int) else ("?" + d if _PLAIN.match(d) else "?" + json.dumps(d))
                    for d in t.shape)
    return f"{t.dtype}[{dims}]"


def format_attr_value(v) -> str:
    if isinstance(v, np.ndarray):       # attribute tensors print whole: they are not resources
        return "tensor<" + format_type(TensorType.of(v)) + " " + _array_body(v, inline=True) + ">"
    if isinstance(v, Graph):
        return "region"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(format_attr_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(float(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return json.dumps(str(v))


def _scalar(x) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x)                   # inf, -inf and nan read back, unlike JSON's
    if isinstance(x, int):
        return str(x)
    return json.dumps(x)


def _array_body(a: np.ndarray, inline: bool = False) -> str:
    if inline or a.size <= INLINE_CONST_LIMIT:
        return "dense[" + ",".join(_scalar(x) for x in a.reshape(-1).tolist()) + "]"
    digest = hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]
    return f"dense<sha1:{digest}>"


def format_attrs(node: Node) -> str:
    items = [f"name={json.dumps(node.name)}"]
    if node.domain:
        items.append(f"domain={json.dumps(node.domain)}")
    items.append(f"v={node.version}")
    for k in sorted(node.attrs):
        items.append(f"{k}={format_attr_value(node.attrs[k])}")
    return "{" + ", ".join(items) + "}"


def format_meta(node: Node) -> str:
    keys = [k for k in sorted(node.meta) if isinstance(node.meta[k], (int, str, bool))]
    if not keys:
        return ""
    return " [" + ", ".join(f"{k}={json.dumps(node.meta[k])}" for k in keys) + "]"


def print_graph(graph: Graph, indent: str = "") -> str:
    """The whole region as text, nested regions indented."""
    ins = ", ".join(f"{value_ref(i)}: {format_type(graph.types.get(i))}" for i in graph.inputs)
    outs = ", ".join(value_ref(o) for o in graph.outputs)
    attr = graph.meta.get("attribute")     # the attribute of its node a region came from
    role = f" as {attr}" if isinstance(attr, str) and attr else ""
    facts = [f"{k}={graph.meta[k]}" for k in GRAPH_FACTS if isinstance(graph.meta.get(k), int)]
    role += f" [{', '.join(facts)}]" if facts else ""
    lines = [f"{indent}graph {graph_ref(graph.name)}({ins}) -> ({outs}){role} {{"]
    inner = indent + "  "
    for name in graph.constants:
        arr = graph.constants[name]
        lines.append(f"{inner}const {value_ref(name)}: {format_type(TensorType.of(arr))} = {_array_body(arr)}")
    for node in graph.nodes:
        lines.append(inner + format_node(node, graph))
        for region in node.regions:
            lines.append(print_graph(region, inner + "  "))
    lines.append(indent + "}")
    return "\n".join(lines)


def format_node(node: Node, graph: Graph) -> str:
    results = ", ".join(f"{value_ref(o)}: {format_type(graph.types.get(o))}" if o else "%none"
                        for o in node.outputs)
    lhs = f"{results} = " if node.outputs else ""
    args = ", ".join(value_ref(i) for i in node.inputs)
    return f"{lhs}{node.op}({args}) {format_attrs(node)}{format_meta(node)}"

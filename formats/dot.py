"""A Graphviz DOT picture of a compiled model (``aircc compile --emit dot``,
``aircc inspect --dot``), drawn from its :class:`~.graph_view.GraphView`.

One fill colour per stream (a legend names them); data edges solid, labelled with the
value; events dashed, from the task before the record to the task after each wait,
labelled ``e<id>``; a fused node lists what it fused; a host-placed op is white with a
dashed border; a node on a fallback kernel (onnx's reference implementation) has a thick
red border; copies of the inputs and outputs are house shapes; jumps of static control
flow are diamonds with their branches dotted.  ``dot -Tsvg model.dot -o model.svg``
renders it.
"""
from __future__ import annotations

from .contract import ModelContract
from .graph_view import (ANCHOR, BODY, BRANCH, COPY, DATA, EVENT, HOST, INPUT, JUMP, KERNEL,
                         ORDER, OUTPUT, GraphView, ViewNode, graph_view)
from .kinds import Impl

#: Fill colours of streams 0-11 (ColorBrewer Set3); later streams get hues of their own.
STREAM_COLOURS = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                  "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f")
EVENT_COLOUR = "#d62728"
FALLBACK_COLOUR = "#e41a1c"
SHAPES = {KERNEL: "box", HOST: "box", INPUT: "invhouse", OUTPUT: "house", COPY: "cds",
          JUMP: "diamond", ANCHOR: "point"}


def stream_colour(stream: int) -> str:
    """The fill colour of ``stream`` in every picture."""
    if stream < len(STREAM_COLOURS):
        return STREAM_COLOURS[stream]
    return f"{(stream * 0.618034) % 1:.3f} 0.350 0.950"       # HSV, golden-ratio hues


def quote(text: str) -> str:
    """A DOT string literal (lines joined by ``\\n``)."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def _attrs(**kv: object) -> str:
    return "[" + ", ".join(f"{k}={quote(str(v))}" for k, v in kv.items() if v is not None) + "]"


def node_label(n: ViewNode) -> str:
    """What a node's box says: its name, op, what it fused, where and how it runs."""
    if n.kind == INPUT:
        return f"input {n.name}\n{n.detail}"
    if n.kind == OUTPUT:
        return f"output {n.name}\n{n.detail}"
    if n.kind == COPY:
        return f"{n.name} to device\n{n.detail}"
    if n.kind == JUMP:
        return n.name
    op = n.op if n.domain in ("", "aircc") else f"{n.domain}.{n.op}"
    lines = [n.name, op if op != n.name else ""]
    if n.fused:
        lines.append("fused: " + " + ".join(n.fused))
    if n.kind == HOST:
        lines.append("on host")
    if n.impl is Impl.FALLBACK:
        lines.append("fallback kernel (onnx reference)")
    elif n.backend:
        lines.append(f"kernel: {n.backend}{f' {n.kernel}' if n.kernel else ''}")
    if n.channels_last:
        lines.append("channels-last")
    if n.detail:
        lines.append(n.detail)
    return "\n".join(x for x in lines if x)


def _node_attrs(n: ViewNode) -> str:
    style, fill, colour, width = "filled", "white", "black", None
    if n.kind == HOST:
        style = "filled,dashed"
    elif n.kind == KERNEL:
        style = "rounded,filled"
    if n.stream is not None and n.kind not in (HOST, ANCHOR):
        fill = stream_colour(n.stream)
    if n.impl is Impl.FALLBACK:
        colour, width = FALLBACK_COLOUR, 3
    if n.fused:
        style += ",bold"
    tooltip = f"stream {n.stream}" if n.stream is not None else "host"
    return _attrs(label=node_label(n), shape=SHAPES[n.kind], style=style, fillcolor=fill,
                  color=colour, penwidth=width, tooltip=tooltip)


EDGE_STYLES = {
    DATA: {},
    EVENT: {"style": "dashed", "color": EVENT_COLOUR, "fontcolor": EVENT_COLOUR, "penwidth": 1.6},
    ORDER: {"style": "dotted", "color": "gray40"},
    BRANCH: {"style": "dotted", "color": "blue", "fontcolor": "blue", "constraint": "false"},
    BODY: {"style": "dotted", "color": "gray40"},
}


def _title(view: GraphView) -> str:
    gear = (f", gear batch {view.batch} (gears {', '.join(map(str, view.gears))})"
            if view.batch is not None else "")
    return (f"{view.name}: {view.mode} mode, target {view.target}, {view.streams} stream(s), "
            f"{view.events} event(s){gear}")


def _legend(view: GraphView) -> list[str]:
    lines = ['  subgraph cluster_legend {', '    label="legend"; style="rounded"; fontsize=10;',
             '    node [fontsize=9, shape=box, style="rounded,filled"];']
    names = []
    for s in range(view.streams):
        names.append(f"legend_s{s}")
        lines.append(f"    legend_s{s} {_attrs(label=f'stream {s}', fillcolor=stream_colour(s))};")
    kinds = {n.kind for n in view.nodes}
    if HOST in kinds:
        names.append("legend_host")
        lines.append(f"    legend_host {_attrs(label='host-placed op', style='filled,dashed', fillcolor='white')};")
    if any(n.impl is Impl.FALLBACK for n in view.nodes):
        names.append("legend_fallback")
        lines.append(f"    legend_fallback {_attrs(label='fallback kernel (onnx reference)', fillcolor='white', color=FALLBACK_COLOUR, penwidth=3)};")
    if any(n.fused for n in view.nodes):
        names.append("legend_fused")
        lines.append(f"    legend_fused {_attrs(label='fused op (bold)', style='rounded,filled,bold', fillcolor='white')};")
    if view.events:
        names += ["legend_record", "legend_wait"]
        lines.append(f"    legend_record {_attrs(label='record', shape='plaintext', style='')};")
        lines.append(f"    legend_wait {_attrs(label='wait', shape='plaintext', style='')};")
        lines.append(f"    legend_record -> legend_wait {_attrs(label='event', **EDGE_STYLES[EVENT])};")
    for a, b in zip(names, names[1:]):
        if (a, b) != ("legend_record", "legend_wait"):
            lines.append(f"    {a} -> {b} [style=invis];")
    lines.append("  }")
    return lines


def view_to_dot(view: GraphView) -> str:
    """The DOT text of a graph view."""
    lines = [f"digraph {quote(view.name or 'model')} {{",
             f"  graph {_attrs(label=_title(view), labelloc='t', rankdir='TB', fontsize=12, fontname='Helvetica')};",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8];']
    lines += _legend(view)
    grouped: dict[str, list[ViewNode]] = {}
    for n in view.nodes:
        grouped.setdefault(n.group, []).append(n)
    for group, nodes in grouped.items():
        indent = "  "
        if group:
            lines.append(f"  subgraph {quote('cluster_' + group)} {{")
            lines.append(f"    label={quote(view.groups.get(group, group))}; style=\"dashed\";")
            indent = "    "
        lines += [f"{indent}{n.id} {_node_attrs(n)};" for n in nodes]
        if group:
            lines.append("  }")
    for e in view.edges:
        lines.append(f"  {e.src} -> {e.dst} {_attrs(label=e.label or None, **EDGE_STYLES[e.kind])};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_dot(contract: ModelContract) -> str:
    """The DOT picture of a model (a gear model's largest gear)."""
    return view_to_dot(graph_view(contract))

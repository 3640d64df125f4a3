"""Values stay typed between the stages: counted on the source tree, each count zero.

- no run state reaches into its model (``self.m.``, ``state.m.``);
- no ``to_payload()`` outside ``formats/`` and the .om writer (``compiler/assemble.py``):
  the load side reads the typed sections, never dicts made back from them;
- no input or output spec read as a dict (``["name"]``, ``["dtype"]``, ``["shape"]``):
  the few such reads left are of other dicts, named one by one below;
- no ``__getattr__`` forwarding on the loaded model, nor anywhere in the runtime;
- no ``impl`` or ``placement`` compared with a string: through ``Impl`` and ``Placement``.

``formats/`` is where payloads are dicts by definition (its summary renders the JSON
view), so the dict counts leave it out.
"""
from __future__ import annotations

import re
from pathlib import Path

from aircc.executor.runtime import dynamic_model, loaded, static_model

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("compiler", "executor", "ops", "formats", "cli", "distributed", "session",
               "verification", "benchmarks", "tools")
#: The .om writer: where typed sections become payloads.
WRITERS = ("compiler/assemble.py",)
#: ``["name"]``-style reads of dicts that are not input or output specs.
OTHER_DICTS = {
    ("ops/defs/shape_ops.py", 'ctx.attrs["shape"]'),          # Reshape's attribute
    ("executor/kernels/fused.py", 'tiling["shape"]'),          # a tiling's broadcast shape
    ("benchmarks/run.py", 'r["name"]'),                        # rows of the model list
    ("benchmarks/run.py", "entry['name']"),
    ("benchmarks/run.py", 'entry["name"]'),
    ("benchmarks/run.py", 'e["name"]'),
    ("benchmarks/serving.py", 'entry["name"]'),
    ("benchmarks/serving.py", "entry['name']"),
}
SPEC_KEY = re.compile(r"""([\w.\]\)]*?\w[\])]?)\[(["'])(name|dtype|shape)\2\]""")
STRING_KIND = re.compile(
    r"""\b(impl|placement)\b[^\n#]*?(==|!=|\bin\b)\s*[(\[{]?\s*["'](fallback|native|host|device)["']"""
    r"""|["'](fallback|native|host|device)["']\s*(==|!=)\s*[\w.()"'\[\]]*\b(impl|placement)\b""")


def sources(*, outside: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(path relative to the root, text) of every source file, but those under ``outside``."""
    out = []
    for d in SOURCE_DIRS:
        for path in sorted((ROOT / d).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "__pycache__" not in path.parts and not rel.startswith(outside):
                out.append((rel, path.read_text()))
    return out


def hits(pattern: re.Pattern | str, files: list[tuple[str, str]]) -> list[str]:
    found = []
    for rel, text in files:
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(pattern, line):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_run_state_reaches_into_its_model():
    assert hits(r"\b(self|state)\.m\.", sources()) == []


def test_no_payload_is_made_outside_the_format_and_the_writer():
    assert hits(r"\.to_payload\(\)", sources(outside=("formats/", *WRITERS))) == []


def test_no_input_or_output_spec_is_read_as_a_dict():
    found = [f"{rel}: {m.group(0)}" for rel, text in sources(outside=("formats/",))
             for m in SPEC_KEY.finditer(text) if (rel, m.group(0)) not in OTHER_DICTS]
    assert found == []


def test_the_spec_count_would_see_a_dict_read():
    # the patterns above find what they are meant to find
    assert SPEC_KEY.search('names = [i["name"] for i in model.inputs]')
    assert SPEC_KEY.search("f\"{spec['dtype']}\"")
    assert STRING_KIND.search('if n.meta.get("impl") == "fallback":')
    assert STRING_KIND.search('on_host = node.placement != "host"')
    assert STRING_KIND.search('if "host" == n.placement:')
    assert not STRING_KIND.search("if n.impl is Impl.FALLBACK:")


def test_nothing_is_forwarded_through_getattr():
    for cls in (loaded.LoadedModel, static_model.StaticModel, dynamic_model.DynamicModel):
        assert "__getattr__" not in vars(cls), cls
    assert hits(r"def __getattr__", sources(outside=("formats/",))) == []


def test_impl_and_placement_are_compared_as_enums():
    found = [f"{rel}:{n}: {line.strip()}" for rel, text in sources()
             for n, line in enumerate(text.splitlines(), 1) if STRING_KIND.search(line)]
    assert found == []

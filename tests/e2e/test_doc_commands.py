"""Every command the README and docs show runs, and every Python snippet too.

- Shell commands: the README's two set-up commands (without their installing steps,
  and without ``python -m pytest``: this suite is that command, running inside that
  install) and every line of a ```sh block.
- Python: every ```python block of the README and of ``docs/``, in order, each file's
  blocks sharing one namespace (a later block uses what an earlier one made).  Code
  shown as an excerpt of aircc's own source is fenced ```py and not run.

They run in a fresh folder holding ``samples/`` and the files the docs name: ``model.onnx``
(the MLP sample, batch symbolic), ``model.om`` (it compiled for a batch of 4), ``x.npy``
(a batch of 4), ``devices.json`` (two devices, the configuration ``AIR_DEVICE_CONFIG``
names while the commands run) and ``cache/`` (``AIRCC_CACHE_DIR``).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aircc
from testdata import SAMPLES

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: What a command may start with (a doc that shows another program's command is wrong).
PROGRAMS = ("aircc", "airrun", "python", "dot")
TWO_DEVICES = {"devices": [{"id": 0, "memory": "1G"}, {"id": 1, "memory": "1G"}]}


def blocks(path: Path, lang: str) -> list[str]:
    return [body for fence, body in FENCE.findall(path.read_text()) if fence == lang]


def setup_commands() -> list[str]:
    """The README's set-up commands (its first indented lines), without pip."""
    lines = [line.strip() for line in (ROOT / "README.md").read_text().splitlines()[:6]
             if line.startswith("    ")]
    assert len(lines) == 2, "the README opens with exactly two set-up commands"
    lines = [re.sub(r"^\(command -v dot \|\| \(.*?\)\) && ", "", line) for line in lines]
    return [part.strip() for line in lines for part in line.split(" && ")
            if not part.strip().startswith(("pip install", "python -m pytest"))]


def shell_commands() -> list[tuple[str, str]]:
    out = [("README.md", c) for c in setup_commands()]
    for path in DOCS:
        for body in blocks(path, "sh"):
            out += [(path.name, line.strip()) for line in body.splitlines()
                    if line.strip() and not line.strip().startswith("#")]
    return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tmp_path_factory.mktemp("docs")
    shutil.copytree(SAMPLES, ws / "samples")
    shutil.copy(Path(SAMPLES) / "mlp.onnx", ws / "model.onnx")
    aircc.compile(ws / "model.onnx", ws / "model.om", input_shapes={"input": [4, 784]})
    np.save(ws / "x.npy", np.load(Path(SAMPLES) / "mlp_input.npy"))
    (ws / "devices.json").write_text(json.dumps(TWO_DEVICES))
    return ws


def env(ws: Path) -> dict:
    return {**os.environ, "AIR_DEVICE_CONFIG": str(ws / "devices.json"),
            "AIRCC_CACHE_DIR": str(ws / "cache"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"),
                                                       os.environ.get("PYTHONPATH")]))}


def test_the_docs_show_commands_and_snippets():
    cmds = shell_commands()
    assert len(cmds) >= 10 and {f for f, _ in cmds} >= {"README.md", "from-atc.md"}
    for where, cmd in cmds:
        assert shlex.split(cmd)[0] in PROGRAMS, f"{where}: {cmd}"


@pytest.mark.parametrize("where, cmd", shell_commands(), ids=lambda v: v[:60])
def test_every_shell_command_in_the_docs_runs(workspace, where, cmd):
    argv = shlex.split(cmd)
    if argv[0] == "python":
        argv[0] = sys.executable
    if argv[0] == "dot" and shutil.which("dot") is None:
        pytest.fail(f"{where}: `{cmd}` needs Graphviz's dot (apt-get install graphviz)")
    r = subprocess.run(argv, cwd=workspace, env=env(workspace), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"{where}: `{cmd}` failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"


@pytest.mark.parametrize("doc", [p for p in DOCS if blocks(p, "python")], ids=lambda p: p.name)
def test_every_python_snippet_in_the_docs_runs(workspace, doc):
    code = "\n\n".join(blocks(doc, "python"))
    r = subprocess.run([sys.executable, "-c", code], cwd=workspace, env=env(workspace),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{doc.name}'s Python failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"

"""Every registered pass has a test written as IR text before and after.

Each IR test module of this directory declares the passes it covers in a module-level
``COVERS`` tuple; a module covers a pass only if it also runs it (a ``run_pass`` or
``run_pass_graph`` call naming it).  A pass registered without such a test fails here.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import aircc.compiler.driver  # noqa: F401  (registers every pass)
from aircc.compiler.passes.base import PASSES, PassInfo

HERE = Path(__file__).parent
RUNNERS = ("run_pass", "run_pass_graph")


def _declares_covers(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "COVERS"
                                                  for t in s.targets) for s in tree.body)


def ir_test_modules() -> list[str]:
    """The test modules of this directory that declare ``COVERS``."""
    return sorted(p.stem for p in HERE.glob("test_*.py") if _declares_covers(p))


def passes_run_by(path: Path) -> set[str]:
    """Pass names given as a literal first argument to ``run_pass`` / ``run_pass_graph``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in RUNNERS \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names.add(node.args[0].value)
    return names


def covered() -> dict[str, list[str]]:
    """Pass name -> the modules whose ``COVERS`` names it."""
    out: dict[str, list[str]] = {}
    for name in ir_test_modules():
        for p in importlib.import_module(name).COVERS:
            out.setdefault(p, []).append(name)
    return out


def uncovered() -> list[str]:
    return sorted(set(PASSES) - set(covered()))


def test_every_registered_pass_has_an_ir_test():
    assert len(ir_test_modules()) >= 4
    assert uncovered() == [], f"passes without an IR-text test: {uncovered()}"


def test_each_module_covers_what_it_runs_and_runs_what_it_covers():
    for name in ir_test_modules():
        covers = importlib.import_module(name).COVERS
        assert isinstance(covers, tuple) and len(set(covers)) == len(covers), name
        assert set(covers) <= set(PASSES), f"{name} covers passes that are not registered"
        assert set(covers) == passes_run_by(HERE / f"{name}.py"), name


def test_a_pass_registered_without_a_test_is_reported(monkeypatch):
    monkeypatch.setitem(PASSES, "brand-new-pass", PassInfo("brand-new-pass", lambda g, c: g, (), ""))
    assert uncovered() == ["brand-new-pass"]

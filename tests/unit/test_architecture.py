"""The walls between the packages, checked on the source tree's imports.

- ``compiler/`` and ``executor/`` both stand on ``ops/`` and never import each other;
- ``ops/`` imports neither of them, ``formats/`` none of the three;
- no module imports a name starting with ``_`` from another module (nor a module whose
  name starts with ``_``);
- no class reads a private attribute (``self._x``) that neither it nor its bases make: a
  part of a class kept in a mixin reads only its own state and the public rest;
- no two modules import each other, however indirectly (imports made only for type
  checking aside, and a module's own package);
- no source file is much over 400 lines.
"""
from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "aircc"
SOURCE_DIRS = ("compiler", "executor", "ops", "formats", "cli", "distributed", "session",
               "verification")
#: Package -> packages of aircc it must not import.
WALLS = {
    "compiler": ("executor",),
    "executor": ("compiler",),
    "ops": ("compiler", "executor", "formats", "cli"),
    "formats": ("compiler", "executor", "ops", "cli"),
}
MAX_LINES = 420


def python_files(*dirs: str) -> list[Path]:
    out = []
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*.py")):
            if "__pycache__" not in path.parts:
                out.append(path)
    return out


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names imported from it, line) of every import in a file, relative
    imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def test_the_walk_sees_the_imports_it_must_judge():
    """The walk resolves relative imports and reads function-level ones (so the checks
    below could fail)."""
    found = {mod for mod, _, _ in imports(ROOT / "compiler" / "stages.py")}
    assert "aircc.compiler.passes.pipeline" in found and "aircc.errors" in found
    found = {mod for mod, _, _ in imports(ROOT / "executor" / "runtime" / "loader.py")}
    assert "aircc.executor.runtime.dynamic_model" in found     # imported inside a function


@pytest.mark.parametrize("package", sorted(WALLS))
def test_packages_do_not_import_across_their_walls(package):
    crossings = []
    for path in python_files(package):
        for mod, names, line in imports(path):
            for other in WALLS[package]:
                if mod == f"{PACKAGE}.{other}" or mod.startswith(f"{PACKAGE}.{other}.") \
                        or (mod == PACKAGE and other in names):
                    crossings.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert not crossings, "\n".join(crossings)


def test_no_module_imports_private_names_of_another():
    files = python_files(*SOURCE_DIRS, "tests", "benchmarks", "samples") + \
        [ROOT / f for f in os.listdir(ROOT) if f.endswith(".py")]
    local = {p.stem for p in python_files("tests", "benchmarks", "samples")}   # their helpers
    found = []
    for path in files:
        for mod, names, line in imports(path):
            if not (mod == PACKAGE or mod.startswith(f"{PACKAGE}.") or mod in local):
                continue               # other libraries' internals are their business
            private_module = any(p.startswith("_") and p != "__init__" for p in mod.split("."))
            private_names = [n for n in names if n.startswith("_")]
            if private_module or private_names:
                found.append(f"{path.relative_to(ROOT)}:{line} imports "
                             f"{private_names or ''} from {mod}")
    assert not found, "\n".join(found)


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of aircc it imports when it runs (``from pkg import mod`` as
    ``pkg.mod``; imports under ``if TYPE_CHECKING:`` and of the module's own packages left out)."""
    modules = {module_name(p): p for p in python_files(*SOURCE_DIRS)}
    graph: dict[str, set[str]] = {}
    for here, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for node in ast.walk(tree)
                       if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                       for n in ast.walk(node)}
        lines = {n.lineno for n in ast.walk(tree)
                 if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) in typing_only}
        edges = graph.setdefault(here, set())
        for mod, names, line in imports(path):
            if line in lines:
                continue
            subs = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in modules]
            for target in subs if subs and len(subs) == len(names) else [mod, *subs]:
                if target in modules and target != here and not here.startswith(target + "."):
                    edges.add(target)
    return graph


def test_no_modules_import_each_other():
    import networkx as nx

    cycles = list(nx.simple_cycles(nx.DiGraph([(a, b) for a, bs in import_graph().items()
                                               for b in bs])))
    assert not cycles, "\n".join(" -> ".join(c + c[:1]) for c in cycles)


def test_the_import_graph_sees_function_level_imports():
    graph = import_graph()
    assert "aircc.executor.runtime.dynamic_model" in graph["aircc.executor.runtime.loader"]
    assert "aircc.executor.device.device" not in graph["aircc.executor.device.heartbeat"]  # typing only


def private_reads() -> list[str]:
    """``class: [private attributes it reads but neither it nor its bases make]``."""
    classes: dict[str, list[tuple[set, set, list]]] = {}
    for path in python_files(*SOURCE_DIRS):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            made, read = set(), set()
            for n in ast.walk(node):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Name)):
                    made.add(getattr(n, "name", None) or n.id)     # methods, class attributes
                elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                    made.add(n.value)                               # __slots__, getattr's names
                elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                        and n.value.id == "self" and n.attr.startswith("_") \
                        and not n.attr.startswith("__"):
                    (made if isinstance(n.ctx, ast.Store) else read).add(n.attr)
            bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
            classes.setdefault(node.name, []).append((made, read, bases))

    def made_by(name: str, seen: frozenset = frozenset()) -> set:
        out = set()
        for made, _, bases in classes.get(name, []):
            out |= made
            for b in set(bases) - seen:
                out |= made_by(b, seen | {name})
        return out
    return [f"{name}: {sorted(read - made_by(name))}" for name, defs in sorted(classes.items())
            for _, read, _ in defs if read - made_by(name)]


def test_no_class_reads_private_state_it_does_not_make():
    assert private_reads() == []


def test_no_source_file_is_much_over_400_lines():
    long = [f"{p.relative_to(ROOT)}: {n} lines"
            for p in python_files(*SOURCE_DIRS) + [ROOT / "__init__.py", ROOT / "config.py",
                                                   ROOT / "errors.py", ROOT / "backend.py"]
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, "\n".join(long)

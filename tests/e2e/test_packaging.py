"""The package as users install it: ``python -m aircc``, the wheel's contents (py.typed,
the licence, the classifiers) and type hints on every public function of ``aircc``."""
from __future__ import annotations

import importlib.resources
import inspect
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import aircc
from testdata import SAMPLES

ROOT = Path(__file__).resolve().parents[2]


def python_m_aircc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aircc", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_python_m_aircc_is_the_aircc_command(tmp_path):
    r = python_m_aircc("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"aircc, version {aircc.__version__}", r.stderr
    r = python_m_aircc("--help")
    assert r.returncode == 0 and r.stdout.startswith("Usage: aircc ") and "compile" in r.stdout
    om = tmp_path / "mlp.om"
    r = python_m_aircc("compile", str(Path(SAMPLES) / "mlp.onnx"), "-o", str(om),
                       "--input-shape", "input:4,784")
    assert r.returncode == 0, r.stderr
    assert aircc.load(str(om)).inputs[0].shape == (4, 784)
    r = python_m_aircc("inspect", str(tmp_path / "missing.om"))
    assert r.returncode == 2 and r.stderr.startswith("error: "), (r.returncode, r.stderr)


def test_the_installed_package_has_py_typed():
    assert importlib.resources.files("aircc").joinpath("py.typed").is_file()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """A wheel built from a copy of the source tree (so the tree gets no build files)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "tests", "samples", "benchmarks", "*.egg-info", "__pycache__", "build", "dist",
        "*.so"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(work / "dist"), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"building the wheel failed (needs setuptools>=77):\n{r.stderr[-3000:]}"
    (path,) = (work / "dist").glob("aircc-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_ships_py_typed_the_licence_the_session_and_the_c_modules(wheel):   # and verify
    names = set(wheel.namelist())
    assert {"aircc/py.typed", "aircc/__main__.py", "aircc/session/session.py",
            "aircc/session/io_binding.py", "aircc/session/options.py",
            "aircc/session/compile_cache.py", "aircc/verification/check.py"} <= names
    for module in ("aircc/executor/kernels/dnnl_backend/winograd_transforms.",
                   "aircc/executor/kernels/dnnl_backend/attention_core.",
                   "aircc/executor/device/doorbell_c."):      # the C modules, compiled
        built = [n for n in names if n.startswith(module)]
        assert len(built) == 1 and built[0].endswith(".so"), built
    dist = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    licence = wheel.read(f"{dist}/licenses/LICENSE").decode()
    assert "Copyright the aircc authors" in licence
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence
    meta = wheel.read(f"{dist}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta
    for classifier in ("Typing :: Typed", "Programming Language :: Python :: 3 :: Only",
                       "Topic :: Software Development :: Compilers"):
        assert f"Classifier: {classifier}" in meta


def public_functions() -> list:
    return [(name, obj) for name, obj in vars(aircc).items()
            if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == "aircc"]


def test_every_public_function_of_aircc_is_annotated():
    functions = public_functions()
    assert {"compile", "load", "devices", "device", "set_threads", "VirtualDevice"} <= \
        {name for name, _ in functions}
    missing = [f"{name}({p.name})" for name, fn in functions
               for p in inspect.signature(fn).parameters.values()
               if p.annotation is inspect.Parameter.empty]
    missing += [f"{name} -> ?" for name, fn in functions
                if inspect.signature(fn).return_annotation is inspect.Signature.empty]
    assert not missing, f"not annotated: {missing}"

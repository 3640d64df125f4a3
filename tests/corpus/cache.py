"""The corpus's export cache: each model's file, made once and kept under a name keyed by
a hash of what it depends on.

Folders go to ``$AIRCC_CORPUS_CACHE`` when it is set (kept across runs: a rerun loads them
instead of exporting again), else to a temporary folder of this process, removed when it
ends.  The key hashes the entry's name, family, config, example shape and axes, the source
of the modules that build and feed it, the key of the entry it derives from, and the
versions of torch, transformers, onnx, onnxruntime, onnxscript, scikit-learn and skl2onnx.
A failed build leaves nothing behind.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.metadata
import inspect
import io
import logging
import os
import shutil
import sys
import tempfile
import threading
import warnings

from corpus.entry import Entry

ENV = "AIRCC_CORPUS_CACHE"
MODEL_FILE = "model.onnx"
PACKAGES = ("torch", "transformers", "onnx", "onnxruntime", "onnxscript", "scikit-learn", "skl2onnx")

_DIR: list[str] = []
_LOCK = threading.RLock()


def versions() -> str:
    """The versions of the packages an export depends on."""
    out = []
    for name in PACKAGES:
        try:
            out.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name}=none")
    return " ".join(out)


def cache_dir() -> str:
    """``$AIRCC_CORPUS_CACHE``, or this process's temporary folder."""
    if os.environ.get(ENV):
        os.makedirs(os.environ[ENV], exist_ok=True)
        return os.environ[ENV]
    with _LOCK:
        if not _DIR:
            _DIR.append(tempfile.mkdtemp(prefix="aircc-corpus-"))
            atexit.register(shutil.rmtree, _DIR[0], ignore_errors=True)
        return _DIR[0]


def cache_key(entry: Entry, entries: dict[str, Entry]) -> str:
    """A hash of everything ``entry``'s file depends on."""
    h = hashlib.sha256()
    h.update(repr((entry.name, entry.family.value, dict(entry.config),
                   dict(entry.example or entry.static), {k: dict(v) for k, v in entry.axes.items()},
                   versions())).encode())
    for module in sorted({entry.build.__module__, entry.feeds.__module__}):
        h.update(inspect.getsource(sys.modules[module]).encode())
    if entry.base:
        h.update(cache_key(entries[entry.base], entries).encode())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def quiet():
    """Exporters' warnings, progress lines and logs kept off the test output."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


@contextlib.contextmanager
def inside(folder: str):
    """``folder`` as the working directory (onnxruntime's symbolic shape inference writes
    ``sym_shape_infer_temp.onnx`` and its data there when it gives up)."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def model_path(entry: Entry, entries: dict[str, Entry]) -> str:
    """The path of ``entry``'s ONNX file, built now (its base first) if not cached.  Each
    model has a folder of its own (``<name>-<key>/model.onnx``, with any external data
    beside it).  Raises what the builder raised when it cannot make the file (an exporter's
    limit)."""
    with _LOCK:
        folder = os.path.abspath(os.path.join(cache_dir(), f"{entry.name}-{cache_key(entry, entries)}"))
        path = os.path.join(folder, MODEL_FILE)
        if os.path.exists(path):
            return path
        base = model_path(entries[entry.base], entries) if entry.base else None
        tmp = f"{folder}.{os.getpid()}.tmp"
        os.makedirs(tmp, exist_ok=True)
        try:
            with quiet(), inside(tmp):    # tools that leave files in the working directory
                target = os.path.join(tmp, MODEL_FILE)
                entry.build(target, base) if base else entry.build(target)
            if not os.path.exists(path):
                os.replace(tmp, folder)     # a concurrent run sees the whole folder or none
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return path

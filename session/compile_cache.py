"""The compile cache: the .om files :class:`aircc.InferenceSession` compiles from .onnx models.

An entry is one .om file in ``$AIRCC_CACHE_DIR`` (default ``~/.cache/aircc``), named by a
key that covers everything its bytes depend on: aircc's version, the model's bytes (and
those of the external data files it names), every compile option, and the compile
target the options resolve to on this machine.  A second session of the same model
with the same options loads the file instead of compiling.

Entries are written atomically (:func:`aircc.formats.save_om`), so a reader never sees
half a file; an entry the strict .om reader refuses (``ModelFormatError``: truncated,
corrupted, of another format version) is compiled again and replaced, never trusted.
When the folder cannot be written the session compiles in memory and says so in the
log.  Nothing is ever evicted: delete the folder to empty the cache.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass

import onnx

import aircc
from aircc.compiler.driver import CompileOptions, compile_model
from aircc.config import settings
from aircc.errors import ModelFormatError
from aircc.formats import OmFile, load_om, save_om
from aircc.log import get as get_log
from aircc.ops import resolve_target

#: What became of a cache look-up.
HIT, COMPILED, RECOMPILED, UNCACHED = "hit", "compiled", "recompiled", "uncached"


@dataclass(frozen=True)
class CacheLookup:
    """Where a model's compiled .om is kept, and what the look-up did."""

    path: str
    """The entry's file (it may not exist when ``status`` is ``uncached``)."""
    status: str
    """``hit`` (loaded, no compile), ``compiled`` (no entry yet), ``recompiled`` (the entry
    was unreadable and is replaced) or ``uncached`` (compiled; the folder is not writable)."""


def external_data_files(model: onnx.ModelProto, base_dir: str) -> list[str]:
    """The files holding the model's external tensor data, every graph included (sorted)."""
    found: set[str] = set()

    def visit(graph: onnx.GraphProto) -> None:
        tensors = list(graph.initializer)
        for node in graph.node:
            for a in node.attribute:
                tensors += [a.t] if a.HasField("t") else []
                tensors += list(a.tensors)
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    visit(g)
        for t in tensors:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                location = {e.key: e.value for e in t.external_data}.get("location", "")
                found.add(os.path.join(base_dir, location))

    visit(model.graph)
    return sorted(found)


def cache_key(model_bytes: bytes, model: onnx.ModelProto, base_dir: str,
              options: CompileOptions) -> str:
    """The hex key of the .om that compiling ``model_bytes`` with ``options`` gives: every
    field of ``CompileOptions`` (``dataclasses.asdict``), the target resolved."""
    target = resolve_target(options.target)
    h = hashlib.sha256(f"aircc {aircc.__version__}\0".encode())
    h.update(hashlib.sha256(model_bytes).digest())
    for path in external_data_files(model, base_dir):
        h.update(os.path.basename(path).encode() + b"\0")
        try:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError:
            h.update(b"<missing>")             # the compile names the missing file
    fields = dataclasses.asdict(dataclasses.replace(options, target=None))
    h.update(json.dumps({"options": fields, "target": [target.name, target.backend,
                                                       target.vector_class]},
                        sort_keys=True, default=repr).encode())
    return h.hexdigest()[:40]


def cached_compile(model_bytes: bytes, model: onnx.ModelProto, source: str | bytes,
                   options: CompileOptions, base_dir: str = "") -> tuple[OmFile, CacheLookup]:
    """The .om of ``source`` (a path, or ``model_bytes``) compiled with ``options``: the cached
    entry if there is a sound one, else compiled now and stored.  ``model`` is the parsed
    model (without its external data, found from ``base_dir``)."""
    log = get_log("cache")
    name = model.graph.name or "model"
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:40]
    folder = settings().cache_dir
    path = os.path.join(folder, f"{safe}-{cache_key(model_bytes, model, base_dir, options)}.om")
    status = COMPILED
    if os.path.exists(path):
        try:
            om = load_om(path)
            log.info("model '%s': compiled model loaded from the cache (%s)", name, path)
            return om, CacheLookup(path, HIT)
        except ModelFormatError as e:
            log.warning("model '%s': the cached %s is unreadable (%s); compiling again",
                        name, path, e.message)
            status = RECOMPILED
    om = compile_model(source, options).om
    try:
        os.makedirs(folder, exist_ok=True)
        save_om(om, path)
    except OSError as e:
        log.warning("model '%s': cannot write the compile cache in %s (%s); the compiled "
                    "model is kept in memory only", name, folder, e)
        return om, CacheLookup(path, UNCACHED)
    log.info("model '%s': compiled and cached as %s", name, path)
    return om, CacheLookup(path, status)

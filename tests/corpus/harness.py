"""Run one corpus model through aircc in one mode and judge it against onnxruntime.

``static``: compiled at ``entry.static``'s shapes and run there twice; ``dynamic``: compiled
with the file's symbolic axes and run at both of ``entry.shapes``, then at the first again
(a dynamic model replays a run whose shapes it has seen); each run on new values.  Every
output is compared with onnxruntime's (CPU provider, the original file; basic graph
optimizations, as tests/e2e/test_user_exports.py explains): its name, dtype and shape,
floats within the entry's :class:`~corpus.entry.Tolerance` (NaN only where onnxruntime has
NaN), integers and bools exactly.  No node may run on the fallback kernel unless the entry
says why.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from aircc.formats import dump_om

from corpus.cache import model_path, quiet
from corpus.entry import Dims, Entry, static_shapes

MODES = ("static", "dynamic")
RUN_TIMEOUT = 300.0          # seconds for one run on the device
_SESSIONS: dict[str, object] = {}


@dataclass(frozen=True)
class Outcome:
    """What one (model, mode) gave: ``stage`` is where it stopped (``done`` when every check
    ran), ``detail`` the error's first line or the largest differences."""

    model: str
    family: str
    mode: str
    passed: bool
    stage: str
    detail: str
    seconds: float

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (f"{self.model:<38} {self.family:<17} {self.mode:<7} {verdict} {self.seconds:5.1f} s  "
                f"{self.detail}")


class Mismatch(AssertionError):
    """An output differs from onnxruntime's."""


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def reference(path: str):
    """onnxruntime's session on the original file (once per file)."""
    import onnxruntime as ort

    if path not in _SESSIONS:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.log_severity_level = 3
        _SESSIONS[path] = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return _SESSIONS[path]


def header() -> str:
    """What the table's results depend on: aircc's compile target and the exporters' versions."""
    from aircc.config import settings

    from corpus.cache import versions

    return f"target {settings().target or 'native'}; {versions()}"


def shape_text(dims: Dims) -> str:
    return "x".join(f"{v}" for v in dims.values())


def degenerate(want: dict[str, np.ndarray]) -> None:
    """Raise if a float output of onnxruntime's is not finite or all one value: such a model
    would test nothing (a problem of the corpus, not of aircc)."""
    for name, w in want.items():
        if w.dtype.kind == "f" and w.size > 1 and (not np.isfinite(w).all() or (w == w.flat[0]).all()):
            raise ValueError(f"onnxruntime's output {name!r} is degenerate (not finite, or constant)")


def compare(entry: Entry, got: dict[str, np.ndarray], want: dict[str, np.ndarray],
            where: str) -> tuple[float, float]:
    """Raise :class:`Mismatch` naming the first output that differs; else the largest absolute
    and relative differences over the float outputs."""
    if sorted(got) != sorted(want):
        raise Mismatch(f"{where}: outputs {sorted(got)}, onnxruntime's {sorted(want)}")
    worst = (0.0, 0.0)
    for name, w in want.items():
        g = got[name]
        if g.dtype != w.dtype or g.shape != w.shape:
            raise Mismatch(f"{where}: output {name!r} is {g.dtype}{list(g.shape)}, "
                           f"onnxruntime's {w.dtype}{list(w.shape)}")
        if w.dtype.kind != "f":
            bad = int(np.count_nonzero(g != w))
            if bad:
                raise Mismatch(f"{where}: output {name!r}: {bad}/{w.size} values differ (exact)")
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        nan_g, nan_w = np.isnan(g64), np.isnan(w64)
        if (nan_g != nan_w).any():
            raise Mismatch(f"{where}: output {name!r}: NaN at {int((nan_g & ~nan_w).sum())} places "
                           f"where onnxruntime has a number, a number at "
                           f"{int((nan_w & ~nan_g).sum())} where it has NaN")
        tol = entry.tolerance
        atol = tol.atol_for(w64)
        with np.errstate(invalid="ignore"):
            diff = np.where(nan_w | (g64 == w64), 0.0, np.abs(g64 - w64))
        rel = diff / np.maximum(np.abs(w64), atol)       # relative where values are not ~0
        bad = int(np.count_nonzero(diff > atol + tol.rtol * np.abs(np.nan_to_num(w64))))
        top = (float(diff.max(initial=0.0)), float(rel.max(initial=0.0)))
        if bad:
            raise Mismatch(f"{where}: output {name!r}: {bad}/{w.size} values off, max abs {top[0]:.3g} "
                           f"(atol {atol:.3g}, rtol {tol.rtol:g}), max rel {top[1]:.3g}")
        worst = (max(worst[0], top[0]), max(worst[1], top[1]))
    return worst


def run_mode(entry: Entry, mode: str, entries: dict[str, Entry], device=None) -> Outcome:
    """Export (or find), compile, run and compare ``entry`` in ``mode``; never raises."""
    import aircc

    t0 = time.perf_counter()
    stage = "export"

    def outcome(passed: bool, detail: str) -> Outcome:
        seconds = time.perf_counter() - t0
        return Outcome(entry.name, entry.family.value, mode, passed, stage, detail, seconds)

    try:
        path = model_path(entry, entries)
        stage = "reference"
        sess = reference(path)
        names = [o.name for o in sess.get_outputs()]
        stage = "compile"
        with quiet():
            if mode == "static":
                compiled = aircc.compile(path, mode="static", input_shapes=static_shapes(entry))
            else:
                compiled = aircc.compile(path, mode="dynamic")
        # each shape's second run (new values) replays what its first one recorded
        shapes = [entry.static] * 2 if mode == "static" else [*entry.shapes, entry.shapes[0]]
        worst = (0.0, 0.0)
        stage = "load"
        om = dump_om(compiled.om)                 # loaded from its bytes, as from a file
        with aircc.load(om, device=device, timeout=RUN_TIMEOUT) as model:
            for i, dims in enumerate(shapes):
                feeds = entry.feeds(dims, i + 1)
                stage = f"reference {shape_text(dims)}"
                want = dict(zip(names, sess.run(None, feeds)))
                degenerate(want)
                stage = f"run {shape_text(dims)}"
                got = model.run(feeds)
                stage = f"compare {shape_text(dims)}"
                top = compare(entry, got, want, f"at {shape_text(dims)}")
                worst = (max(worst[0], top[0]), max(worst[1], top[1]))
        stage = "fallback"
        fallback = compiled.report.fallback_nodes
        if fallback and not entry.fallback:
            ops = sorted({n.op for n in fallback})
            return outcome(False, f"{len(fallback)} nodes on the fallback kernel: {', '.join(ops)}")
        stage = "done"
        return outcome(True, f"max abs {worst[0]:.2g}, max rel {worst[1]:.2g}"
                       + (f"; {len(fallback)} fallback nodes (allowed)" if fallback else ""))
    except Mismatch as e:
        return outcome(False, str(e))
    except Exception as e:  # noqa: BLE001  (every failure is a row of the report)
        return outcome(False, f"[{stage}] {first_line(e)}")

"""Fuzzing the .om reader and loader with mutated files of real compiled models.

A case is deterministic from its id: the seed model is ``SEEDS[id % len(SEEDS)]`` and
the mutation comes from ``random.Random(id)`` (:func:`om_mutations.mutate`).  Most mutations change
fields of the decoded sections and re-assemble the file with valid checksums, so that
they reach the semantic checks.

``python tests/fuzz_om.py --worker SEED_DIR FIRST STOP`` runs cases FIRST..STOP-1 and
writes ``start <id>`` and then one JSON line (:meth:`Runner.run_case`) per case, so that
its parent (tests/e2e/test_fuzz_om.py) knows which case a crash or a hang belongs to.
``python tests/fuzz_om.py --case ID`` replays one case here, with its traceback.
"""
from __future__ import annotations

import inspect
import json
import os
import pathlib
import resource
import sys
import tempfile
import time
import traceback

import numpy as np

from om_hostile import ENDLESS
from om_mutations import SEEDS, WEIGHTS_KIND, Vocabulary, mutate, split

#: The last fuzz run's summary, for the test session's closing report (conftest).
SUMMARY: list[str] = []
#: Each run's deadline (the seeds run in milliseconds; a Loop that never exits ends here).
RUN_DEADLINE = 1.0


def _graphs() -> tuple:
    """x[N, 8] -> Relu -> three (MatMul, Tanh) branches -> Sum (several streams when dynamic);
    Conv 3x3 (a weight, a workspace) + Relu."""
    from onnx import helper
    from graphs import const, model, tensor

    node = helper.make_node
    nodes, inits = [node("Relu", ["x"], ["r"], name="stem")], []
    for b in range(3):
        inits.append(const(f"w{b}", np.full([8, 8], 0.1 * (b + 1), np.float32)))
        nodes += [node("MatMul", ["r", f"w{b}"], [f"m{b}"]), node("Tanh", [f"m{b}"], [f"t{b}"])]
    nodes.append(node("Sum", ["t0", "t1", "t2"], ["y"], name="sum"))
    matmuls = model(nodes, [tensor("x", ["N", 8])], [tensor("y", ["N", 8])], inits)
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    conv = model([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["y"])],
                 [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, 4, 8, 8])], [const("w", w)])
    return matmuls, conv


def endless_loop_model():
    """y = Loop(no trip count, cond = true) { h + 1; cond stays true }: a static Loop that
    never exits."""
    from onnx import TensorProto, helper
    from graphs import model, tensor

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["h_in", "one"], ["h_out"])], "forever",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), tensor("h_in", [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), tensor("h_out", [4])])
    return model([helper.make_node("Loop", ["", "yes", "x"], ["y"], body=body)],
                 [tensor("x", [4])], [tensor("y", [4])],
                 [helper.make_tensor("yes", TensorProto.BOOL, [], [True]),
                  helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])], 17)


def build_seeds(directory: str) -> dict[str, bytes]:
    """Compile every seed model (tiny, so that a case costs milliseconds); write each as
    ``<name>.om`` in ``directory``."""
    import aircc
    from aircc.formats.om import dump_om
    from graphs import diamond, loop_if_model

    matmuls, conv = _graphs()
    many = {"streams": None, "min_branch_bytes": 0, "split_matrix_branches": True}   # 3 streams
    compiled = {
        "static_streams": aircc.compile(diamond(), **many),
        "gears": aircc.compile(diamond(), input_shapes={"x": [-1, 4]}, dynamic_batch=[1, 2], **many),
        "dynamic_streams": aircc.compile(matmuls, mode="dynamic", **many),
        "static_loop_if": aircc.compile(loop_if_model(), mode="static"),
        "dynamic_loop_if": aircc.compile(loop_if_model(), mode="dynamic"),
        "static_conv": aircc.compile(conv),
        ENDLESS: aircc.compile(endless_loop_model(), mode="static")}
    out = {name: dump_om(c.om) for name, c in compiled.items()}
    for name, data in out.items():
        with open(os.path.join(directory, f"{name}.om"), "wb") as f:
            f.write(data)
    return out


# ------------------------------------------------------------------ one case
def _frames(exc: BaseException) -> dict:
    """Where ``exc`` was raised: the innermost frame, and the innermost one inside aircc."""
    import aircc
    root = os.path.dirname(os.path.abspath(aircc.__file__))
    tb = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in tb if os.path.abspath(f.filename).startswith(root + os.sep)]
    where = lambda f: f"{os.path.relpath(f.filename, root) if f in ours else f.filename}:{f.lineno}"
    return {"frame": where(tb[-1]) if tb else "?", "aircc_frame": where(ours[-1]) if ours else "?"}


def _feeds(inputs: list, rng: np.random.Generator) -> dict:
    """Random feeds of the declared inputs (symbols are 2; what cannot be made, made wrong)."""
    feeds = {}
    for spec in inputs:
        declared = spec.shape
        shape = [2] if declared is None else [d if isinstance(d, int) else 2 for d in declared]
        try:
            dt = np.dtype(spec.dtype)
        except TypeError:
            dt = np.dtype(np.float32)
        dt = dt if dt.kind in "biufc" else np.dtype(np.float32)
        shape = shape if int(np.prod(shape, dtype=object)) <= 1 << 20 else [1]
        feeds[spec.name] = (rng.integers(0, 3, shape) if dt.kind in "iub"
                               else rng.standard_normal(shape)).astype(dt)
    return feeds


def peak_rss() -> int:
    """This process's peak resident memory in bytes: Linux's VmHWM, which starts again at
    exec (``ru_maxrss`` keeps the parent's from before the fork); ``ru_maxrss`` elsewhere."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10


class Runner:
    """Runs cases on one device: load each mutated file, run it once, close it."""

    def __init__(self, seed_dir: str):
        import aircc
        from aircc.formats import om as omod

        self.seeds = {n: pathlib.Path(seed_dir, f"{n}.om").read_bytes() for n in (*SEEDS, ENDLESS)}
        self.vocab = {n: Vocabulary({k: p for k, _, p in split(b)[1] if k != WEIGHTS_KIND})
                      for n, b in self.seeds.items()}
        self.device = aircc.VirtualDevice(256 << 20)
        self.reached, parse = False, omod.parse_sections

        def counting(*args, **kw):           # did the case get past the container checks?
            self.reached = True
            return parse(*args, **kw)
        omod.parse_sections = counting

    def run_case(self, case: int, reraise: bool = False) -> dict:
        """What case ``case`` did: refused / ran / run_error, or FOREIGN (not an AirccError),
        WRAPPED (the reader's catch-all), HARNESS (the fuzzer's own bug); and by how many
        bytes it raised the process's peak memory."""
        import aircc
        from aircc.errors import AirccError, ModelFormatError

        try:
            seed, data, what = mutate(case, self.seeds, self.vocab)
        except Exception as exc:
            return {"case": case, "outcome": "HARNESS", "message": repr(exc), **_frames(exc)}
        out = {"case": case, "seed": seed, "mutation": what, "size": len(data)}
        self.reached, stage, model = False, "load", None
        peak = peak_rss()
        t0 = time.monotonic()
        try:
            model = aircc.load(data, device=self.device)
            out["load_seconds"] = time.monotonic() - t0
            stage, run = "run", model.run
            kw = {"timeout": RUN_DEADLINE} if "timeout" in inspect.signature(run).parameters else {}
            feeds = _feeds(model.inputs, np.random.default_rng(case))
            t0 = time.monotonic()
            try:
                run(feeds, **kw)
            finally:
                out["run_seconds"] = time.monotonic() - t0
            stage = "close"
            model.close()
            out["outcome"] = "ran"
        except Exception as exc:
            out.update(error=type(exc).__name__, message=str(exc)[:400])
            if not isinstance(exc, AirccError):
                out.update(outcome="FOREIGN", stage=stage, **_frames(exc))
            elif stage == "load" and exc.message.startswith("malformed model file"):
                out.update(outcome="WRAPPED", **_frames(exc.__cause__ or exc))   # a hole in formats/
            else:
                out.update(outcome="refused" if stage == "load" else "run_error",
                           format_error=isinstance(exc, ModelFormatError))
            if reraise:
                raise
        finally:
            try:
                if model is not None and stage != "close":
                    model.close()
            except Exception as exc:
                out.update(outcome="FOREIGN", stage="close", error=type(exc).__name__,
                           message=str(exc)[:400], **_frames(exc))
        out["reached"] = self.reached
        out.setdefault("load_seconds", time.monotonic() - t0)
        rss = peak_rss()
        out["rss_growth"], out["rss"] = rss - peak, rss
        self._check_device(out)
        return out

    def _check_device(self, out: dict) -> None:
        """Note a case that left device memory or streams behind; go on on a fresh device."""
        import aircc

        dev = self.device
        if getattr(dev, "caching_allocator", None) is not None:
            dev.caching_allocator.release_cached()
        if dev.memory.used or dev.streams:
            out["leak"] = f"{dev.memory.used} bytes, {len(dev.streams)} streams"
            dev.close()
            self.device = aircc.VirtualDevice(256 << 20)


def worker(seed_dir: str, first: int, stop: int) -> None:
    """The subprocess: cases ``first..stop-1``, ``start <id>`` and a JSON line each."""
    runner = Runner(seed_dir)
    print("ready", flush=True)
    for case in range(first, stop):
        print(f"start {case}", flush=True)
        print(json.dumps(runner.run_case(case)), flush=True)
    os._exit(0)                              # do not wait for threads a case left behind


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "--case":
        with tempfile.TemporaryDirectory() as d:
            build_seeds(d)
            r = Runner(d)
            print(mutate(int(sys.argv[2]), r.seeds, r.vocab)[::2])
            print(json.dumps(r.run_case(int(sys.argv[2]), reraise=True), indent=1))

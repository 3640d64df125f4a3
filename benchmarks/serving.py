"""Serving: inferences per second with 1, 2 and 4 requests in flight, aircc against
onnxruntime and OpenVINO.

Each engine keeps N requests in flight for a fixed window (a new request starts as one
completes; those started before the window ends are waited for and counted, and the
window's time runs until the last of them ends), so its rate is what a server with N
callers gets.  Rounds interleave the engines as the latency blocks do: for each N, one
block per engine, the engine that leads rotating from round to round, each block
started with the other engines' threads idle (``quiet.py``) and after N untimed
requests.  Reported per model and N: each engine's median rate over the rounds, the
percentiles of its requests' latencies (submission to completion, every round's),
aircc's ratio to the best float32 peer (the median over rounds of each round's ratio)
and aircc's rate at N over its rate at 1.

- aircc: ``aircc.load(om, hint="throughput")`` from 2 requests in flight (an execution
  context per CPU, each on its own, over weights held once; one context for 1) and
  ``model.run_async``, N futures in flight.
- onnxruntime: one ``InferenceSession`` (default options), N threads each calling
  ``run`` (sessions are thread-safe; its ``run_async`` runs each request on a thread of
  the session's own intra-op pool, the pool the requests' parallel work needs).
- OpenVINO (``pip install openvino``; skipped, with one line saying so, where it is not
  installed): ``compile_model`` with the THROUGHPUT hint at float32 and an
  ``AsyncInferQueue`` of N requests; again at the device's default precision (bfloat16
  on CPUs with AVX512-BF16), reported beside it but not one of aircc's peers.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from neighbour import others_load
from report import serving_machine_line, serving_row_lines
from quiet import wait_until_quiet

#: Requests in flight.
IN_FLIGHT = (1, 2, 4)
#: What a full run serves: two light models, the BERT-style encoder at (1, 32), and the
#: broader suite's MobileNet (where torch is installed).
SERVING = "squeezenet,resnet50,bert_dynamic_1x32,mobilenet_se"
#: The ISA flags of /proc/cpuinfo that decide which kernels the engines pick.
ISA_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni")
F32_PEERS = ("onnxruntime", "openvino_f32")


@dataclass
class Window:
    """One block: requests completed over its seconds, and each one's latency."""

    completed: int
    seconds: float
    latencies: list[float] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.completed / self.seconds if self.seconds > 0 else 0.0


def isa_flags() -> dict[str, bool]:
    """Each of :data:`ISA_FLAGS`: whether /proc/cpuinfo lists it (all False where it cannot
    be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        flags = []
    return {name: name in flags for name in ISA_FLAGS}


def threads_window(call: Callable[[], object], n: int, seconds: float) -> Window:
    """``n`` threads each calling ``call`` until ``seconds`` have passed (each at least once)."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    start = time.perf_counter()
    deadline = start + seconds

    def loop() -> None:
        try:
            while True:
                t = time.perf_counter()
                call()
                end = time.perf_counter()
                latencies.append(end - t)           # list.append is atomic
                if end >= deadline:
                    return
        except BaseException as e:                  # re-raised in the caller
            errors.append(e)

    workers = [threading.Thread(target=loop, daemon=True) for _ in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return Window(len(latencies), time.perf_counter() - start, latencies)


def futures_window(submit: Callable[[], cf.Future], n: int, seconds: float) -> Window:
    """``n`` futures of ``submit`` in flight, one more submitted as each completes, until
    ``seconds`` have passed (at least ``n``)."""
    latencies: list[float] = []
    start = time.perf_counter()
    deadline = start + seconds

    def one() -> cf.Future:
        t = time.perf_counter()
        fut = submit()
        fut.add_done_callback(lambda f, t=t: latencies.append(time.perf_counter() - t))
        return fut

    pending = {one() for _ in range(n)}
    completed = 0
    while pending:
        done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
        for fut in done:
            fut.result()                            # an engine's error ends the block
            completed += 1
            if time.perf_counter() < deadline:
                pending.add(one())
    return Window(completed, time.perf_counter() - start, latencies)


class AirccEngine:
    """aircc serving ``om`` through ``run_async``, N requests in flight: one context for
    one request (the latency hint), else the throughput hint's contexts (one per CPU,
    each on its own)."""

    name = "aircc"
    mode = "contexts"

    def __init__(self, om, feeds: dict, device=None):
        import aircc

        self._load = lambda n: aircc.load(om, device=device, hint="throughput" if n > 1
                                          else "latency")
        self.feeds = feeds
        self._models: dict[int, object] = {1: self._load(1)}
        self.inputs = self._models[1].inputs

    def _model(self, n: int):
        if n not in self._models:
            self._models[n] = self._load(n)
            self._models[n].max_in_flight = max(n, self._models[n].max_in_flight)
        return self._models[n]

    def window(self, n: int, seconds: float) -> Window:
        model = self._model(n)
        return futures_window(lambda: model.run_async(self.feeds), n, seconds)

    def close(self) -> None:
        for m in self._models.values():
            m.close()


class OrtEngine:
    """onnxruntime: one session with default options, N threads calling ``run``."""

    name = "onnxruntime"
    mode = "threads"

    def __init__(self, model_bytes: bytes, feeds: dict):
        import onnxruntime as ort

        self.sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        self.feeds = feeds

    def window(self, n: int, seconds: float) -> Window:
        return threads_window(lambda: self.sess.run(None, self.feeds), n, seconds)

    def close(self) -> None:
        self.sess = None


def openvino_version() -> str | None:
    """OpenVINO's version, or None where it is not installed."""
    try:
        import openvino as ov
    except ImportError:
        return None
    return ov.get_version().split("-")[0]


class OpenVinoEngine:
    """OpenVINO with the THROUGHPUT hint, at float32 or its default precision, and an
    ``AsyncInferQueue`` of N requests."""

    mode = "async queue"

    def __init__(self, path: str, feeds: dict, f32: bool):
        import openvino as ov

        self.ov = ov
        config = {"PERFORMANCE_HINT": "THROUGHPUT"}
        if f32:
            config["INFERENCE_PRECISION_HINT"] = "f32"
        self.name = "openvino_f32" if f32 else "openvino_default"
        self.compiled = ov.Core().compile_model(path, "CPU", config)
        self.precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        self.feeds = feeds
        self._queues: dict[int, object] = {}

    def window(self, n: int, seconds: float) -> Window:
        if n not in self._queues:
            self._queues[n] = self.ov.AsyncInferQueue(self.compiled, n)
        queue, latencies = self._queues[n], []
        queue.set_callback(lambda request, t: latencies.append(time.perf_counter() - t))
        start = time.perf_counter()
        deadline, submitted = start + seconds, 0
        while submitted < n or time.perf_counter() < deadline:
            queue.start_async(self.feeds, time.perf_counter())   # waits for an idle request
            submitted += 1
        queue.wait_all()
        return Window(submitted, time.perf_counter() - start, latencies)

    def close(self) -> None:
        self._queues.clear()
        self.compiled = None


def engines(entry: dict, om, device, folder: str, skipped: dict) -> tuple[list, dict]:
    """The engines serving ``entry`` (aircc first; none where aircc fails), all fed the
    entry's feeds (or random ones), and engine -> error for those that could not be made."""
    aircc_engine = AirccEngine(om, entry["feeds"], device)
    feeds = aircc_engine.feeds = entry["feeds"] or random_feeds(aircc_engine.inputs)
    made, errors = [aircc_engine], {}
    model_bytes = entry["model"].SerializeToString()
    makers = [("onnxruntime", lambda: OrtEngine(model_bytes, feeds))]
    if "openvino" not in skipped:
        path = os.path.join(folder, f"{entry['name']}.onnx")
        with open(path, "wb") as f:
            f.write(model_bytes)
        makers += [("openvino_f32", lambda: OpenVinoEngine(path, feeds, f32=True)),
                   ("openvino_default", lambda: OpenVinoEngine(path, feeds, f32=False))]
    for name, make in makers:
        try:
            made.append(make())
        except Exception as e:          # reported in the row, the other engines go on
            errors[name] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
    return made, errors


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50, p90 and p99 of ``latencies`` (seconds) in milliseconds."""
    p50, p90, p99 = np.percentile(np.asarray(latencies) * 1e3, [50, 90, 99])
    return {"p50_ms": float(p50), "p90_ms": float(p90), "p99_ms": float(p99)}


def serve_model(made: list, rounds: int, seconds: float, in_flight=IN_FLIGHT) -> list[dict]:
    """Rounds of one block per engine at each N: per N, each engine's median rate,
    its latency percentiles, and aircc's ratio to the best float32 peer."""
    names = [e.name for e in made]
    rates = {(n, name): [] for n in in_flight for name in names}
    lat = {(n, name): [] for n in in_flight for name in names}
    for r in range(rounds):
        for n in in_flight:
            for i in range(len(made)):
                engine = made[(r + i) % len(made)]
                wait_until_quiet()
                engine.window(n, 0.0)                       # N requests, untimed
                w = engine.window(n, seconds)
                rates[n, engine.name].append(w.per_second)
                lat[n, engine.name].extend(w.latencies)
    out = []
    for n in in_flight:
        row: dict = {"n": n, "engines": {
            name: {"per_second": statistics.median(rates[n, name]), "rounds": rates[n, name],
                   **percentiles(lat[n, name])}
            for name in names}}
        peers = [p for p in F32_PEERS if p in names]
        if "aircc" in names and peers:
            row["best_peer"] = max(peers, key=lambda p: row["engines"][p]["per_second"])
            row["ratio"] = statistics.median(
                a / max(rates[n, p][k] for p in peers) for k, a in enumerate(rates[n, "aircc"]))
        out.append(row)
    if "aircc" in names:
        base = out[0]["engines"]["aircc"]["per_second"]
        for row in out:
            row["aircc_scaling"] = row["engines"]["aircc"]["per_second"] / base
    return out


def serve(selected: list[dict], target: str, rounds: int, seconds: float, device=None,
          machine: dict | None = None, in_flight=IN_FLIGHT) -> dict:
    """The serving table's results for ``selected`` (the benchmark's entries), aircc
    compiled for ``target``; prints the ``machine`` line first."""
    import dataclasses

    from aircc.compiler.driver import compile_model

    version = openvino_version()
    skipped = {} if version else {"openvino": "not installed (pip install openvino)"}
    out = {"in_flight": list(in_flight), "rounds": rounds, "seconds": seconds, "target": target,
           "isa": isa_flags(), "openvino": version, "skipped": skipped, "models": []}
    if machine:
        print(serving_machine_line(machine, out), flush=True)
    if not version:
        print(f"OpenVINO skipped: {skipped['openvino']}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for entry in selected:
            row: dict = {"model": entry["name"], "errors": {}}
            made = []
            try:
                compiled = compile_model(entry["model"], dataclasses.replace(entry["options"],
                                                                             target=target))
                made, row["errors"] = engines(entry, compiled.om, device, folder, skipped)
                row["aircc_mode"] = made[0].mode
                row["precisions"] = {e.name: e.precision for e in made if hasattr(e, "precision")}
                with others_load() as others:
                    row["in_flight"] = serve_model(made, rounds, seconds, in_flight)
                row["others_cpu_cores"] = others["cores"]
            except Exception as e:          # reported in the results, the other models go on
                row["errors"]["aircc"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
            finally:
                for e in made:
                    e.close()
            out["models"].append(row)
            for line in serving_row_lines(row):
                print(line, flush=True)
    return out


def random_feeds(inputs: list, seed: int = 0) -> dict:
    """Normal floats of each input's (static) shape and dtype."""
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in inputs}

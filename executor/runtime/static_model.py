"""Runs a static (sink-mode) .om on a virtual device.

Load: reserve the weights region and the activation arena in device memory,
copy the weights in, create the model's streams and events, and bind every
task to numpy views of its device addresses.  Run: check the feeds, then one
submission to the device, which walks the per-stream task lists itself.
"""
from __future__ import annotations

import numpy as np

from aircc.errors import DeviceOutOfMemoryError, ModelFormatError
from aircc.executor.device.device import Cancelled, DeviceProgram, Run, VirtualDevice
from aircc.executor.device.stream import Event
from aircc.executor.kernels.registry import lookup
from aircc.formats import OmFile

from .feeds import check_feeds


class StaticModel:
    """A loaded static model, bound to one device."""

    def __init__(self, om: OmFile, device: VirtualDevice):
        self.om = om
        self.device = device
        self.description = om.sections["model"]
        self.inputs = self.description["inputs"]
        self.outputs = self.description["outputs"]
        plan = om.sections["memory_plan"]
        tasks = om.sections["tasks"]
        name = self.description.get("name", "model")
        mem = device.memory
        self._allocations: list[int] = []
        try:
            self.weights_base = self._malloc(plan["weights_bytes"], f"weights of model '{name}'")
            self.arena_base = self._malloc(plan["arena_bytes"], f"activation arena of model '{name}'")
        except DeviceOutOfMemoryError:
            self._release()
            raise
        self.bases = {"weights": self.weights_base, "arena": self.arena_base}
        for w in plan["weights"]:
            src = om.weights.get(w["name"])
            if src is None:
                self._release()
                raise ModelFormatError(f"weight '{w['name']}' is in the memory plan but not in the weights section")
            np.copyto(mem.view(self.weights_base + w["offset"], src.dtype, src.shape), src)
        self.events = device.create_events(tasks["events"])
        self.streams = [device.create_stream() for _ in range(tasks["streams"])]
        tiling = om.sections["tiling"]["entries"]
        lists = [[(self._bind(t, tiling), t) for t in stream_tasks] for stream_tasks in tasks["lists"]]
        self.program = DeviceProgram(self.streams, self.events, lists)
        self.runs = 0

    # ---------------------------------------------------------------- load
    def _malloc(self, size: int, what: str) -> int:
        off = self.device.memory.malloc(max(size, 1), what)
        self._allocations.append(off)
        return off

    def _view(self, operand: dict | None) -> np.ndarray | None:
        if operand is None:
            return None
        return self.device.memory.view(self.bases[operand["mem"]] + operand["offset"],
                                       operand["dtype"], operand["shape"])

    def _bind(self, task: dict, tiling: list[dict]):
        kind = task["kind"]
        if kind == "kernel":
            spec = lookup(task["op"], task["version"], task["domain"], task["node"])
            kernel, attrs = spec.kernel, task["attrs"]
            ins = [self._view(o) for o in task["inputs"]]
            outs = [self._view(o) for o in task["outputs"]]
            ws_desc = task.get("workspace")
            ws = None
            if ws_desc:
                base = self.bases[ws_desc["mem"]] + ws_desc["offset"]
                ws = self.device.memory.data[base:base + ws_desc["size"]]
            til = tiling[task["tiling"]]
            return lambda run: kernel(ins, outs, attrs, til, ws)
        if kind == "memcpy_h2d":
            dst, b = self._view(task["dst"]), task["binding"]
            return lambda run: np.copyto(dst, run.feeds[b])
        if kind == "memcpy_d2h":
            src, b = self._view(task["src"]), task["binding"]
            return lambda run: np.copyto(run.results[b], src)
        if kind == "event_record":
            ev = self.events[task["event"]]
            return lambda run: ev.record(run.generation)
        if kind == "event_wait":
            ev = self.events[task["event"]]

            def wait(run: Run, ev: Event = ev):
                if not ev.wait(run.generation, lambda: run.cancelled):
                    raise Cancelled()
            return wait
        raise ModelFormatError(f"unknown task kind '{kind}'")

    # ---------------------------------------------------------------- run
    def run(self, feeds: dict, output_names: list[str] | None = None,
            timeout: float | None = None) -> dict[str, np.ndarray]:
        """Run one inference: ``{input name: array}`` -> ``{output name: array}``."""
        ordered = check_feeds(self.inputs, feeds)
        results = [np.empty(o["shape"], dtype=o["dtype"]) for o in self.outputs]
        self.device.execute(self.program, ordered, results, timeout=timeout)
        self.runs += 1
        out = {o["name"]: r for o, r in zip(self.outputs, results)}
        if output_names is not None:
            missing = [n for n in output_names if n not in out]
            if missing:
                from aircc.errors import InputError
                raise InputError(f"unknown output names {missing}; the model's outputs are {list(out)}")
            out = {n: out[n] for n in output_names}
        return out

    # ---------------------------------------------------------------- unload
    def _release(self) -> None:
        for off in self._allocations:
            self.device.memory.free(off)
        self._allocations.clear()

    def close(self) -> None:
        for s in getattr(self, "streams", []):
            self.device.destroy_stream(s)
        self.streams = []
        self._release()

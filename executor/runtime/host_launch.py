"""The launch stage of a dynamic run: what a run puts on the device's streams.

Kernel launches, host-to-device and device-to-host copies, event records and waits,
each queued on its stream (timed into the run's profile when one records it, and
kept in the run's capture when its launches are recorded for replay).
:class:`LaunchStage` is a part of :class:`~.host_pipeline.RunState`.
"""
from __future__ import annotations

import numpy as np

from aircc.errors import AirccError, KernelError
from aircc.faults import FaultKind, pick
from aircc.executor.device.stream import Signal
from aircc.executor.device.tensor import DeviceTensor
from aircc.formats.exec_graph import HostKernel

from .host_values import host_result


class LaunchStage:
    """Host kernels that queue device work (mixed into ``RunState``)."""

    def launch(self, kernel: HostKernel, position: int | None = None) -> None:
        k = kernel.node
        if k in self.aliased:
            return                      # a view of its input: nothing to run
        node, op = self.plan.nodes[k], self.plan.ops[k]
        vi = self.plan.value_inputs[k]
        ins = [None if not i else self.host_value(i) if j in vi else self.value(i)
               for j, i in enumerate(node.inputs)]
        outs = [self.views[o] if o else None for o in node.outputs]
        ws = self.views.pop(f"#ws{k}", None)
        constant = None
        if self.capture is not None:     # kept for replays: bound once (the kernel's prepare)
            weights = self.plan.host_values
            constant = [bool(i) and i in weights for i in node.inputs]
        call = self.ctx.device.engine_call(op.impl, op.engine, ins, outs, node.attrs,
                                         self.tilings[k], ws, constant, self.ctx.prepared,
                                         self.ctx.cube)
        call.outputs = outs               # what an injected ``corrupt`` fault perturbs
        stream = self.ctx.streams[kernel.stream]
        launched = call if self.faults is None else self._with_fault(node.name, call, outs)

        def task(state=self):
            if state.cancelled:
                return
            try:
                launched()
            except AirccError as e:
                state.fail(e)
            except BaseException as e:  # name the node and op
                state.fail(KernelError(node.name, node.op, e))
        task.node = node
        desc = None
        if self.profiler is not None or self.capture is not None:
            desc = {"kind": "kernel", "node": node.name, "op": node.op,
                    "shapes": [list(np.shape(i)) for i in ins if i is not None],
                    "out_shapes": [list(np.shape(o)) for o in outs if o is not None],
                    "bytes": sum(int(getattr(a, "nbytes", 0)) for a in ins + outs if a is not None)}
        self._submit(kernel.stream, task, desc)
        if self.capture is not None:
            # a task: call(run) -> None; without this run's faults (a replay fires its own)
            self.capture.append((kernel.stream, call, desc))
        if k in self.workspaces:
            self.pool.free(self.workspaces.pop(k), [stream])

    def _submit(self, index: int, task, desc: dict | None, event_key: tuple | None = None) -> None:
        """Queue ``task`` on the model's stream ``index`` (timed into the profile, if any)."""
        stream = self.ctx.streams[index]
        self.ctx.launches += 1         # one host submission each (replays: one in all)
        self.ctx.device.stats["host_submissions"] += 1
        prof = self.profiler
        if prof is not None and desc is not None:
            prof.name_stream(self.ctx.device.id, stream.id, f"{self.plan.name} stream {index}")
            task = prof.timed(self.ctx.device.id, stream.id, desc, task, event_key)
        stream.submit(task)

    def _with_fault(self, node: str, call, outs: list):
        """``call`` preceded by the injected fault planned for ``node``, if any (an
        out-of-memory fault fires at the node's Alloc instead; a ``corrupt`` one perturbs
        ``outs`` after the kernel)."""
        fault = pick(self.faults, node)
        if fault is None or fault.kind is FaultKind.OOM:
            return call
        fire = self.ctx.device.fire

        def faulty(_run=None):
            corrupt = fire(fault, node)
            call()
            if corrupt:
                fault.corrupt(outs)
        return faulty

    def memcpy_h2d(self, kernel: HostKernel, position: int | None = None) -> None:
        node = self.plan.nodes[kernel.node]
        src = self.host[node.inputs[0]]
        dst = self.views[node.outputs[0]]
        self._submit(kernel.stream, lambda: self.cancelled or np.copyto(dst, src),
                     {"kind": "memcpy_h2d", "bytes": int(dst.nbytes)})
        binding = node.attrs.get("binding")
        self.count_copy("h2d", binding, int(dst.nbytes))
        if self.capture is not None:
            copy = ((lambda run: np.copyto(dst, run.feeds[binding])) if binding is not None
                    else (lambda run: np.copyto(dst, src)))      # a host value: fixed per shape
            self.capture.append((kernel.stream, copy, {"kind": "memcpy_h2d"}))

    def memcpy_d2h(self, kernel: HostKernel, position: int | None = None) -> None:
        node = self.plan.nodes[kernel.node]
        name = node.inputs[0]
        binding = node.attrs["binding"]
        out_name = self.plan.exec_graph.outputs[binding]
        t = self.types[name]
        if kernel.stream is None or name not in self.views:
            self.results[out_name] = host_result(self.value(name))
            if self.capture is not None:   # made on the host from shapes alone: fixed per shape
                self.host_results.append((binding, self.results[out_name]))
            if out_name in self.device_outputs:      # a host value, copied to the device
                self.results[out_name] = DeviceTensor.from_numpy(self.results[out_name],
                                                                 self.ctx.device)
            return
        src = self.views[name]
        if out_name in self.device_outputs:          # a copy within the device
            tensor = DeviceTensor.allocate(self.ctx.device, t.dtype, t.shape,
                                           f"output '{out_name}' of model '{self.plan.name}'")
            result = tensor.view()
            self.results[out_name] = tensor
        else:
            result = self.results[out_name] = np.empty(t.shape, t.dtype)
        self._submit(kernel.stream, lambda: self.cancelled or np.copyto(result, src),
                     {"kind": "memcpy_d2h", "bytes": int(result.nbytes)})
        self.count_copy("d2h", binding, int(result.nbytes))
        if self.capture is not None:
            def d2h(run):
                into = run.results[binding]
                if into is None:
                    run.results[binding] = src.copy()
                else:              # the device tensor the replay was given for it
                    np.copyto(into, src)
            self.capture.append((kernel.stream, d2h, {"kind": "memcpy_d2h"}))

    def count_copy(self, direction: str, binding: int | None, nbytes: int) -> None:
        """Count an input or output copy (a device tensor fed or filled: within the
        device), and keep it for the replays of this run."""
        on_device = binding is not None and (
            binding in self.fed_on_device if direction == "h2d"
            else self.plan.exec_graph.outputs[binding] in self.device_outputs)
        self.ctx.copies.add("d2d" if on_device else direction, nbytes)
        if self.capture is not None:
            self.copy_plan.append((direction, binding, nbytes))

    def event_record(self, kernel: HostKernel, position: int | None = None) -> None:
        e = kernel.event
        self.ctx.event_counts[e] += 1           # the host numbers every record it submits
        ev, gen = self.ctx.events[e], self.ctx.event_counts[e]
        self._submit(kernel.stream, Signal(lambda: ev.record(gen)),
                     {"kind": "event_record", "event": e}, (e, gen))
        if self.capture is not None:
            self.capture.append((kernel.stream, lambda run: run.record(ev, e),
                                 {"kind": "event_record", "event": e}))

    def event_wait(self, kernel: HostKernel, position: int | None = None) -> None:
        e = kernel.event
        ev, gen = self.ctx.events[e], self.ctx.event_counts[e]   # waits for the latest record
        self._submit(kernel.stream, lambda: ev.wait(gen, lambda: self.cancelled),
                     {"kind": "event_wait", "event": e}, (e, gen))
        if self.capture is not None:
            self.capture.append((kernel.stream, lambda run: run.wait(ev, e),
                                 {"kind": "event_wait", "event": e}))

"""The host side of a dynamic run: host kernels, run in one thread or as a pipeline.

Each host kernel of the execute graph belongs to a stage: ``normal``
(InferShape, Tiling, host ops), ``memory`` (Alloc, Free) or ``launch``
(kernel launches, memcpy, event record/wait).  Pipelined, every kernel
passes through the three stage threads in order, and each stage runs the
kernels that are its own; a Free waits until the launch stage has launched
everything before it, so a block is never handed back while its last use
is still unlaunched.  (:mod:`.host_runners` runs the stages.)

Every wait of the host for the device ends at the run's deadline with a
``RunTimeoutError`` naming the stream and the task it is in (:meth:`RunState.sync`).
"""
from __future__ import annotations

import threading
import time

import numpy as np

from aircc.errors import (AirccError, KernelError, RunTimeoutError, ShapeInferenceError,
                          StreamSyncTimeoutError)
from aircc.faults import FaultKind, pick
from aircc.formats.exec_graph import Body, HostKernel
from aircc.formats.kinds import HostKernelKind
from aircc.ops import InferContext, TensorType, Trait, layout
from aircc.ops.device import DOMAIN, MEMCPY_H2D
from aircc.ops.fallback import value_type

from ..device.caching_allocator import CachingAllocator
from ..device.stream import Signal
from .control_flow import run_control
from .dynamic_plan import DeviceContext, DynamicPlan
from .host_launch import LaunchStage
from .host_values import passes_host_value
from .tiling_cache import tiling_key

#: Shortest wait for a stream to show it is idle, even past the deadline.
MIN_WAIT = 0.01


class RunState(LaunchStage):
    """Everything one run knows: types, host values, device blocks, results.  It reads
    the model's plan and the device context it runs in, and holds no reference to the
    model."""

    def __init__(self, plan: DynamicPlan, ctx: DeviceContext, generation: int,
                 allocator: CachingAllocator | None = None, capture: bool = False):
        self.plan, self.ctx = plan, ctx
        self.generation = generation
        self.pool = allocator or ctx.allocator
        self.capture: list | None = [] if capture else None
        """Recorded device tasks (stream, task(run), description), for replay."""
        self.host_results: list[tuple[int, np.ndarray]] = []
        self.types: dict[str, TensorType] = {}
        self.host: dict[str, np.ndarray] = {}
        self.blocks: dict[str, object] = {}
        self.views: dict[str, np.ndarray] = {}
        self.aliased: set[int] = set()
        """Nodes (reshapes) whose output is a view of their input's block: no launch."""
        self._shared: dict[int, list] = {}
        """id(block) -> [names holding it, streams that used any of them]."""
        self.tilings: dict[int, dict] = {}
        self.workspaces: dict[int, object] = {}
        self.results: dict[str, np.ndarray] = {}
        self.fed_on_device: frozenset[int] = frozenset()
        """Inputs (by position) fed as device tensors: their copies stay on the device."""
        self.device_outputs: frozenset[str] = frozenset()
        """Outputs to leave on the device, as device tensors."""
        self.copy_plan: list[tuple[str, int | None, int]] = []
        """(direction, binding, bytes) of each input and output copy, for replays."""
        self.error: BaseException | None = None
        self.cancelled = False
        self.interrupted = False
        self._synced = threading.Event()
        """What :meth:`sync` waits on now (a stream's signal)."""
        self.host_seconds = 0.0
        self.op_seconds: dict[str, float] = {}
        self.op_counts: dict[str, int] = {}
        self.d2h_syncs = 0
        self.launched = -1
        self._launched_cond = threading.Condition()
        self._lock = threading.Lock()
        self.timeout: float | None = None
        self.deadline = float("inf")
        """``time.monotonic()`` by which the run must be done."""
        self.faults: dict | None = None
        """Injected faults that may fire in this run, by node (``aircc.faults.for_run``)."""
        self.profiler = None
        """A :class:`~.profiling.Profiler` recording this run's host kernels and tasks."""

    def set_timeout(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.deadline = float("inf") if timeout is None else time.monotonic() + timeout

    def sync(self) -> None:
        """Wait until every stream has run what it was given, by the run's deadline
        (RunTimeoutError naming the stream and the task it is in, after that); a run
        interrupted meanwhile (:meth:`interrupt`: its device faulted, its model closed)
        stops waiting at once (StreamSyncTimeoutError: the caller sees which streams are
        stuck)."""
        for i, s in enumerate(self.ctx.streams):
            if s.retired:
                try:
                    s.synchronize(max(MIN_WAIT, self.deadline - time.monotonic()))
                except StreamSyncTimeoutError:
                    raise self.timed_out(i) from None
                continue
            done = self._synced = threading.Event()     # interrupt() sets it too
            if not self.interrupted:
                s.submit(Signal(done.set))
                done.wait(max(MIN_WAIT, self.deadline - time.monotonic()))
            if self.interrupted:
                raise StreamSyncTimeoutError(f"model '{self.plan.name}': the run was stopped")
            if not done.is_set():
                raise self.timed_out(i)

    def timed_out(self, stream: int) -> RunTimeoutError:
        """The error of this run passing its deadline while ``stream`` was busy (or another
        stream, inside a kernel, that ``stream`` waits for)."""
        streams = self.ctx.streams
        in_kernel = [i for i, s in enumerate(streams) if getattr(s.running, "node", None)]
        stream = in_kernel[0] if in_kernel else stream
        where = f"stream {stream}, {describe_task(streams[stream].running)}"
        return RunTimeoutError(f"model '{self.plan.name}': the run passed its deadline of "
                               f"{self.timeout:g} s in {where}", stream=stream, task=where)

    # ------------------------------------------------------------ helpers
    def fail(self, error: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = error
            self.cancelled = True
        for e in self.ctx.events:
            e.cancel()

    def interrupt(self, error: BaseException) -> None:
        """:meth:`fail` from another thread, and the host stops waiting for the streams."""
        self.interrupted = True
        self.fail(error)
        self._synced.set()

    def value(self, name: str) -> np.ndarray:
        """A value's data for a kernel: device view, else device weight, else host array."""
        if name in self.views:
            return self.views[name]
        if name in self.ctx.device_weights:
            return self.ctx.device_weights[name]
        return self.host[name]

    def host_value(self, name: str) -> np.ndarray | None:
        """A value's data on the host; a device value costs a wait and a device-to-host copy."""
        if name in self.host:
            return self.host[name]
        if name in self.plan.host_values:
            return self.plan.host_values[name]
        producer = self.plan.launch_position.get(name)
        if producer is None and name not in self.views:
            return None
        with self._launched_cond:
            self._launched_cond.wait_for(lambda: producer is None   # a body's, launched before
                                         or self.launched >= producer or self.cancelled)
        if self.cancelled:
            raise AirccError("run cancelled")
        self.sync()
        self.d2h_syncs += 1
        return np.array(self.views[name])

    def _context(self, k: int, host_op: bool) -> InferContext:
        node = self.plan.nodes[k]
        vi = self.plan.value_inputs[k]
        shape_only = self.plan.ops[k] is not None and self.plan.ops[k].definition.has(Trait.SHAPE_ONLY)
        values = [None if not i or shape_only
                  else self.host_value(i) if (j in vi or host_op) else None
                  for j, i in enumerate(node.inputs)]
        return InferContext([self.types.get(i) if i else None for i in node.inputs],
                            node.attrs, values, node.name, node.op, len(node.outputs))

    # ------------------------------------------------------------ host kernels
    def infer_shape(self, kernel: HostKernel, position: int | None = None) -> None:
        k = kernel.node
        node = self.plan.nodes[k]
        if node.op == MEMCPY_H2D and node.domain == DOMAIN:
            self.types[node.outputs[0]] = self.types[node.inputs[0]]
            return
        out = layout.infer(self.plan.ops[k].definition, self._context(k, False))
        for name, t in zip(node.outputs, out):
            if name:
                if not t.is_static:
                    raise ShapeInferenceError(f"node '{node.name}' ({node.op}): output '{name}' "
                                              f"has shape {t.shape} after run-time shape "
                                              f"inference")
                self.types[name] = t

    def tiling(self, kernel: HostKernel, position: int | None = None) -> None:
        k = kernel.node
        node, impl = self.plan.nodes[k], self.plan.ops[k].impl
        types = [self.types.get(i) if i else None for i in node.inputs]
        vi = self.plan.value_inputs[k]
        values = [self.host.get(i) if j in vi and i else None for j, i in enumerate(node.inputs)]
        self.tilings[k] = self.ctx.caches[k].get(
            tiling_key(types, values), lambda: impl.tile(types, node.attrs, self.plan.target))

    def host_compute(self, kernel: HostKernel, position: int | None = None) -> None:
        k = kernel.node
        node, op = self.plan.nodes[k], self.plan.ops[k]
        ctx = self._context(k, True)
        if op.definition.has(Trait.SHAPE_ONLY):
            ctx.values[0] = shape_only(self.types[node.inputs[0]])
        if not op.definition.native or op.definition.run is not None or passes_host_value(op, ctx):
            # a fallback op, an op on optionals or an Identity of a sequence: run it as is
            run = op.definition.run or (lambda ins, attrs, n: [ins[0]])
            values = run(ctx.values, node.attrs, len(node.outputs))
            empty = None if all(v is not None for v in values) else layout.infer(op.definition, ctx)
            for k, (name, value) in enumerate(zip(node.outputs, values)):
                if name:
                    self.types[name] = empty[k] if value is None else value_type(value)
                    self.host[name] = value
            return
        out_types = layout.infer(op.definition, ctx)
        outs = [np.empty(t.shape, t.dtype) for t in out_types]
        tiling = op.impl.tile(ctx.types, node.attrs, self.plan.target)
        ws = np.empty(tiling["workspace"], np.uint8) if tiling.get("workspace") else None
        op.impl.kernel(ctx.values, outs, node.attrs, tiling, ws)
        for name, t, arr in zip(node.outputs, out_types, outs):
            if name:
                self.types[name], self.host[name] = t, arr

    def _alias(self, k: int, name: str) -> bool:
        """A reshape's output as a view of its input's block (shared, counted): True if so."""
        node, op = self.plan.nodes[k], self.plan.ops[k]
        src = node.inputs[0] if node.inputs else ""
        if op is None or not op.definition.has(Trait.VIEW) or self.plan.has_control \
                or src not in self.blocks or not op.impl.native or node.outputs != [name]:
            return False
        view, t = self.views[src], self.types[name]
        if view.nbytes != t.nbytes or not view.flags.c_contiguous:
            return False
        block = self.blocks[src]
        holders = self._shared.setdefault(id(block), [set(), set()])
        holders[0].update((src, name))
        self.blocks[name] = block
        self.views[name] = view.reshape(t.shape)
        self.aliased.add(k)
        return True

    def _free_block(self, name: str, block) -> None:
        """Give ``name``'s block back, unless another name (an alias) still holds it."""
        users = self.ctx.users.get(name, ())
        holders = self._shared.get(id(block))
        if holders is not None:
            holders[0].discard(name)
            holders[1].update(users)
            if holders[0]:
                return
            del self._shared[id(block)]
            users = sorted(holders[1], key=lambda s: s.id)
        self.pool.free(block, users)

    def alloc(self, kernel: HostKernel, position: int | None = None) -> None:
        k = kernel.node
        stream = self.ctx.streams[kernel.stream]
        if self.faults is not None:
            fault = pick(self.faults, self.plan.nodes[k].name)
            if fault is not None and fault.kind is FaultKind.OOM:
                self.ctx.device.fire(fault, self.plan.nodes[k].name,
                                   sum(self.types[v].nbytes for v in kernel.values))
        for name in kernel.values:
            if self._alias(k, name):
                continue
            t = self.types[name]
            block = self.pool.malloc(t.nbytes, stream, f"'{name}'")
            self.blocks[name] = block
            self.views[name] = self.pool.view(block, t.dtype, t.shape)
        ws = self.tilings.get(k, {}).get("workspace", 0)
        if ws:
            block = self.pool.malloc(ws, stream, f"workspace of '{self.plan.nodes[k].name}'")
            self.workspaces[k] = block
            self.views[f"#ws{k}"] = self.pool.view(block, np.uint8, (ws,))

    def free(self, kernel: HostKernel, position: int | None) -> None:
        if position is not None:
            with self._launched_cond:   # the last use must have been launched first
                self._launched_cond.wait_for(lambda: self.launched >= position - 1 or self.cancelled)
        for name in kernel.values:
            block = self.blocks.pop(name, None)
            self.views.pop(name, None)
            if block is not None:
                self._free_block(name, block)

    # ------------------------------------------------------------ control flow
    def control(self, kernel: HostKernel, position: int | None = None) -> None:
        """If / Loop / Scan, run by the host: a barrier, then the bodies' kernels in order."""
        if position is not None:
            with self._launched_cond:
                self._launched_cond.wait_for(lambda: self.launched >= position - 1 or self.cancelled)
        run_control(self, kernel)

    def run_body(self, body: Body) -> None:
        for kernel in body.kernels:
            if self.cancelled:
                raise AirccError("run cancelled")
            self.execute(None, kernel)
        if self.error is not None:
            raise self.error

    # ------------------------------------------------------------ bookkeeping
    def execute(self, position: int | None, kernel: HostKernel) -> None:
        t = time.perf_counter()
        try:
            HOST_KERNELS[kernel.kind](self, kernel, position)
        except AirccError:
            raise
        except Exception as e:            # a host kernel's own failure: name the node and op
            raise self._named(kernel, e) from e
        dt = time.perf_counter() - t
        if self.profiler is not None:
            node = self.plan.nodes[kernel.node] if kernel.node is not None else None
            self.profiler.host_span(f"{kernel.kind.value} {node.name if node else ''}".strip(),
                                    "host", t, t + dt, op=node.op if node else None)
        if kernel.kind is HostKernelKind.CONTROL:
            return      # its bodies' kernels account for themselves
        self.host_seconds += dt
        if kernel.node is not None:
            op = self.plan.nodes[kernel.node].op
            self.op_seconds[op] = self.op_seconds.get(op, 0.0) + dt
            if kernel.kind in COUNTED:
                self.op_counts[op] = self.op_counts.get(op, 0) + 1

    def _named(self, kernel: HostKernel, e: Exception) -> AirccError:
        """``e``, raised by ``kernel`` itself, as an aircc error naming its node and op:
        ShapeInferenceError from InferShape, else KernelError."""
        node = self.plan.nodes[kernel.node] if kernel.node is not None else None
        name, op = (node.name, node.op) if node is not None else (kernel.kind.value, "-")
        if kernel.kind is HostKernelKind.INFER_SHAPE:
            return ShapeInferenceError(f"node '{name}' ({op}): run-time shape inference failed: "
                                       f"{type(e).__name__}: {e}")
        return KernelError(name, op, e)

    def mark_launched(self, position: int) -> None:
        with self._launched_cond:
            self.launched = position
            self._launched_cond.notify_all()

    def release(self) -> None:
        """Give back every block still held (after an error, or outputs after the run)."""
        for name, block in list(self.blocks.items()):
            self._free_block(name, block)
        for block in self.workspaces.values():
            self.pool.free(block)
        self.blocks.clear()
        self.workspaces.clear()
        self.views.clear()


K = HostKernelKind
#: What runs each kind of host kernel (``RunState`` methods taking the kernel and its position).
HOST_KERNELS = {K.INFER_SHAPE: RunState.infer_shape, K.TILING: RunState.tiling,
                K.HOST_COMPUTE: RunState.host_compute, K.CONTROL: RunState.control,
                K.ALLOC: RunState.alloc, K.FREE: RunState.free, K.LAUNCH: RunState.launch,
                K.MEMCPY_H2D: RunState.memcpy_h2d, K.MEMCPY_D2H: RunState.memcpy_d2h,
                K.EVENT_RECORD: RunState.event_record, K.EVENT_WAIT: RunState.event_wait}
assert set(HOST_KERNELS) == set(HostKernelKind), "every host-kernel kind has a runner"
#: Kinds that count once per op execution in the host-time statistics.
COUNTED = frozenset({K.INFER_SHAPE, K.HOST_COMPUTE, K.MEMCPY_D2H})


def shape_only(t: TensorType) -> np.ndarray:
    base = np.zeros(1, dtype=t.dtype)
    return np.lib.stride_tricks.as_strided(base, shape=t.shape, strides=(0,) * len(t.shape),
                                           writeable=False)


def describe_task(task) -> str:
    """What a stream's running task is, for a timeout's message."""
    if task is None:
        return "no task (idle)"
    node = getattr(task, "node", None)
    return (f"the kernel of node '{node.name}' (op {node.op})" if node is not None
            else "a copy or event task")

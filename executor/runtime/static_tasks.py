"""Binding a static model's tasks to device memory: each task kind by its binder, each
operand to a numpy view of its own model's region, each kernel to its operands once.

A task touches only its own model's regions (every operand is checked against the
region's size here, as the reader checked it against the plan), and a kernel task's
operands must be what its op's shape rule makes of them; a task that cannot be bound
is a ModelFormatError naming the section, the task and the node.
"""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import numpy as np

from aircc.errors import AirccError, ModelFormatError
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.prepared import PreparedConstants
from aircc.formats.kinds import Region, TaskKind
from aircc.formats.tasks import CopyTask, EventTask, JumpTask, KernelTask, Operand, Task
from aircc.ops import InferContext, KernelBackend, TensorType, layout
from aircc.ops.device import DOMAIN as DEVICE_DOMAIN, TYPED_BY_LOWERING

from .resolved import resolve_op

if TYPE_CHECKING:
    from .static_model import StaticModelPlan


class TaskBinder:
    """Binds tasks to one placement of a model's regions (``bases``: device offsets,
    ``sizes``: bytes, by region)."""

    def __init__(self, plan: StaticModelPlan, device: VirtualDevice, backend: KernelBackend,
                 events: list, prepared: PreparedConstants, bases: dict[Region, int],
                 sizes: dict[Region, int], cube=None):
        self.device, self.backend, self.name = device, backend, plan.name
        self.events, self.prepared = events, prepared
        self.cube = cube
        """The matrix engine its kernels take turns on (None: the device's)."""
        self.bases, self.sizes = bases, sizes
        self._weights = sorted({(w.offset, w.name) for p in plan.plans
                                for w in p.memory_plan.weights if w.name in plan.weights})
        """(offset, name) of every weight in the weights region, by offset."""
        self._host_weights = plan.weights
        self._binders = {TaskKind.KERNEL: self._bind_kernel,
                         TaskKind.MEMCPY_H2D: self._bind_h2d, TaskKind.MEMCPY_D2H: self._bind_d2h,
                         TaskKind.EVENT_RECORD: self._bind_record,
                         TaskKind.EVENT_WAIT: self._bind_wait, TaskKind.LABEL: self._bind_label,
                         TaskKind.GOTO: self._bind_goto, TaskKind.SWITCH: self._bind_switch}

    def _view(self, operand: Operand | None) -> np.ndarray | None:
        if operand is None:
            return None
        self._check_inside(operand.region, operand.offset, operand.nbytes)
        return self.device.memory.view(self.bases[operand.region] + operand.offset,
                                       operand.dtype, operand.shape)

    def _check_inside(self, region: Region, offset: int, nbytes: int) -> None:
        """A task may touch only its own model's regions (checked once, when it is bound)."""
        size = self.sizes[region]
        if offset < 0 or offset + nbytes > size:
            raise ModelFormatError(f"model '{self.name}': a task's operand at bytes [{offset}, "
                                   f"{offset + nbytes}) of the {region.value} lies outside the "
                                   f"model's {region.value} ({size} bytes)")

    def bind_list(self, tasks: list[Task], tiling: list[dict], where: str) -> list:
        """Each task of one stream bound to its operands; a task that cannot be (operands
        its op does not accept, say) is a ModelFormatError naming it."""
        labels = {t.label: k for k, t in enumerate(tasks) if t.kind is TaskKind.LABEL}
        bound = []
        for i, t in enumerate(tasks):
            node = f" (node '{t.node}', op {t.op})" if isinstance(t, KernelTask) else ""
            try:
                bound.append((self._binders[t.kind](t, tiling, labels), _description(t)))
            except OperandError as e:
                raise ModelFormatError(f"model '{self.name}': {where}[{i}]{node}: {e}") from None
            except (AirccError, MemoryError):
                raise
            except Exception as e:
                raise ModelFormatError(f"model '{self.name}': {where}[{i}]{node} cannot be bound "
                                       f"to its operands: {type(e).__name__}: {e}") from e
        return bound

    def _check_operands(self, task: KernelTask, op) -> None:
        """The task's outputs are what its op's shape rule makes of its inputs (a file whose
        operands disagree with their op is refused before any kernel sees them)."""
        if task.domain == DEVICE_DOMAIN and task.op in TYPED_BY_LOWERING:
            return
        values = []
        for j, o in enumerate(task.inputs):
            if j in op.definition.value_inputs and o is not None:
                if o.region is not Region.WEIGHTS:
                    return                   # decided at run time: the rule cannot be checked
                values.append(self._constant(o))
            else:
                values.append(None)
        types = [None if o is None else TensorType(o.dtype, tuple(o.shape)) for o in task.inputs]
        try:
            out = layout.infer(op.definition, InferContext(types, task.attrs, values, task.node,
                                                           task.op, len(task.outputs)))
        except AirccError as e:
            raise OperandError(f"its operands do not fit the op: {e.message}") from None
        for k, (o, t) in enumerate(zip(task.outputs, out)):
            if o is None or t is None or not t.is_static:
                continue
            if (o.dtype, tuple(o.shape)) != (t.dtype, tuple(t.shape)):
                raise OperandError(f"outputs[{k}] is {o.dtype}{list(o.shape)}, but the op makes "
                                   f"{t.dtype}{list(t.shape)} of its inputs")

    def _constant(self, operand: Operand) -> np.ndarray:
        """A weights operand's value as the file has it (device memory may have lost its
        contents: a rebind after a device loss must not read them), else as the device
        has it (an operand that lies in no single weight)."""
        view = self._view(operand)
        k = bisect.bisect_right(self._weights, (operand.offset, "\uffff")) - 1
        if k >= 0:
            start, name = self._weights[k]
            raw = np.ascontiguousarray(self._host_weights[name]).reshape(-1).view(np.uint8)
            lo = operand.offset - start
            if lo + view.nbytes <= raw.nbytes:
                return raw[lo:lo + view.nbytes].view(view.dtype).reshape(view.shape)
        return view

    def _bind_kernel(self, task: KernelTask, tiling: list[dict], labels: dict):
        op = resolve_op(self.backend, task.op, task.version, task.domain, task.node, task.impl,
                        task.attrs)
        self._check_operands(task, op)
        ins = [self._view(o) for o in task.inputs]
        outs = [self._view(o) for o in task.outputs]
        ws = None
        if task.workspace:
            self._check_inside(task.workspace.region, task.workspace.offset, task.workspace.size)
            base = self.bases[task.workspace.region] + task.workspace.offset
            ws = self.device.memory.data[base:base + task.workspace.size]
        constant = [o is not None and o.region is Region.WEIGHTS for o in task.inputs]
        call = self.device.engine_call(op.impl, op.engine, ins, outs, task.attrs,
                                       tiling[task.tiling], ws, constant, self.prepared,
                                       self.cube)
        call.outputs = outs               # what an injected ``corrupt`` fault perturbs
        return call

    def _bind_h2d(self, task: CopyTask, tiling: list[dict], labels: dict):
        dst, b = self._view(task.operand), task.binding
        return lambda run: np.copyto(dst, run.feeds[b])

    def _bind_d2h(self, task: CopyTask, tiling: list[dict], labels: dict):
        src, b = self._view(task.operand), task.binding

        def d2h(run):          # the copy makes the host's result array ...
            into = run.results[b]
            if into is None:
                run.results[b] = src.copy()
            else:              # ... or fills the device tensor the run was given for it
                np.copyto(into, src)
        return d2h

    def _bind_record(self, task: EventTask, tiling: list[dict], labels: dict):
        e = task.event
        ev = self.events[e]
        return lambda run: run.record(ev, e)

    def _bind_wait(self, task: EventTask, tiling: list[dict], labels: dict):
        e = task.event
        ev = self.events[e]
        return lambda run: run.wait(ev, e)

    @staticmethod
    def _bind_label(task: JumpTask, tiling: list[dict], labels: dict):
        return lambda run: None

    @staticmethod
    def _bind_goto(task: JumpTask, tiling: list[dict], labels: dict):
        target = labels[task.label]
        return lambda run: target

    def _bind_switch(self, task: JumpTask, tiling: list[dict], labels: dict):
        """Stream switch: fall through when the condition is true, else jump."""
        cond, target = self._view(task.cond), labels[task.label]
        return lambda run: None if cond.reshape(-1)[0] else target


class OperandError(ValueError):
    """A task's operands disagree with its op (raised while binding, reported with the task)."""


def _description(task: Task) -> dict:
    """What an error inside a task names (the node and op of a kernel, else the task
    kind), and what a profile shows of it (shapes and bytes; an event's id)."""
    if isinstance(task, KernelTask):
        ins = [o for o in task.inputs if o is not None]
        outs = [o for o in task.outputs if o is not None]
        return {"kind": task.kind.value, "node": task.node, "op": task.op,
                "shapes": [list(o.shape) for o in ins], "out_shapes": [list(o.shape) for o in outs],
                "bytes": sum(o.nbytes for o in ins + outs)}
    if isinstance(task, EventTask):
        return {"kind": task.kind.value, "event": task.event}
    return {"kind": task.kind.value}

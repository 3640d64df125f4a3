"""The device's own ops: a dialect in the ``aircc`` domain.

The compiler inserts these while it schedules and lowers a model; no ONNX model
contains them.  Two kinds:

- **device tasks** (trait ``DEVICE_TASK``): synchronisation, copies and jumps,
  each lowered to a task kind of its own and run by the device, not by a kernel:
  ``EventRecord`` / ``EventWait`` (Signal / Wait between streams), ``MemcpyH2D`` /
  ``MemcpyD2H`` (a feed in, a result out), ``Label``, ``Goto`` and ``StreamSwitch``
  (the stream walkers' jumps of statically lowered control flow);
- **control kernels**: the loop and branch state of statically lowered If, Loop
  and Scan (``LoopInit`` ... ``ScanUpdate``), run as kernels on device memory.

All of them are typed by the pass that creates them (the IR verifier checks
those types); every one that writes state other than its outputs has the
``SIDE_EFFECT`` trait, so dead-code elimination keeps it.
"""
from __future__ import annotations

from .registry import InferContext, define
from .traits import Trait
from .types import TensorType

DOMAIN = "aircc"
VERSION = 1

EVENT_RECORD, EVENT_WAIT = "EventRecord", "EventWait"
MEMCPY_H2D, MEMCPY_D2H = "MemcpyH2D", "MemcpyD2H"
LABEL, GOTO, STREAM_SWITCH = "Label", "Goto", "StreamSwitch"

SYNC_OPS = (EVENT_RECORD, EVENT_WAIT)
COPY_OPS = (MEMCPY_H2D, MEMCPY_D2H)
JUMP_OPS = (LABEL, GOTO, STREAM_SWITCH)

_TASK = {Trait.DEVICE_TASK, Trait.SIDE_EFFECT}


def _typed_by_lowering(ctx: InferContext) -> list[TensorType]:
    ctx.fail("device ops are typed by the pass that creates them")


for _op in (EVENT_RECORD, EVENT_WAIT, LABEL, GOTO, STREAM_SWITCH, MEMCPY_D2H):
    define(_op, VERSION, DOMAIN, traits=_TASK, foldable=False)(_typed_by_lowering)


@define(MEMCPY_H2D, VERSION, DOMAIN, traits=_TASK, foldable=False)
def memcpy_h2d(ctx: InferContext) -> list[TensorType]:
    """A host value copied to the device: the same type."""
    return [ctx.input_type(0)]


#: Control kernels of static control flow: (op, writes state besides its outputs).
CONTROL_KERNELS = (("LoopInit", False), ("LoopCheck", False), ("LoopUpdate", True),
                   ("LoopFinish", False), ("IfInit", False), ("BranchOut", True),
                   ("ScanInit", False), ("ScanSlice", True), ("ScanUpdate", True))

for _op, _writes_state in CONTROL_KERNELS:
    define(_op, VERSION, DOMAIN, traits={Trait.SIDE_EFFECT} if _writes_state else (),
           foldable=False)(_typed_by_lowering)

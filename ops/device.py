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

_TASK = {Trait.DEVICE_TASK, Trait.SIDE_EFFECT, Trait.INTERNAL}


def _typed_by_lowering(ctx: InferContext) -> list[TensorType]:
    ctx.fail("device ops are typed by the pass that creates them")


TASK_DOCS = {
    EVENT_RECORD: "Signal: mark an event done once the stream's earlier tasks are.",
    EVENT_WAIT: "Wait: hold the stream until an event is recorded.",
    LABEL: "A place in a stream's task list that jumps go to.",
    GOTO: "Jump to a label of the same stream.",
    STREAM_SWITCH: "Fall through when a device boolean is true, else jump to a label.",
    MEMCPY_D2H: "Copy a result out of device memory into an output binding.",
}
for _op, _doc in TASK_DOCS.items():
    define(_op, VERSION, DOMAIN, traits=_TASK, foldable=False, doc=_doc)(_typed_by_lowering)


@define(MEMCPY_H2D, VERSION, DOMAIN, traits=_TASK, foldable=False)
def memcpy_h2d(ctx: InferContext) -> list[TensorType]:
    """A host value copied to the device: the same type."""
    return [ctx.input_type(0)]


#: Control kernels of static control flow: (op, writes state besides its outputs, what it does).
CONTROL_KERNELS = (
    ("LoopInit", False, "A Loop's iteration, condition, trip count and carried values, set."),
    ("LoopCheck", False, "Whether a Loop runs again: its condition, and the iteration below the trip count."),
    ("LoopUpdate", True, "The carried values and condition from the body's results; the iteration + 1."),
    ("LoopFinish", False, "A Loop's (or Scan's) results from its carried values."),
    ("IfInit", False, "Defines an If's results, which the branch taken fills."),
    ("BranchOut", True, "The results of the branch taken, copied into the If's results."),
    ("BranchFail", True, "A branch that cannot run with the shapes compiled for: the run fails, "
                         "saying why (``message``)."),
    ("ScanInit", False, "A Scan's iteration, length, states and output buffers, set."),
    ("ScanSlice", True, "Slice t of every scan input, for the body."),
    ("ScanUpdate", True, "The body's scan values into slice t of the outputs; the states; t + 1."),
)

#: Ops of this dialect with no shape rule of their own (their types come from the pass that
#: inserts them, so a loaded task's operands cannot be checked against a rule).
TYPED_BY_LOWERING = frozenset([*TASK_DOCS, *(op for op, _, _ in CONTROL_KERNELS)])

for _op, _writes_state, _doc in CONTROL_KERNELS:
    define(_op, VERSION, DOMAIN, traits={Trait.SIDE_EFFECT, Trait.INTERNAL} if _writes_state
           else {Trait.INTERNAL}, foldable=False, doc=_doc)(_typed_by_lowering)

"""If, Loop and Scan: ops with bodies.

Their bodies are regions of the IR, so their outputs are typed through them by
the compiler (``compiler/passes/control_flow.py``), and they run as control
tasks on the device (static mode) or as host kernels (dynamic mode).  The
definitions make them known ops, with their opset versions and traits.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.traits import Trait


def _typed_through_bodies(ctx: InferContext):
    ctx.fail("control-flow shapes are inferred through the op's bodies by the compiler")


for _name, _since, _doc in (
        ("If", 1, "Run the then or else branch, by a boolean condition."),
        ("Loop", 1, "Run the body while a condition holds, up to a trip count; carried values and scan outputs."),
        ("Scan", 8, "Run the body over slices of the scan inputs (batch semantics, sequence lengths)."),
        ("Scan", 9, "Run the body over slices of the scan inputs; carried states and stacked outputs.")):
    define(_name, _since, traits={Trait.CONTROL_FLOW}, foldable=False, doc=_doc)(_typed_through_bodies)

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


for _name, _since in (("If", 1), ("Loop", 1), ("Scan", 8), ("Scan", 9)):
    define(_name, _since, traits={Trait.CONTROL_FLOW}, foldable=False)(_typed_through_bodies)

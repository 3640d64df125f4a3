"""If, Loop and Scan in the op registry.

Their bodies are regions of the IR, so their shape rules live with the
compiler (``compiler/passes/control_flow.py``) and their execution with the
runtimes: device-side control tasks in static mode, host kernels in dynamic
mode.  The entries here make them known ops, with their opset versions.
"""
from __future__ import annotations

from aircc.executor.kernels.registry import op


def _infer(ctx):
    ctx.fail("control-flow shapes are inferred through the op's bodies by the compiler")


for _name, _since in (("If", 1), ("Loop", 1), ("Scan", 8), ("Scan", 9)):
    _cls = op(_name, since=_since, foldable=False)(
        type(f"{_name}{_since}", (), {"infer": staticmethod(_infer)}))
    _cls.spec.extra["control_flow"] = True

"""The reference a verification compares with: onnxruntime where it is installed (its CPU
provider, basic graph optimizations only, so that the reference is not itself an
optimizer's output), else onnx's ``ReferenceEvaluator``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx

ONNXRUNTIME = "onnxruntime"
EVALUATOR = "onnx-reference-evaluator"


@dataclass(frozen=True)
class Reference:
    """A way to run an ONNX model: ``kind`` (:data:`ONNXRUNTIME` or :data:`EVALUATOR`)
    and a line saying which (versions, provider, why a fallback)."""

    kind: str
    description: str

    def run(self, model: onnx.ModelProto, feeds: dict[str, Any]) -> dict[str, Any]:
        """Every output of ``model`` on ``feeds``, by name (outputs need no declared type)."""
        if self.kind == ONNXRUNTIME:
            return _run_onnxruntime(model, feeds)
        return _run_evaluator(model, feeds)


def choose_reference(model: onnx.ModelProto) -> Reference:
    """onnxruntime if it imports and takes ``model``, else the ReferenceEvaluator (the
    description says why)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return Reference(EVALUATOR, f"onnx {onnx.__version__} ReferenceEvaluator "
                                    f"(onnxruntime is not installed)")
    try:
        _session(model)
    except Exception as e:  # onnxruntime's errors share no base class of its own
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return Reference(EVALUATOR, f"onnx {onnx.__version__} ReferenceEvaluator "
                                    f"(onnxruntime {ort.__version__} cannot run the model: "
                                    f"{first[:200]})")
    return Reference(ONNXRUNTIME, f"onnxruntime {ort.__version__} (CPUExecutionProvider, "
                                  f"ORT_ENABLE_BASIC)")


def _session(model: onnx.ModelProto):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, Any]) -> dict[str, Any]:
    session = _session(model)
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    return dict(zip(names, session.run(names, {k: v for k, v in feeds.items() if k in wanted})))


def _run_evaluator(model: onnx.ModelProto, feeds: dict[str, Any]) -> dict[str, Any]:
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(model)
    values = evaluator.run(None, dict(feeds))
    return dict(zip(evaluator.output_names, values))

"""Verification: a model compiled by aircc against a reference (onnxruntime, else onnx's
ReferenceEvaluator), output by output and mode by mode, and on a mismatch the first node
that diverges (``aircc.verify``, ``aircc verify``).

- :mod:`.inputs`: the inputs a verification runs on, given or generated;
- :mod:`.reference`: which reference runs;
- :mod:`.compare`: one value against the reference's (tolerances, NaN/inf, dtype, shape);
- :mod:`.kernels`: the ONNX graph in order, the compiled kernels mapped back to it;
- :mod:`.bisect`: the first diverging node;
- :mod:`.report`: the result as values, JSON and text;
- :mod:`.check`: :func:`verify`, the whole of it.
"""
from __future__ import annotations

from .check import verify
from .compare import Tolerance, ValueCheck
from .report import Bisection, Culprit, ModeResult, VerifyReport, format_report

__all__ = ["verify", "Tolerance", "ValueCheck", "Bisection", "Culprit", "ModeResult",
           "VerifyReport", "format_report"]

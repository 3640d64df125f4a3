"""What the kernels of onnxruntime's contrib ops share: the type they compute in."""
from __future__ import annotations

import numpy as np


def compute_dtype(x: np.ndarray) -> type:
    """The type a contrib kernel computes in for inputs of ``x``'s type: float64 for
    float64, float32 for the rest (float16 widened, the result rounded once)."""
    return np.float64 if x.dtype == np.float64 else np.float32

"""Where the tests' models come from: the onnx package's light models and aircc's samples."""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_MODELS = sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT_DIR)
                      if f.endswith(".onnx"))
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples")

if SAMPLES not in sys.path:
    sys.path.insert(0, SAMPLES)   # the sample builders (bert_encoder, build_samples)


def light_path(name: str) -> str:
    return os.path.join(LIGHT_DIR, f"light_{name}.onnx")


def random_feeds(inputs: list, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in inputs}


def numpy_target() -> str:
    """The compile target of the numpy backend at this machine's vector class: for tests of
    what that backend does itself (its Winograd mode, its weight layouts, its tilings)."""
    from aircc.ops import kernel_backend

    return f"cpu-{kernel_backend('numpy').host_vector_class()}"

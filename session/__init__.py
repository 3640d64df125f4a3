"""An onnxruntime-compatible session over aircc: ``aircc.InferenceSession``.

Code written for onnxruntime switches by its import (``import aircc as ort``): the
session compiles an .onnx on first use (cached on disk, :mod:`.compile_cache`) or loads
an .om, and runs it on the virtual device (:mod:`.session`); its options
(:mod:`.options`) and IO binding to pre-allocated arrays (:mod:`.io_binding`) are
onnxruntime's.
"""
from .io_binding import IOBinding, OrtValue  # noqa: F401
from .options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions  # noqa: F401
from .session import (InferenceSession, ModelMetadata, NodeArg,  # noqa: F401
                      get_available_providers, get_device)

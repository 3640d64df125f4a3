"""TRANSITION: the old helpers module, re-exporting from where its helpers now live
(:mod:`aircc.ops.shapes`, :mod:`.scratch`, :mod:`.phases`, :mod:`.epilogue`)."""
from aircc.ops.shapes import *  # noqa: F401,F403
from aircc.ops.shapes import Dim, Shape  # noqa: F401
from aircc.ops.types import TensorType, onnx_to_np, types_of  # noqa: F401

from .epilogue import *  # noqa: F401,F403
from .epilogue import RELU_ZEROS_MIN, EXPANDED_MAX  # noqa: F401
from .phases import *  # noqa: F401,F403
from .scratch import *  # noqa: F401,F403
from .scratch import BLOCK_BYTES, WS_ALIGN  # noqa: F401


def ensure_tiling(spec_cls, tiling: dict, ins, attrs) -> dict:  # noqa: F811
    """Old-style: the class's ``tiling(types, attrs)`` computed when none was passed."""
    if tiling:
        return tiling
    return spec_cls.tiling(types_of(ins), attrs)

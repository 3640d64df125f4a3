"""Kernels of the shape-only ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity,
Dropout, Cast, CastLike, Shape, Size (their shape rules: :mod:`aircc.ops.defs.shape_ops`)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from aircc.ops.defs.shape_ops import shape_range
from aircc.ops.shapes import axis_plain

from .numpy_backend import NUMPY


def _copy_reshaped(ins, outs, attrs, tiling, ws) -> None:
    """Kernel of every pure reshape: the data, in order, into the output's shape (nothing
    to do when the memory plan put the output on the input's bytes: ``in_place``)."""
    if attrs.get("in_place"):
        return
    np.copyto(outs[0], ins[0].reshape(outs[0].shape))


@NUMPY.kernel("Reshape", 1)
class Reshape1:
    kernel = staticmethod(_copy_reshaped)


@NUMPY.kernel("Reshape", 5)
class Reshape5:
    kernel = staticmethod(_copy_reshaped)


@NUMPY.kernel("Flatten", 1)
class Flatten:
    kernel = staticmethod(_copy_reshaped)


@NUMPY.kernel("Squeeze", 1)
class Squeeze1:
    kernel = staticmethod(_copy_reshaped)


@NUMPY.kernel("Squeeze", 13)
class Squeeze13:
    kernel = staticmethod(_copy_reshaped)


@NUMPY.kernel("Unsqueeze", 1)
class Unsqueeze1:
    kernel = staticmethod(_copy_reshaped)


@NUMPY.kernel("Unsqueeze", 13)
class Unsqueeze13:
    kernel = staticmethod(_copy_reshaped)


# ---------------------------------------------------------------- Transpose
@NUMPY.kernel("Transpose", 1)
class Transpose:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        perm = attrs.get("perm")
        x = ins[0]
        np.copyto(outs[0], x.T if perm is None else x.transpose(
            [axis_plain(p, x.ndim) for p in perm]))


# ------------------------------------------------------- Identity / Dropout
def _copy(ins, outs, attrs, tiling, ws) -> None:
    np.copyto(outs[0], ins[0])


@NUMPY.kernel("Identity", 1)
class Identity:
    kernel = staticmethod(_copy)


def _dropout_kernel(ins, outs, attrs, tiling, ws) -> None:
    """Inference: copy, mask all ones; training_mode (since 12) drops at random."""
    x, y = ins[0], outs[0]
    mask = outs[1] if len(outs) > 1 else None
    training = len(ins) > 2 and ins[2] is not None and bool(np.asarray(ins[2]).reshape(-1)[0])
    ratio = float(np.asarray(ins[1]).reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None \
        else float(attrs.get("ratio", 0.5))
    if not training or ratio == 0.0:
        np.copyto(y, x)
        if mask is not None:
            mask[...] = 1
        return
    rng = np.random.default_rng(attrs.get("seed"))
    keep = rng.random(x.shape) >= ratio
    np.multiply(x, keep, out=y, casting="unsafe")
    np.multiply(y, y.dtype.type(1.0 / (1.0 - ratio)), out=y)
    if mask is not None:
        np.copyto(mask, keep, casting="unsafe")


@NUMPY.kernel("Dropout", 7)
class Dropout7:
    kernel = staticmethod(_dropout_kernel)


@NUMPY.kernel("Dropout", 10)
class Dropout10:
    kernel = staticmethod(_dropout_kernel)


@NUMPY.kernel("Dropout", 12)
class Dropout12:
    kernel = staticmethod(_dropout_kernel)


# ------------------------------------------------------------------- Cast
#: float8 types a Cast with ``saturate`` (default 1) clamps to their largest finite value.
_SATURATING = {"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"}


def _cast(ins, outs, attrs, tiling, ws) -> None:
    """numpy's cast, which ml_dtypes makes round-to-nearest-even for its narrow types
    (bfloat16, float8, float4, int4, int2); as onnx's reference: with ``saturate`` a float8
    result is clamped to +-max first (NaN stays NaN), float8_e8m0fnu rounds as ``round_mode``."""
    x, y = ins[0], outs[0]
    with np.errstate(invalid="ignore", over="ignore"):
        if y.dtype.name in _SATURATING and attrs.get("saturate", 1):
            big = float(ml_dtypes.finfo(y.dtype).max)
            x = np.clip(x.astype(np.float32) if x.dtype.kind != "f" or x.dtype.itemsize < 2
                        else x, -big, big)
        elif y.dtype.name == "float8_e8m0fnu":
            from onnx.numpy_helper import to_float8e8m0   # onnx's rounding of the exponent

            mode = attrs.get("round_mode", "up")
            x = to_float8e8m0(x, bool(attrs.get("saturate", 1)),
                              mode.decode() if isinstance(mode, bytes) else mode)
        np.copyto(y, x, casting="unsafe")


def _bound_cast(ins, outs, attrs, tiling, ws, constant, prepared=None):
    """A cast that cannot overflow or be invalid (from bool or an integer to a numpy float,
    or to a wider one) bound as one copy: no error-state switch around it."""
    x, y = ins[0], outs[0]
    if not (y.dtype.name in ("float16", "float32", "float64")      # not to an ml_dtypes type
            and (x.dtype.kind in "biu" or (x.dtype.kind == "f"
                                           and y.dtype.itemsize >= x.dtype.itemsize))):
        return None
    return lambda copyto=np.copyto: copyto(y, x, casting="unsafe")


@NUMPY.kernel("Cast", 1)
class Cast:
    kernel = staticmethod(_cast)
    prepare = staticmethod(_bound_cast)


@NUMPY.kernel("CastLike", 15)
class CastLike:
    kernel = staticmethod(_cast)


# ------------------------------------------------------------- Shape / Size
@NUMPY.kernel("Shape", 1)
class Shape:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        s, e = shape_range(attrs, ins[0].ndim)
        outs[0][...] = ins[0].shape[s:e] if e > s else ()


@NUMPY.kernel("Size", 1)
class Size:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        outs[0][...] = ins[0].size

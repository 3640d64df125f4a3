"""Kernels of the generators: Constant, ConstantOfShape, Range (their shape rules:
:mod:`aircc.ops.defs.constant`)."""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.constant import constant_value, fill_value

from .numpy_backend import NUMPY


@NUMPY.kernel("Constant", 1)
class Constant:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        np.copyto(outs[0], constant_value(attrs), casting="unsafe")


@NUMPY.kernel("ConstantOfShape", 9)
class ConstantOfShape:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        outs[0].fill(fill_value(attrs)[0])


@NUMPY.kernel("Range", 11)
class Range:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        y = outs[0]
        start, delta = ins[0].reshape(-1)[0], ins[2].reshape(-1)[0]
        if y.dtype.kind in "iu":
            np.copyto(y, np.arange(y.shape[0], dtype=np.int64) * int(delta) + int(start),
                      casting="unsafe")
        else:
            np.copyto(y, np.arange(y.shape[0], dtype=np.float64) * float(delta) + float(start),
                      casting="unsafe")

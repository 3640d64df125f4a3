"""InstanceNormalization on channels-last activations, so that a U-Net's normalisations
stay inside its convolution region (oneDNN has no instance-norm primitive; numpy's
kernel runs channels-first, and would cost two reorders per node).

Per (sample, channel): the mean and variance over the spatial positions, then scale and
bias, computed on the ``(N, H*W, C)`` view: each pass reads rows of contiguous channels.
"""
from __future__ import annotations

import numpy as np

from aircc.ops.layout import is_channels_last

from . import DNNL
from .common import numpy_twin


@DNNL.kernel("InstanceNormalization", 6, channels_last=True)
class InstanceNormalization:
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        if not is_channels_last(attrs):
            twin = numpy_twin("InstanceNormalization", 6)
            twin.kernel(ins, outs, attrs, tiling, ws)
            return
        x, scale, bias = ins[:3]
        y = outs[0]
        n, c = x.shape[0], x.shape[-1]
        x3 = x.reshape(n, -1, c)
        y3 = y.reshape(n, -1, c)
        mean = x3.mean(axis=1, keepdims=True, dtype=np.float64 if x.dtype != np.float32 else None)
        np.subtract(x3, mean.astype(x.dtype), out=y3)
        var = np.einsum("nlc,nlc->nc", y3, y3) / y3.shape[1]
        factor = (scale / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))).astype(x.dtype)
        np.multiply(y3, factor[:, None, :], out=y3)
        np.add(y3, bias.astype(x.dtype), out=y3)

"""InstanceNormalization as oneDNN batch normalisation, one sample at a time.

oneDNN has no instance-norm primitive, but an instance norm of one sample is a batch
norm of a batch of one with its own statistics (mean and variance per channel over the
spatial positions, the variance divided by their count, as ONNX's): so each sample is
one ``batch_norm`` call with ``global_stats`` off, on its slice of X and Y, with the
scale and bias per channel and a following Relu (``fused_relu``, from ``fuse-epilogues``)
in the same pass (``fuse_norm_relu``, which takes NaN to 0: where an operand could make
one, the norm without it, then numpy's Relu: :func:`.nan.norm_relu`).  Channels-last (a U-Net's normalisations stay
inside its convolution region) or channels-first alike.
"""
from __future__ import annotations

from aircc.executor.kernels.dnnl.attr import Attr
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.ops import batch_norm
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.ops import TensorType
from aircc.ops.layout import is_channels_last

from . import DNNL
from .common import NotForDnnl, act, bind, cached_pd, dnnl_or_twin, then, type_md
from .nan import norm_relu


@DNNL.kernel("InstanceNormalization", 6, channels_last=True)
@dnnl_or_twin("InstanceNormalization", 6)
class InstanceNormalization:
    FUSED = ("fused_relu",)

    @staticmethod
    def plan(types: list, attrs: dict, keep_nan: bool = False) -> PrimitiveDesc:
        x = types[0]
        if any(t is None or t.dtype != "float32" for t in types[:3]):
            raise NotForDnnl("not float32")
        sample = TensorType(x.dtype, (1, *x.shape[1:]))
        cl = is_channels_last(attrs)
        relu = bool(attrs.get("fused_relu")) and not keep_nan

        def make():
            return batch_norm(type_md(sample, cl), type_md(sample, cl),
                              epsilon=float(attrs.get("epsilon", 1e-5)), global_stats=False,
                              relu=relu, attr=Attr((), scratchpad="user"))
        key = ("instance_norm", tuple(sample.shape), cl, float(attrs.get("epsilon", 1e-5)), relu)
        return cached_pd(key, make, 8.0 * x.numel)

    @staticmethod
    def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
        x, scale, bias = ins[:3]
        y = outs[0]
        cl = is_channels_last(attrs)

        def bound(pd):
            return then(*(bind(pd, {Arg.src: act(x[i:i + 1], cl), Arg.scale: scale,
                                    Arg.shift: bias, Arg.dst: act(y[i:i + 1], cl)}, ws)
                          for i in range(x.shape[0])))
        return norm_relu(InstanceNormalization, bound, pd, ins, attrs, outs, 3)

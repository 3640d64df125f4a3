"""Resize on oneDNN's resampling, channels-last or channels-first.

oneDNN maps an output coordinate to the input by half-pixel centres and the scale
``output size / input size`` of each spatial dim.  That is ONNX's Resize exactly when

- ``mode`` is ``linear`` with ``coordinate_transformation_mode`` ``half_pixel`` (or
  ``pytorch_half_pixel``, the same where no output dim is 1), or ``nearest`` on a whole
  upscale (every output dim a whole multiple of its input's), where the nearest source
  of half-pixel centres and of ONNX's ``asymmetric`` / ``floor`` are the same pixel;
- the batch and channel dims keep their size, there is no ``roi`` crop, no antialias,
  no ``exclude_outside`` or ``axes`` (the opset-18 attributes);
- the scales the node gives (when it gives scales, not sizes) are each output size over
  its input size: a Resize whose output size was rounded (5 * 1.5 -> 7) maps by its own
  scale and is left to numpy, checked when the kernel is bound (the scales are values).

Anything else runs on the numpy kernel.
"""
from __future__ import annotations

import numpy as np

from aircc.executor.kernels.dnnl.attr import Attr
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.library import DnnlError
from aircc.executor.kernels.dnnl.ops import resampling
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.ops import TensorType
from aircc.ops.layout import is_channels_last, to_first

from . import DNNL
from .common import NotForDnnl, act, bind, cached_pd, twin_prepare, twin_tiling, type_md

#: The (mode, coordinate transformation, nearest mode) uses oneDNN computes as ONNX does.
LINEAR = {"half_pixel", "pytorch_half_pixel"}
NEAREST = {("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
           ("half_pixel", "round_prefer_ceil"), ("pytorch_half_pixel", "round_prefer_floor")}


def _text(attrs: dict, key: str, default: str) -> str:
    value = attrs.get(key, default)
    return value.decode() if isinstance(value, bytes) else str(value)


def _algorithm(attrs: dict, x: tuple, y: tuple) -> str:
    mode = _text(attrs, "mode", "nearest")
    ctm = _text(attrs, "coordinate_transformation_mode", "half_pixel")
    if attrs.get("antialias") or attrs.get("exclude_outside") or attrs.get("axes") is not None:
        raise NotForDnnl("antialias, exclude_outside or axes")
    if x[:2] != y[:2]:
        raise NotForDnnl("a resize of the batch or channel dim")
    if mode == "linear" and ctm in LINEAR and (ctm == "half_pixel" or min(y[2:]) > 1):
        return "linear"
    if mode == "nearest" and (ctm, _text(attrs, "nearest_mode", "round_prefer_floor")) in NEAREST \
            and all(o % i == 0 for i, o in zip(x[2:], y[2:])):
        return "nearest"
    raise NotForDnnl(f"mode {mode} with {ctm} coordinates")


def _plan(types: list, attrs: dict, y_shape: tuple) -> PrimitiveDesc:
    x = types[0]
    if x.dtype != "float32" or len(x.shape) not in (4, 5):
        raise NotForDnnl(f"{x.dtype} data of rank {len(x.shape)}")
    cl = is_channels_last(attrs)
    xs = to_first(tuple(x.shape)) if cl else tuple(x.shape)
    alg = _algorithm(attrs, xs, y_shape)
    out = TensorType(x.dtype, (y_shape[0], *y_shape[2:], y_shape[1]) if cl else y_shape)

    def make():
        return resampling(type_md(x, cl), type_md(out, cl), alg, attr=Attr((), scratchpad="user"))
    key = ("resize", tuple(x.shape), y_shape, cl, alg)
    return cached_pd(key, make, 8.0 * float(np.prod(y_shape)))


def _scales_match(scales, x: tuple, y: tuple) -> bool:
    """The node's scales (None or empty when it gives sizes) are y / x in every dim."""
    if scales is None or np.size(scales) == 0:
        return True
    return all(float(s) * i == o for s, i, o in zip(np.asarray(scales).reshape(-1), x, y))


@DNNL.kernel("Resize", 11, channels_last=True)
class Resize:
    """Opset 11 on: X, roi, scales, sizes.  The output's shape follows from values (the
    scales or sizes), which the tiling does not see: oneDNN or numpy is chosen when the
    kernel is bound to its operands, and the tiling holds numpy's workspace for the
    case it is numpy."""

    @staticmethod
    def tiling(types: list, attrs: dict, target) -> dict:
        twin = twin_tiling("Resize", 11, "", types, attrs, target, "")
        return {**{k: v for k, v in twin.items() if k != "why"}, "backend": "dnnl",
                "impl": "resampling (else numpy, chosen when bound)"}

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        x, y = ins[0], outs[0]
        cl = is_channels_last(attrs)
        y_shape = to_first(tuple(y.shape)) if cl else tuple(y.shape)
        x_shape = to_first(tuple(x.shape)) if cl else tuple(x.shape)
        roi = ins[1] if len(ins) > 1 else None
        scales = ins[2] if len(ins) > 2 else None
        try:
            if roi is not None and np.size(roi) and _text(attrs, "coordinate_transformation_mode",
                                                          "half_pixel") == "tf_crop_and_resize":
                raise NotForDnnl("a crop")
            if not _scales_match(scales, x_shape, y_shape):
                raise NotForDnnl("scales that are not output over input sizes")
            pd = _plan([TensorType.of(x)], attrs, y_shape)
            return bind(pd, {Arg.src: act(x, cl), Arg.dst: act(y, cl)}, None)
        except (NotForDnnl, DnnlError):
            return twin_prepare("Resize", 11, "", ins, outs, attrs, {"backend": "dnnl"}, ws,
                                constant, prepared)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        Resize.prepare(ins, outs, attrs, tiling, ws, [False] * len(ins))()

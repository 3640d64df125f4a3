"""Kernels of onnxruntime's product contrib ops (:mod:`aircc.ops.defs.contrib_matmul`):
FusedMatMul, FusedGemm, GemmFastGelu, FusedConv and NhwcConv, on the numpy backend's
MatMul, Gemm and Conv kernels."""
from __future__ import annotations

import numpy as np

from aircc.ops.defs.contrib_common import MS_DOMAIN
from aircc.ops.defs.contrib_matmul import activation_defaults, fused_matmul_perms
from aircc.ops.targets import Target
from aircc.ops.types import TensorType

from .conv import Conv
from .gelu import gelu
from .gemm import Gemm
from .numpy_backend import NUMPY


def activate(y: np.ndarray, op: str, params) -> None:
    """y = op(y) in place, one of FusedConv's / FusedGemm's activations."""
    one = y.dtype.type(1)
    with np.errstate(over="ignore"):
        if op == "Relu":
            np.maximum(y, 0, out=y)
        elif op == "Tanh":
            np.tanh(y, out=y)
        elif op == "Sigmoid":
            np.negative(y, out=y)
            np.exp(y, out=y)
            np.add(y, one, out=y)
            np.reciprocal(y, out=y)
        elif op == "LeakyRelu":
            np.multiply(y, np.where(y < 0, y.dtype.type(params[0]), one), out=y)
        elif op == "Clip":
            np.clip(y, params[0], params[1], out=y)
        elif op == "HardSigmoid":
            np.multiply(y, y.dtype.type(params[0]), out=y)
            np.add(y, y.dtype.type(params[1]), out=y)
            np.clip(y, 0, 1, out=y)


def conv_attrs(attrs: dict, with_z: bool) -> dict:
    """A FusedConv's attributes as its Conv's (Z as a fused residual)."""
    out = {k: v for k, v in attrs.items() if k not in ("activation", "activation_params")}
    if with_z:
        out["fused_add"] = 1
    return out


@NUMPY.kernel("FusedMatMul", 1, MS_DOMAIN)
class FusedMatMul:
    """alpha * matmul of the operands read through their transpositions."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        a, b = ins[0], ins[1]
        pa, pb = fused_matmul_perms(attrs, (a.ndim, b.ndim))
        y = outs[0]
        np.matmul(a if pa is None else a.transpose(pa), b if pb is None else b.transpose(pb), out=y)
        alpha = float(attrs.get("alpha", 1.0))
        if alpha != 1.0:
            np.multiply(y, y.dtype.type(alpha), out=y)


@NUMPY.kernel("FusedGemm", 1, MS_DOMAIN)
class FusedGemm:
    """Gemm, then its activation."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        Gemm.kernel(ins, outs, attrs, {}, None)
        op = attrs.get("activation", "")
        defaults = activation_defaults(op)
        params = [attrs.get(k, d) for k, d in zip(("activation_alpha", "activation_beta"), defaults)]
        activate(outs[0], op, params)


@NUMPY.kernel("GemmFastGelu", 1, MS_DOMAIN)
class GemmFastGelu:
    """FastGelu(X @ W + bias)."""

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        t = np.matmul(ins[0], ins[1])
        if len(ins) > 2 and ins[2] is not None:
            t += ins[2]
        gelu(t, outs[0], {"approximate": "tanh"})


@NUMPY.kernel("FusedConv", 1, MS_DOMAIN)
class FusedConv:
    """Conv with Z added, then the activation."""

    @staticmethod
    def tiling(types: list, attrs: dict, target: Target) -> dict:
        z = len(types) > 3 and types[3] is not None
        return Conv.tiling(list(types[:3]) + ([types[3]] if z else []), conv_attrs(attrs, z), target)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        z = len(ins) > 3 and ins[3] is not None
        conv_ins = [ins[0], ins[1], ins[2] if len(ins) > 2 else None] + ([ins[3]] if z else [])
        Conv.kernel(conv_ins, outs, conv_attrs(attrs, z), tiling, ws)
        op = attrs.get("activation", "")
        activate(outs[0], op, list(attrs.get("activation_params") or activation_defaults(op)))


def _first(t: TensorType) -> TensorType:
    """An NHWC (or [M, kH, kW, C]) type as NCHW (or [M, C, kH, kW])."""
    return TensorType(t.dtype, (t.shape[0], t.shape[-1], *t.shape[1:-1]))


@NUMPY.kernel("NhwcConv", 1, MS_DOMAIN)
class NhwcConv:
    """Conv of channels-last X and W, through channels-first copies."""

    @staticmethod
    def tiling(types: list, attrs: dict, target: Target) -> dict:
        if not all(t.is_static for t in types if t is not None):
            return {}
        return Conv.tiling([_first(types[0]), _first(types[1])] + list(types[2:3]), attrs, target)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        last = ins[0].ndim - 1
        x = np.ascontiguousarray(np.moveaxis(ins[0], last, 1))
        w = np.ascontiguousarray(np.moveaxis(ins[1], last, 1))
        y = outs[0]
        first = np.empty((y.shape[0], y.shape[-1], *y.shape[1:-1]), y.dtype)
        Conv.kernel([x, w] + list(ins[2:3]), [first], attrs, tiling, ws)
        np.copyto(y, np.moveaxis(first, 1, last))

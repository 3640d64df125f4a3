"""DynamicQuantizeLSTM (``com.microsoft``): an LSTM layer with 8-bit weights whose float
operands are quantized on the fly, as onnxruntime computes it.

Per direction, the whole input sequence is quantized to uint8 once (one scale and zero
point over its range) and multiplied by W in one exact product; at each step the
previous hidden state is quantized over the batch's range and multiplied by R.  Each
product is scaled back to float32 by the operands' scales (per tensor or per gate
column) and the gates run in float32: ``i, o, f, c`` with optional peepholes, ``clip``,
``input_forget`` and the ``activations`` LSTM allows.  A reverse direction runs over
the reversed sequence and writes its outputs back in time order.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from aircc.ops.defs.quant_linear import MS_DOMAIN
from aircc.ops.defs.rnn import DIRECTIONS, Activation, activations

from .numpy_backend import NUMPY
from .quant_arith import int_matmul, quantize_float32
from .quant_gemm import Operand, b_operand
from .quant_linear import dynamic_params

f32 = np.float32


def activation(a: Activation) -> Callable[[np.ndarray], np.ndarray]:
    """The float32 function of one of LSTM's activations."""
    al, be = f32(a.alpha), f32(a.beta)
    return {"sigmoid": lambda v: (1.0 / (1.0 + np.exp(-v.astype(np.float64)))).astype(f32),
            "tanh": np.tanh, "relu": lambda v: np.maximum(v, f32(0)),
            "softsign": lambda v: v / (1 + np.abs(v)),
            "softplus": lambda v: np.logaddexp(v, f32(0)),
            "leakyrelu": lambda v: np.where(v >= 0, v, al * v),
            "thresholdedrelu": lambda v: np.where(v > al, v, f32(0)),
            "elu": lambda v: np.where(v >= 0, v, al * np.expm1(v)),
            "hardsigmoid": lambda v: np.clip(al * v + be, f32(0), f32(1)),
            "affine": lambda v: al * v + be, "scaledtanh": lambda v: al * np.tanh(be * v),
            }[a.name]


def quantized_product(a: np.ndarray, weights: Operand, w_scale: np.ndarray) -> np.ndarray:
    """float32 ``a`` (rows) quantized over its range to uint8, times the shifted weights,
    scaled back: ``float32(acc) * (a_scale * w_scale)``."""
    scale, zp = dynamic_params(a)
    q = np.empty(a.shape, np.uint8)
    quantize_float32(a, scale, zp, q)
    acc = int_matmul(q, zp, *weights)
    return np.multiply(acc.astype(f32), f32(scale) * w_scale)


def _direction_params(p: np.ndarray, d: int) -> np.ndarray:
    """Direction ``d``'s scale or zero point: one value, or one per gate column."""
    return p[d] if p.ndim == 2 else p[d:d + 1]


class _Direction:
    """One direction of the layer, its weights bound (shifted once when constant)."""

    def __init__(self, ins: list, d: int, attrs: dict, acts: tuple, constant: list,
                 prepared):
        _, w, r, b, _, h0, c0, p, w_scale, w_zp, r_scale, r_zp = ins
        self.w = b_operand(w[d], _direction_params(w_zp, d), constant[1] and constant[9],
                           prepared)
        self.r = b_operand(r[d], _direction_params(r_zp, d), constant[2] and constant[11],
                           prepared)
        self.w_scale = _direction_params(w_scale, d).astype(f32)
        self.r_scale = _direction_params(r_scale, d).astype(f32)
        hidden = r.shape[1]
        self.bias = None if b is None else (b[d, :4 * hidden] + b[d, 4 * hidden:]).astype(f32)
        self.peep = None if p is None else p[d].reshape(3, hidden).astype(f32)
        self.h0, self.c0, self.d, self.hidden = h0, c0, d, hidden
        self.f, self.g, self.h = (activation(a) for a in acts)
        self.clip = attrs.get("clip")
        self.input_forget = bool(attrs.get("input_forget", 0))

    def run(self, x: np.ndarray, reverse: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Y [seq, batch, H] in time order, last H, last C) for input ``x``."""
        seq, batch, _ = x.shape
        hid = self.hidden
        x = x[::-1] if reverse else x
        proj = quantized_product(np.ascontiguousarray(x).reshape(seq * batch, -1), self.w,
                                 self.w_scale).reshape(seq, batch, 4 * hid)
        h = np.zeros((batch, hid), f32) if self.h0 is None else self.h0[self.d].astype(f32)
        c = np.zeros((batch, hid), f32) if self.c0 is None else self.c0[self.d].astype(f32)
        ys = np.empty((seq, batch, hid), f32)
        for t in range(seq):
            gates = proj[t] + quantized_product(h, self.r, self.r_scale)
            if self.bias is not None:
                gates += self.bias
            i, o, f, cc = (gates[:, k * hid:(k + 1) * hid] for k in range(4))
            if self.peep is not None:
                i = i + self.peep[0] * c
                f = f + self.peep[2] * c
            i = self.f(self._clip(i))
            f = 1 - i if self.input_forget else self.f(self._clip(f))
            c = f * c + i * self.g(self._clip(cc))
            if self.peep is not None:
                o = o + self.peep[1] * c
            h = (self.f(self._clip(o)) * self.h(c)).astype(f32)
            c = c.astype(f32)
            ys[t] = h
        return (ys[::-1] if reverse else ys), h, c

    def _clip(self, v: np.ndarray) -> np.ndarray:
        if self.clip is None:
            return v
        return np.clip(v, f32(-self.clip), f32(self.clip))


def _bind(ins, attrs, constant, prepared):
    ins = list(ins) + [None] * (12 - len(ins))
    constant = list(constant) + [False] * (12 - len(constant))
    direction = attrs.get("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    acts = activations("LSTM", {**attrs, "direction": direction}, DIRECTIONS[direction])
    dirs = [_Direction(ins, d, attrs, acts[d], constant, prepared)
            for d in range(DIRECTIONS[direction])]
    reverse = [direction == "reverse", True][:len(dirs)]
    return ins[0], dirs, reverse


def run_layer(x: np.ndarray, dirs: list, reverse: list, outs: list) -> None:
    y, y_h, y_c = (list(outs) + [None] * 3)[:3]
    for d, (layer, rev) in enumerate(zip(dirs, reverse)):
        ys, h, c = layer.run(x, rev)
        if y is not None:
            y[:, d] = ys
        if y_h is not None:
            y_h[d] = h
        if y_c is not None:
            y_c[d] = c


@NUMPY.kernel("DynamicQuantizeLSTM", 1, MS_DOMAIN)
class DynamicQuantizeLSTM:
    """One LSTM layer with 8-bit W and R, the float inputs quantized per sequence and step."""

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        weights = (1, 2, 3, 7, 8, 9, 10, 11)      # what a direction reads when it is bound
        if not all(constant[i] for i in weights if i < len(ins) and ins[i] is not None):
            return None
        x, dirs, reverse = _bind(ins, attrs, constant, prepared)
        return lambda: run_layer(x, dirs, reverse, outs)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        x, dirs, reverse = _bind(ins, attrs, [False] * len(ins), None)
        run_layer(x, dirs, reverse, outs)

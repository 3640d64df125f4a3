"""onnxruntime's DynamicQuantizeLSTM (``com.microsoft``): an LSTM layer whose weights are
8-bit, its float inputs quantized on the fly.

W is [directions, input, 4 * hidden] and R [directions, hidden, 4 * hidden] (transposed
against LSTM's), gates i, o, f, c; their scales and zero points per direction ([D]) or
per gate column ([D, 4 * hidden]).  As onnxruntime computes it: the input sequence is
quantized to uint8 once per direction over its whole range, each step's hidden state
over the batch's range, each product is exact and scaled back to float32, the gates run
in float32.  ``sequence_lens`` is not supported (the quantizer writes none).
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, define
from aircc.ops.shapes import is_int
from aircc.ops.types import TensorType

from .quant_gemm import int8_operand
from .quant_linear import MS_DOMAIN
from .rnn import DIRECTIONS, activations


def _shape(ctx: InferContext, i: int, what: str, expected: tuple) -> None:
    if not ctx.has_input(i):
        return
    s = ctx.input_shape(i)
    if len(s) != len(expected) or any(is_int(a) and is_int(b) and a != b
                                      for a, b in zip(s, expected)):
        ctx.fail(f"{what} has shape {list(s)}, expected {list(expected)}")


@define("DynamicQuantizeLSTM", 1, MS_DOMAIN, engine="cube")
def dynamic_quantize_lstm(ctx: InferContext) -> list[TensorType]:
    """One LSTM layer with 8-bit W [D, input, 4H] and R [D, H, 4H], the float inputs
    quantized per sequence and per step: Y, Y_h, Y_c."""
    x = ctx.input_type(0)
    xs = ctx.input_shape(0)
    if x.dtype != "float32" or len(xs) != 3:
        ctx.fail(f"X must be a float32 tensor of rank 3, got {x.dtype} {list(xs)}")
    direction = ctx.attrs.get("direction", "forward")
    if isinstance(direction, bytes):
        direction = direction.decode()
    if direction not in DIRECTIONS:
        ctx.fail(f"direction must be forward, reverse or bidirectional, got {direction!r}")
    nd = DIRECTIONS[direction]
    hidden = ctx.attrs.get("hidden_size")
    if not is_int(hidden) or hidden <= 0:
        ctx.fail(f"hidden_size must be a positive int, got {hidden!r}")
    if ctx.has_input(4):
        ctx.unsupported("sequence_lens")
    wt, rt = int8_operand(ctx, 1, "W"), int8_operand(ctx, 2, "R")
    _shape(ctx, 1, "W", (nd, xs[2], 4 * hidden))
    _shape(ctx, 2, "R", (nd, hidden, 4 * hidden))
    _shape(ctx, 3, "B", (nd, 8 * hidden))
    for i, what in ((5, "initial_h"), (6, "initial_c")):
        _shape(ctx, i, what, (nd, xs[1], hidden))
    _shape(ctx, 7, "P", (nd, 3 * hidden))
    for i, what, dtype in ((8, "W_scale", "float32"), (9, "W_zero_point", wt),
                           (10, "R_scale", "float32"), (11, "R_zero_point", rt)):
        t = ctx.input_type(i)
        if t.dtype != dtype:
            ctx.fail(f"{what} must be {dtype}, got {t.dtype}")
        if t.shape is not None and t.shape not in ((nd,), (nd, 4 * hidden)):
            ctx.fail(f"{what} has shape {list(t.shape)}, expected [{nd}] or [{nd}, {4 * hidden}]")
    try:
        activations("LSTM", {**ctx.attrs, "direction": direction}, nd)
    except ValueError as e:
        ctx.fail(str(e))
    state = (nd, xs[1], hidden)
    out = [TensorType("float32", (xs[0], nd, xs[1], hidden)), TensorType("float32", state),
           TensorType("float32", state)]
    return out[:ctx.num_outputs]

"""Recurrent layers: LSTM, GRU and RNN (one layer, forward, reverse or bidirectional).

Inputs ``X, W, R[, B, sequence_lens, initial_h(, initial_c, P)]``; outputs ``Y`` (every
step's hidden state), ``Y_h`` (the last one) and, for LSTM, ``Y_c`` (the last cell
state), each optional.  ``layout`` (opset 14) 1 puts the batch first in X, Y, Y_h, Y_c
and the initial states.  Opsets 1-6 compute what 7 does (their ``output_sequence`` is
not read: the node's outputs decide what is written); 22 only adds bfloat16, which is
left to the fallback.

:func:`activations` is the one reading of ``activations`` / ``activation_alpha`` /
``activation_beta`` the shape rules check and the kernels run.
"""
from __future__ import annotations

from typing import NamedTuple

from aircc.ops.registry import InferContext, ShapeRule, define
from aircc.ops.shapes import is_int
from aircc.ops.types import TensorType

#: Per op: the gates stacked in W and R, its default activations (per direction), outputs.
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"),
                       "RNN": ("Tanh",)}
MAX_OUTPUTS = {"LSTM": 3, "GRU": 2, "RNN": 2}
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
FLOAT_TYPES = ("float16", "float32", "float64")

#: The activation functions ONNX lists, by lower-case name: (alpha default, beta default);
#: None: the function takes no such value, ``...``: it takes one and has no default.
ACTIVATION_PARAMS = {
    "sigmoid": (None, None), "tanh": (None, None), "relu": (None, None),
    "softsign": (None, None), "softplus": (None, None),
    "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None), "elu": (1.0, None),
    "hardsigmoid": (0.2, 0.5), "affine": (..., ...), "scaledtanh": (..., ...),
}


class Activation(NamedTuple):
    """One activation function of one direction, with its alpha and beta."""

    name: str
    """Lower-case ONNX name, e.g. ``sigmoid``."""
    alpha: float = 0.0
    beta: float = 0.0


def activations(op: str, attrs: dict, num_directions: int) -> list[tuple[Activation, ...]]:
    """Per direction, the op's activation functions (LSTM: f, g, h; GRU: f, g; RNN: f).

    ``activation_alpha`` / ``activation_beta`` are consumed in the order of the functions
    that take them; a function left without one gets its ONNX operator's default.  Raises
    ValueError naming what is wrong."""
    per = len(DEFAULT_ACTIVATIONS[op])
    names = list(attrs.get("activations") or DEFAULT_ACTIVATIONS[op])
    if len(names) >= per * num_directions:
        names = names[:per * num_directions]
    elif len(names) == per:
        names = names * num_directions
    else:
        raise ValueError(f"activations {names} must name {per} function(s) per direction "
                         f"({per * num_directions} for {num_directions} direction(s))")
    alphas = iter(float(a) for a in attrs.get("activation_alpha") or ())
    betas = iter(float(b) for b in attrs.get("activation_beta") or ())
    made = []
    for name in names:
        key = str(name).lower()
        if key not in ACTIVATION_PARAMS:
            raise ValueError(f"activation {name!r} is not one ONNX defines for {op} (it lists "
                             "Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                             "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)")
        values = []
        for default, given in zip(ACTIVATION_PARAMS[key], (alphas, betas)):
            value = 0.0 if default is None else next(given, default)
            if value is ...:
                raise ValueError(f"activation {name} needs activation_alpha and "
                                 "activation_beta values")
            values.append(value)
        made.append(Activation(key, *values))
    return [tuple(made[d * per:(d + 1) * per]) for d in range(num_directions)]


def _check_shape(ctx: InferContext, i: int, what: str, expected: tuple) -> None:
    if not ctx.has_input(i):
        return
    shape = ctx.input_shape(i)
    if len(shape) != len(expected) or any(
            is_int(a) and is_int(b) and a != b for a, b in zip(shape, expected)):
        ctx.fail(f"{what} has shape {shape}, expected {expected}")


def _rnn_rule(op: str, with_layout: bool) -> ShapeRule:
    gates = GATES[op]

    def infer(ctx: InferContext) -> list[TensorType]:
        xt = ctx.input_type(0)
        xs = ctx.input_shape(0)
        if xt.dtype not in FLOAT_TYPES:
            ctx.unsupported(f"X of type {xt.dtype} (the kernels compute in float16, float32 "
                            "and float64)")
        if len(xs) != 3:
            ctx.fail(f"X must have rank 3, got {xs}")
        for i in (1, 2, 3, 5, 6, 7):
            if ctx.has_input(i) and ctx.input_type(i).dtype != xt.dtype:
                ctx.fail(f"input {i} is {ctx.input_type(i).dtype}, X is {xt.dtype}")
        if ctx.has_input(4) and ctx.input_type(4).dtype != "int32":
            ctx.fail(f"sequence_lens must be int32, got {ctx.input_type(4).dtype}")
        if ctx.num_inputs > (8 if op == "LSTM" else 6):
            ctx.fail(f"{op} has at most {8 if op == 'LSTM' else 6} inputs")
        if ctx.num_outputs > MAX_OUTPUTS[op]:
            ctx.fail(f"{op} has at most {MAX_OUTPUTS[op]} outputs")
        layout = int(ctx.attrs.get("layout", 0)) if with_layout else 0
        if layout not in (0, 1):
            ctx.fail(f"layout must be 0 or 1, got {layout}")
        direction = ctx.attrs.get("direction", "forward")
        if direction not in DIRECTIONS:
            ctx.fail(f"direction must be forward, reverse or bidirectional, got {direction!r}")
        nd = DIRECTIONS[direction]
        ws, rs = ctx.input_shape(1), ctx.input_shape(2)
        if len(ws) != 3 or len(rs) != 3:
            ctx.fail(f"W {ws} and R {rs} must have rank 3")
        hidden = ctx.attrs.get("hidden_size", rs[2])
        if not is_int(hidden) or hidden <= 0:
            ctx.fail(f"hidden_size must be a positive int, got {hidden!r}")
        seq, batch = (xs[1], xs[0]) if layout else (xs[0], xs[1])
        _check_shape(ctx, 1, "W", (nd, gates * hidden, xs[2]))
        _check_shape(ctx, 2, "R", (nd, gates * hidden, hidden))
        _check_shape(ctx, 3, "B", (nd, 2 * gates * hidden))
        _check_shape(ctx, 4, "sequence_lens", (batch,))
        state = (batch, nd, hidden) if layout else (nd, batch, hidden)
        _check_shape(ctx, 5, "initial_h", state)
        if op == "LSTM":
            _check_shape(ctx, 6, "initial_c", state)
            _check_shape(ctx, 7, "P", (nd, 3 * hidden))
            if int(ctx.attrs.get("input_forget", 0)) not in (0, 1):
                ctx.fail("input_forget must be 0 or 1")
        if op == "GRU" and int(ctx.attrs.get("linear_before_reset", 0)) not in (0, 1):
            ctx.fail("linear_before_reset must be 0 or 1")
        if "clip" in ctx.attrs and not float(ctx.attrs["clip"]) > 0:
            ctx.fail(f"clip must be positive, got {ctx.attrs['clip']}")
        try:
            activations(op, ctx.attrs, nd)
        except ValueError as e:
            ctx.fail(str(e))
        y = (batch, seq, nd, hidden) if layout else (seq, nd, batch, hidden)
        out = [TensorType(xt.dtype, y)] + [TensorType(xt.dtype, state)] * 2
        return out[:ctx.num_outputs]

    return infer


_DOCS = {
    "LSTM": "One LSTM layer (gates i, o, f, c; peepholes P, input_forget, clip, activations "
            "f, g, h): Y, Y_h, Y_c.",
    "GRU": "One GRU layer (gates z, r, h; linear_before_reset, clip, activations f, g): Y, Y_h.",
    "RNN": "One simple RNN layer, H = f(X W^T + H R^T + Wb + Rb) (clip, activation f): Y, Y_h.",
}

for _op in GATES:
    for _since in (1, 7, 14):
        _rule = _rnn_rule(_op, with_layout=_since >= 14)
        _rule.__doc__ = _DOCS[_op] + (" ``layout`` 1: batch first." if _since >= 14 else "")
        define(_op, _since, engine="cube")(_rule)

"""LSTM, GRU and RNN on oneDNN's recurrent primitives (forward inference): one primitive
runs a node's whole layer, every step and both directions.

ONNX and oneDNN lay a layer out differently; the kernel bridges them so:

- **gates**: ONNX stacks LSTM's gates i, o, f, c, oneDNN wants i, f, c~, o
  (:data:`GATE_ORDER`); GRU's z, r, h are oneDNN's u, r, o, in the same order.  ONNX's
  GRU with ``linear_before_reset`` 1 (what PyTorch exports) is oneDNN's ``lbr_gru``, with
  0 its ``vanilla_gru`` (both apply the reset gate where ONNX does);
- **weights**: ONNX's W / R ``[dirs, gates * hidden, in]`` become oneDNN's ``ldigo``
  ``(1, dirs, in, gates, hidden)`` (gates reordered, transposed, by numpy), then are
  reordered into the layout the implementation wants (packed for inference), once, when
  the task is bound: kept in device memory with the model (``prepared_array``).
  Weights that are not constants are packed again before each run;
- **bias**: ONNX's Wb and Rb go in summed (``lbr_gru``: ``[Wb + Rb`` of z and r, ``Wb_h,
  Rb_h]``, four rows); oneDNN 3.2 refuses a layer without a bias, so no B is zeros;
- **layout** 1 (batch first): X and Y are oneDNN's ``ntc``, the states ``[batch, dirs,
  hidden]`` are described by strides; a bidirectional layer writes Y ``(seq, batch,
  2 * hidden)`` (forward then reverse), which for layout 1 is ONNX's Y
  ``[batch, seq, 2, hidden]`` itself and for layout 0 (``[seq, 2, batch, hidden]``) is
  written to the workspace and reordered into Y;
- **absent operands**: which outputs a node has is not known when its tiling is made, so
  the primitive always writes Y and the last states, an absent one into the workspace;
  an absent initial state is zeros in the workspace (oneDNN's LSTM without initial
  states does not write the last cell state).

Left to the numpy kernel (its *twin*, which the tiling names with the reason): other than
float32, ``clip``, ``input_forget``, activations other than the defaults (an RNN's may be
Tanh, Sigmoid, Relu or LeakyRelu, the same in both directions), shapes known only at run
time.  ``sequence_lens`` is read at every run: when every length is ``seq_length`` the
primitive runs, else the numpy kernel, bound beside it on the same operands.

The hooks are this module's own, not :func:`~.common.dnnl_or_twin`'s: oneDNN names its
GRU implementation ``ref`` (the GEMM-based one: packed sgemm and JIT cells, about 3x the
numpy kernel, not its slow reference code), and the lengths choose per run.  The team is
sized from the layer's flops as elsewhere (:func:`~.common.cached_pd`); note that a layer
meets an OpenMP barrier at every step, so a neighbour taking a core costs it more than
it costs a one-region primitive.
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

import numpy as np

from aircc.executor.device.prepared import prepared_array
from aircc.executor.kernels.dnnl import ops
from aircc.executor.kernels.dnnl.attr import Attr
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.ops import RnnArg
from aircc.executor.kernels.dnnl.library import DnnlError, DnnlUnimplemented, using_threads
from aircc.executor.kernels.dnnl.memory import Memory, MemoryDesc
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.formats.alignment import align_up
from aircc.ops import TensorType
from aircc.ops.defs.rnn import DEFAULT_ACTIVATIONS, DIRECTIONS, GATES, activations

from . import DNNL
from .common import NotForDnnl, bind, cached_pd, storage, twin_prepare, twin_tiling

F32 = np.dtype(np.float32)
#: Per op, for each of oneDNN's gates in its order, the ONNX gate it is.
GATE_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (0, 1, 2), "RNN": (0,)}
#: LSTM peepholes: oneDNN's i, f, o of ONNX's P (i, o, f).
PEEPHOLE_ORDER = (0, 2, 1)
#: An RNN's activation (ONNX's lower-case name) -> oneDNN's vanilla cell's, and its
#: negative slope from the ONNX alpha.
RNN_ACTIVATIONS = {"tanh": ("tanh", False), "sigmoid": ("logistic", False),
                   "relu": ("relu", False), "leakyrelu": ("relu", True)}
#: The opsets the numpy kernels are registered at (every one computes the same).
SINCE = (1, 7, 14)
ALIGN = 64


def _pad(items, n: int) -> list:
    return list(items) + [None] * (n - len(items))


class _Plan:
    """One node's primitive descriptor (from its input types and attributes) and where its
    buffers lie in the workspace: oneDNN's scratchpad, then Y, the last states and the
    zero initial states the node's own outputs and inputs may not provide."""

    def __init__(self, op: str, types: list, attrs: dict):
        x, w, r, b, lens, h0, c0, p = _pad(types, 8)
        if any(t is not None and not t.is_static for t in types):
            raise NotForDnnl("shapes known only at run time")
        other = sorted({t.dtype for t in (x, w, r, b, h0, c0, p) if t is not None} - {"float32"})
        if other:
            raise NotForDnnl(f"{', '.join(other)} operands (the oneDNN kernel is float32 only)")
        fused = sorted(k for k in attrs if k.startswith("fused_"))
        if fused:
            raise NotForDnnl(f"fused {', '.join(fused)}")
        if "clip" in attrs:
            raise NotForDnnl("clip (oneDNN's cells do not clip)")
        if int(attrs.get("input_forget", 0)):
            raise NotForDnnl("input_forget (oneDNN's LSTM has no coupled input and forget)")
        self.op, self.direction = op, attrs.get("direction", "forward")
        self.layout = int(attrs.get("layout", 0))
        self.lbr = op == "GRU" and bool(int(attrs.get("linear_before_reset", 0)))
        d = DIRECTIONS[self.direction]
        self.activation = self._activation(op, activations(op, attrs, d))
        seq, batch = (x.shape[1], x.shape[0]) if self.layout else (x.shape[0], x.shape[1])
        t, n, c, h, g = int(seq), int(batch), int(x.shape[2]), int(r.shape[2]), GATES[op]
        if min(t, n, c, h) == 0:
            raise NotForDnnl("an empty sequence, batch or hidden state")
        self.dims = (t, n, c, h, d)
        self.has_lens, self.has_peepholes = lens is not None, op == "LSTM" and p is not None
        if self.layout:         # X [N, T, C], Y [N, T, D, H], states [N, D, H]
            src = MemoryDesc.from_strides((t, n, c), F32, (c, t * c, 1))
            dst = MemoryDesc.from_strides((t, n, d * h), F32, (d * h, t * d * h, 1))
            state = MemoryDesc.from_strides((1, d, n, h), F32, (d * n * h, h, d * h, 1))
        else:                   # X [T, N, C], Y [T, D, N, H] (for D 2: the workspace's)
            src = MemoryDesc.from_tag((t, n, c), F32, "abc")                  # tnc
            dst = MemoryDesc.from_tag((t, n, d * h), F32, "abc")
            state = MemoryDesc.from_tag((1, d, n, h), F32, "abcd")            # ldnc
        self.state_md = state

        def make() -> PrimitiveDesc:
            wl = MemoryDesc.from_tag((1, d, c, g, h), F32, "any")
            wi = MemoryDesc.from_tag((1, d, h, g, h), F32, "any")
            bias = MemoryDesc.from_tag((1, d, g + self.lbr, h), F32, "abcd")  # ldgo
            attr = Attr((), scratchpad="user")
            if op == "LSTM":
                peep = (MemoryDesc.from_tag((1, d, 3, h), F32, "abcd") if self.has_peepholes
                        else None)
                return ops.lstm(src, state, state, wl, wi, bias, dst, state, state,
                                direction=self.direction, weights_peephole=peep, attr=attr)
            if op == "GRU":
                return ops.gru(src, state, wl, wi, bias, dst, state, direction=self.direction,
                               linear_before_reset=self.lbr, attr=attr)
            alg, alpha = self.activation
            return ops.vanilla_rnn(src, state, wl, wi, bias, dst, state, activation=alg,
                                   alpha=alpha, direction=self.direction, attr=attr)

        shapes = tuple(None if v is None else tuple(v.shape) for v in types)
        key = ("rnn", op, shapes, repr(sorted(attrs.items())))
        self.pd = cached_pd(key, make, 2.0 * t * n * d * g * h * (c + h))
        state_bytes = d * n * h * F32.itemsize
        sizes = {"scratchpad": self.pd.scratchpad_size, "y": t * n * d * h * F32.itemsize,
                 "y_h": state_bytes, "y_c": state_bytes if op == "LSTM" else 0,
                 "h0": state_bytes if h0 is None else 0,
                 "c0": state_bytes if op == "LSTM" and c0 is None else 0}
        self.offsets, end = {}, 0
        for name, size in sizes.items():
            self.offsets[name] = (end, size)
            end += align_up(size)
        self.workspace = end

    @staticmethod
    def _activation(op: str, acts: list) -> tuple:
        """(oneDNN algorithm, alpha) of an RNN's activation; for LSTM and GRU, which oneDNN
        computes with their default ones only, a check that they are."""
        names = [[a.name for a in per] for per in acts]
        if op != "RNN":
            default = [name.lower() for name in DEFAULT_ACTIVATIONS[op]]
            if any(per != default for per in names):
                raise NotForDnnl(f"activations {names} (oneDNN's {op} has {default} only)")
            return ("", 0.0)
        if len(set(acts)) != 1 or acts[0][0].name not in RNN_ACTIVATIONS:
            raise NotForDnnl(f"activations {names} (oneDNN's RNN takes one of "
                             f"{', '.join(RNN_ACTIVATIONS)} for every direction)")
        alg, sloped = RNN_ACTIVATIONS[acts[0][0].name]
        return alg, acts[0][0].alpha if sloped else 0.0

    def buffer(self, ws: np.ndarray, name: str) -> Optional[np.ndarray]:
        """The workspace's float32 buffer ``name`` (None when the plan has none)."""
        off, size = self.offsets[name]
        return ws[off:off + size].view(F32) if size else None


def _derived(key: tuple, shape: tuple, dtype, fill: Callable[[np.ndarray], None],
             constant: bool, prepared, before: list) -> np.ndarray:
    """An operand made from the node's inputs by ``fill(out)``: from constants, once, in
    device memory with the model (shared by the tasks asking with the same ``key``);
    from inputs that may change, a buffer of its own refilled before each run."""
    if constant:
        return prepared_array(prepared, key, shape, dtype, fill)
    out = np.empty(shape, dtype)
    before.append(lambda: fill(out))
    return out


def _weights(pd: PrimitiveDesc, arg: int, w: np.ndarray, order: tuple, constant: bool,
             prepared, before: list) -> Memory:
    """ONNX's W or R ``[D, G * H, K]`` as the primitive's ``arg`` (weights_layer or
    weights_iter): gates in oneDNN's order and transposed (``ldigo``, by numpy), then
    reordered into the implementation's layout on one OpenMP thread (the loading thread
    never forms a team of its own: common.py)."""
    want = pd.arg_md(arg)
    d, gh, k = w.shape
    g = len(order)
    plain = MemoryDesc.from_tag((1, d, k, g, gh // g), F32, "abcde")          # ldigo

    def fill(out: np.ndarray) -> None:
        ldigo = np.ascontiguousarray(
            w.reshape(d, g, gh // g, k)[:, list(order)].transpose(0, 3, 1, 2))
        with using_threads(1):
            ops.reorder(plain, want).bind({Arg.src: storage(ldigo, plain),
                                           Arg.dst: storage(out, want)})()

    key = ("dnnl-rnn-weights", w.ctypes.data, w.shape, order, repr(want))
    return storage(_derived(key, (want.size,), np.uint8, fill, constant, prepared, before), want)


def _bias(plan: _Plan, b: Optional[np.ndarray], constant: bool, prepared,
          before: list) -> Memory:
    """The primitive's bias ``(1, D, G, H)`` from ONNX's B ``[D, 2 * G * H]`` (Wb then Rb):
    their sum per gate in oneDNN's order; for ``lbr_gru`` four rows, z and r summed, then
    Wb_h and Rb_h apart.  No B: zeros."""
    want = plan.pd.arg_md(Arg.bias)
    shape, (_, _, _, h, d) = want.dims, plan.dims
    g = GATES[plan.op]
    order = list(GATE_ORDER[plan.op])
    if b is None:
        zeros = prepared_array(prepared, ("dnnl-rnn-zero-bias", shape), shape, F32,
                               lambda out: out.fill(0))
        return storage(zeros, want)

    def fill(out: np.ndarray) -> None:
        wb, rb = b[:, :g * h].reshape(d, g, h), b[:, g * h:].reshape(d, g, h)
        rows = out.reshape(d, -1, h)
        if plan.lbr:
            np.add(wb[:, :2], rb[:, :2], out=rows[:, :2])
            rows[:, 2], rows[:, 3] = wb[:, 2], rb[:, 2]
        else:
            np.add(wb[:, order], rb[:, order], out=rows)

    key = ("dnnl-rnn-bias", plan.op, plan.lbr, b.ctypes.data, b.shape)
    return storage(_derived(key, shape, F32, fill, constant, prepared, before), want)


def _peepholes(plan: _Plan, p: np.ndarray, constant: bool, prepared, before: list) -> Memory:
    """ONNX's P ``[D, 3 * H]`` (i, o, f) as oneDNN's ``(1, D, 3, H)`` (i, f, o)."""
    want = plan.pd.arg_md(RnnArg.weights_peephole)
    d, h = plan.dims[4], plan.dims[3]

    def fill(out: np.ndarray) -> None:
        out.reshape(d, 3, h)[...] = p.reshape(d, 3, h)[:, list(PEEPHOLE_ORDER)]

    key = ("dnnl-rnn-peepholes", p.ctypes.data, p.shape)
    return storage(_derived(key, want.dims, F32, fill, constant, prepared, before), want)


def _bind(plan: _Plan, ins: list, outs: list, ws: Optional[np.ndarray], constant: list,
          prepared) -> Callable[[], None]:
    """The primitive bound to the node's operands (what they lack in the workspace), with
    what runs before it (weights to pack, zero states) and after it (Y of a bidirectional
    layer, layout 0)."""
    x, w, r, b, _, h0, c0, p = _pad(ins, 8)
    y, y_h, y_c = _pad(outs, 3)
    constant = _pad(list(constant), 8)
    operands = (x, w, r, b, h0, c0, p, y, y_h, y_c)
    if any(a is not None and not a.flags.c_contiguous for a in operands):
        raise NotForDnnl("an operand that is not dense")
    if ws is None or ws.nbytes < plan.workspace:
        ws = np.empty(plan.workspace, np.uint8)      # a kernel called directly
    pd, op, d = plan.pd, plan.op, plan.dims[4]
    before: list = []
    args = {RnnArg.src_layer: storage(x, pd.arg_md(RnnArg.src_layer)),
            RnnArg.weights_layer: _weights(pd, RnnArg.weights_layer, w, GATE_ORDER[op],
                                        bool(constant[1]), prepared, before),
            RnnArg.weights_iter: _weights(pd, RnnArg.weights_iter, r, GATE_ORDER[op],
                                       bool(constant[2]), prepared, before),
            Arg.bias: _bias(plan, b, bool(constant[3]), prepared, before)}
    if plan.has_peepholes:
        args[RnnArg.weights_peephole] = _peepholes(plan, p, bool(constant[7]), prepared,
                                                   before)
    states = [(RnnArg.src_iter, h0, "h0", False), (RnnArg.dst_iter, y_h, "y_h", True)]
    if op == "LSTM":
        states += [(RnnArg.src_iter_c, c0, "c0", False), (RnnArg.dst_iter_c, y_c, "y_c", True)]
    for arg, given, name, written in states:
        if given is None:           # in the workspace; an initial state zeros (others use it)
            given = plan.buffer(ws, name)
            if not written:
                before.append(functools.partial(given.fill, 0))
        args[arg] = storage(given, plan.state_md)
    after = []
    if y is not None and (d == 1 or plan.layout):
        args[RnnArg.dst_layer] = storage(y, pd.arg_md(RnnArg.dst_layer))
    else:
        buf = plan.buffer(ws, "y")
        args[RnnArg.dst_layer] = storage(buf, pd.arg_md(RnnArg.dst_layer))
        if y is not None:                           # (T, N, D * H) -> Y [T, D, N, H]
            after.append(_concat_to_y(buf, y, plan.dims))
    off, size = plan.offsets["scratchpad"]
    primitive = bind(pd, args, ws[off:off + size] if size else None)
    steps = before + [primitive] + after

    def run() -> None:
        for step in steps:
            step()
    run.bound = primitive.bound         # the oneDNN primitive (the numpy twin has none)
    return run


def _concat_to_y(buf: np.ndarray, y: np.ndarray, dims: tuple) -> Callable[[], None]:
    """A reorder writing a bidirectional layer's concatenated output ``(T, N, D * H)``
    into ONNX's Y ``[T, D, N, H]``."""
    t, n, _, h, d = dims

    def make() -> PrimitiveDesc:
        src = MemoryDesc.from_strides((t, d, n, h), F32, (n * d * h, h, d * h, 1))
        dst = MemoryDesc.from_tag((t, d, n, h), F32, "abcd")
        return ops.reorder(src, dst, attr=Attr((), scratchpad="user"))
    pd = cached_pd(("rnn-concat-to-y", dims), make, 8.0 * y.size)
    return bind(pd, {Arg.src: storage(buf, pd.arg_md(Arg.src)),
                     Arg.dst: storage(y, pd.arg_md(Arg.dst))}, None)


def _with_lengths(primary: Callable[[], None], twin: Callable[[], None], lens: np.ndarray,
                  seq: int) -> Callable[[], None]:
    """Run ``primary`` when every sequence has all ``seq`` steps (``lens`` read at each
    run), else ``twin`` (the numpy kernel, which also rejects lengths out of range)."""
    def run() -> None:
        if lens.size and bool((lens == seq).all()):
            primary()
        else:
            twin()
    run.bound = primary.bound
    return run


def _rnn_kernel(op: str, since: int):
    """The kernel class of ``op`` at opset ``since`` (the numpy twin's at the same)."""

    def plan(types: list, attrs: dict) -> _Plan:
        return _Plan(op, types, attrs)

    def tiling(types: list, attrs: dict, target) -> dict:
        try:
            p = plan(types, attrs)
        except (NotForDnnl, DnnlError) as e:
            return twin_tiling(op, since, "", types, attrs, target, str(e))
        need = p.workspace
        if p.has_lens:              # the numpy kernel runs on the same workspace when it runs
            twin = twin_tiling(op, since, "", types, attrs, target, "sequence_lens")
            need = max(need, int(twin.get("workspace", 0)))
        return {"backend": "dnnl", "workspace": need, "impl": p.pd.impl}

    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        twin = functools.partial(twin_prepare, op, since, "", ins, outs, attrs, tiling, ws,
                                 constant, prepared)
        if tiling.get("backend") != "dnnl":
            return twin()
        types = [None if a is None else TensorType.of(a) for a in ins]
        try:
            p = plan(types, attrs)
            run = _bind(p, ins, outs, ws, constant, prepared)
        except (NotForDnnl, DnnlUnimplemented):
            return twin()
        return _with_lengths(run, twin(), ins[4], p.dims[0]) if p.has_lens else run

    def kernel(ins, outs, attrs, tiling, ws) -> None:
        prepare(ins, outs, attrs, tiling, ws, [False] * len(ins), None)()

    return type(op, (), {
        "__doc__": f"{op} on oneDNN's {op} primitive (numpy for what it does not compute).",
        "tiling": staticmethod(tiling), "prepare": staticmethod(prepare),
        "kernel": staticmethod(kernel)})


for _op in GATES:
    for _since in SINCE:
        DNNL.kernel(_op, _since)(_rnn_kernel(_op, _since))

"""LSTM, GRU and RNN: the input projection of every step as one GEMM, then per step the
product with the recurrence weights and the gates' elementwise math in place.

The state is kept feature-major, ``[directions, hidden, batch]``: a step's product is
``R @ H`` with R as ONNX stores it, in blocks of R's rows (:data:`BLOCK_BYTES`), and
every gate is a contiguous block.  The directions of a bidirectional layer advance
together (step k is time k forward, time seq-1-k in reverse), so each ufunc covers both.
Every step's hidden state goes to its own slot of the workspace; Y, Y_h and Y_c are
written from the slots at the end.

Sequences shorter than ``seq`` (``sequence_lens``) run every step like the others; at
the end Y past a sequence's length is 0 and Y_h / Y_c are its state at its last step
(0 for a sequence of length 0, as onnxruntime does).  In reverse, each row's projection
is first reversed within its own length.  float16 computes in float32.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from aircc.ops.defs.rnn import DIRECTIONS, GATES, Activation, activations

from .numpy_backend import NUMPY
from .scratch import align, carve, view, workspace

#: Bytes of R one GEMM of a step reads, for a small batch: OpenBLAS (Haswell kernels,
#: here) multiplies R [1024, 256] float32 by H [256, 8] in 85 us as one GEMM and in 44 us
#: as four of [256, 256], whose packed blocks stay in L2.
BLOCK_BYTES = 256 << 10
#: Batches above this take each step's product as one GEMM, which OpenBLAS's threads
#: speed up (R [1024, 256] by H [256, 32]: 99 us on two threads, 111 us in blocks).
BLOCKED_BATCH_MAX = 16
#: Fewer rows per block than this (a hidden size with no fitting divisor): one GEMM.
MIN_BLOCK_ROWS = 32


# ------------------------------------------------------------------ activations
def _activation(a: Activation) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """``f(src, dst, tmp)``: ``a`` of src written into dst (which may be src); tmp is
    scratch of src's shape."""
    alpha, beta, mul, add = a.alpha, a.beta, np.multiply, np.add

    def sigmoid(s, d, t):
        mul(s, 0.5, out=d)
        np.tanh(d, out=d)
        mul(d, 0.5, out=d)
        add(d, 0.5, out=d)

    def softsign(s, d, t):
        add(np.abs(s, out=t), 1.0, out=t)
        np.divide(s, t, out=d)

    def leaky_relu(s, d, t):
        (np.maximum if alpha <= 1 else np.minimum)(s, mul(s, alpha, out=t), out=d)

    def elu(s, d, t):
        mul(np.expm1(np.minimum(s, 0.0, out=t), out=t), alpha, out=t)
        add(np.maximum(s, 0.0, out=d), t, out=d)

    def hard_sigmoid(s, d, t):
        add(mul(s, alpha, out=d), beta, out=d)
        np.minimum(np.maximum(d, 0.0, out=d), 1.0, out=d)

    return {"sigmoid": sigmoid, "softsign": softsign, "leakyrelu": leaky_relu, "elu": elu,
            "hardsigmoid": hard_sigmoid,
            "tanh": lambda s, d, t: np.tanh(s, out=d),
            "relu": lambda s, d, t: np.maximum(s, 0.0, out=d),
            "softplus": lambda s, d, t: np.logaddexp(s, 0.0, out=d),
            "thresholdedrelu": lambda s, d, t: mul(s, np.greater(s, alpha, out=t), out=d),
            "affine": lambda s, d, t: add(mul(s, alpha, out=d), beta, out=d),
            "scaledtanh": lambda s, d, t: mul(np.tanh(mul(s, beta, out=d), out=d), alpha, out=d),
            }[a.name]


def _clip(x: np.ndarray, bound: Optional[float]) -> None:
    if bound is not None:
        np.maximum(np.minimum(x, bound, out=x), -bound, out=x)


# ------------------------------------------------------------------ geometry
_Dims = NamedTuple("_Dims", [("seq", int), ("batch", int), ("inp", int), ("nd", int),
                             ("hidden", int), ("gates", int)])


def _dims(op: str, x_shape, r_shape, attrs: dict) -> _Dims:
    layout = int(attrs.get("layout", 0))
    seq, batch = (x_shape[1], x_shape[0]) if layout else (x_shape[0], x_shape[1])
    return _Dims(int(seq), int(batch), int(x_shape[2]),
                 DIRECTIONS[attrs.get("direction", "forward")], int(r_shape[2]), GATES[op])


def _compute_dtype(dtype) -> np.dtype:
    return np.dtype(np.float64 if np.dtype(dtype) == np.float64 else np.float32)


def _layout(op: str, d: _Dims, has_lens: bool, has_peepholes: bool, itemsize: int):
    """The workspace's arrays: {name: (byte offset, shape)}, and the bytes they take."""
    gh, state = d.gates * d.hidden, (d.nd, d.hidden, d.batch)
    shapes = {"proj": (d.nd, gh, d.seq * d.batch), "rec": (d.nd, gh, d.batch),
              "tmp": (d.nd, gh, d.batch), "th": state, "bias": (d.nd, gh, 1),
              "hs": (d.seq + 1, *state)}
    if op == "LSTM":
        shapes["cs"] = (d.seq + 1 if has_lens else 1, *state)
        if has_peepholes:
            shapes["peep"] = (d.nd, 3 * d.hidden, d.batch)
    if op == "GRU":
        shapes["rbh"] = state
    offsets, end = {}, 0
    for name, shape in shapes.items():
        offsets[name] = (end, shape)
        end += align(int(np.prod(shape)) * itemsize)
    return offsets, end


def block_rows(m: int, k: int, batch: int, itemsize: int) -> int:
    """Rows of R per GEMM of a step's product ``R [m, k] @ H [k, batch]``: for a small
    batch the most that divide ``m`` and keep a block within :data:`BLOCK_BYTES`, else (or
    when no such divisor is large) all ``m``."""
    if batch > BLOCKED_BATCH_MAX:
        return m
    cap = max(1, BLOCK_BYTES // (k * itemsize))
    rows = max((r for r in range(1, min(m, cap) + 1) if m % r == 0), default=m)
    return rows if rows >= min(m, MIN_BLOCK_ROWS) else m


def _pad(items: list, n: int = 8) -> list:
    return list(items) + [None] * (n - len(items))


# ------------------------------------------------------------------ the layer
class _Layer:
    """One node bound to its operands and workspace: :meth:`run` computes its outputs."""

    def __init__(self, op: str, ins: list, outs: list, attrs: dict, ws: Optional[np.ndarray]):
        x, w, r, b, lens, h0, c0, p = _pad(ins)
        r = np.ascontiguousarray(r)       # device operands are; a direct caller's may not be
        self.op, self.ins, self.has_bias = op, ins, b is not None
        self.dims = d = _dims(op, x.shape, r.shape, attrs)
        h, ct = d.hidden, _compute_dtype(x.dtype)
        self.layout = int(attrs.get("layout", 0))
        self.reverse = {"forward": (False,), "reverse": (True,),
                        "bidirectional": (False, True)}[attrs.get("direction", "forward")]
        self.clip = float(attrs["clip"]) if "clip" in attrs else None
        self.lbr, self.input_forget = (bool(attrs.get(k, 0))
                                       for k in ("linear_before_reset", "input_forget"))
        offsets, total = _layout(op, d, lens is not None, p is not None, ct.itemsize)
        buf = workspace(ws, total)
        self.a = a = {name: carve(buf, off, shape, ct) for name, (off, shape) in offsets.items()}
        outs = _pad(outs, 3)
        self.y = None if outs[0] is None else (outs[0].transpose(1, 2, 0, 3) if self.layout
                                               else outs[0])
        self.y_h, self.y_c, self.h0, self.c0 = (
            None if t is None else (t.transpose(1, 0, 2) if self.layout else t)
            for t in (outs[1], outs[2] if op == "LSTM" else None, h0, c0))
        rec, tmp, hs, cs = a["rec"], a["tmp"], a["hs"], a.get("cs")
        self.rec_n, self.hs, self.peep = list(rec), list(hs), a.get("peep")
        self.h_in = [s[:, None] for s in hs]
        self.c_slots = None if cs is None else [cs[min(k, len(cs) - 1)] for k in range(d.seq + 1)]
        self.v = {"i": rec[:, :h], "o": rec[:, h:2 * h], "f": rec[:, 2 * h:3 * h],
                  "g": rec[:, (d.gates - 1) * h:], "lead": rec[:, :(d.gates - 1) * h],
                  "zr": rec[:, :2 * h], "r": rec[:, h:2 * h], "th": a["th"]}
        acts = activations(op, attrs, d.nd)
        groups = [slice(0, d.nd)] if len(set(acts)) == 1 else [slice(n, n + 1) for n in range(d.nd)]
        self.groups = [([_activation(f) for f in acts[s.start]],
                        {k: (v[s], tmp[s, :v.shape[1]]) for k, v in self.v.items()}, s)
                       for s in groups]
        self.last = [(fns[-1], None if len(groups) == 1 else s, tmp[s, :h])
                     for fns, _, s in self.groups]
        self.fused = (op == "LSTM" and p is None and len(groups) == 1
                      and [f.name for f in acts[0][:2]] == ["sigmoid", "tanh"])
        parts = ({"zr": (0, 2 * h), "h": (2 * h, 3 * h)} if op == "GRU" and not self.lbr
                 else {"all": (0, d.gates * h)})
        self.products = {}
        for name, (lo, hi) in parts.items():
            rows = block_rows(hi - lo, h, d.batch, ct.itemsize)
            self.products[name] = (view(r[:, lo:hi], (d.nd, (hi - lo) // rows, rows, h)),
                                   view(rec[:, lo:hi], (d.nd, (hi - lo) // rows, rows, d.batch)))
        proj = a["proj"]
        cols = ((lambda t: slice(t, None, d.seq)) if self.layout     # columns (batch, time)
                else (lambda t: slice(t * d.batch, (t + 1) * d.batch)))
        self.xw = [[proj[n, :, cols(t)] for t in range(d.seq)] for n in range(d.nd)]

    # -------------------------------------------------------------- per run
    def run(self) -> None:
        d, a = self.dims, self.a
        x, w, r, b, lens, h0, c0, p = _pad(self.ins)
        lens = self._lengths(lens)
        np.matmul(w.reshape(-1, d.inp), x.reshape(-1, d.inp).T,
                  out=a["proj"].reshape(w.shape[0] * w.shape[1], -1))
        if b is not None:
            self._add_bias(b)
        if lens is not None:
            self._reverse_rows(lens)
        self._initial(a["hs"][0], self.h0)
        if self.op == "LSTM":
            self._initial(a["cs"][0], self.c0)
        if p is not None:
            np.copyto(a["peep"], p.reshape(d.nd, 3 * d.hidden, 1))
        times = [[k if lens is not None or not rev else d.seq - 1 - k for k in range(d.seq)]
                 for rev in self.reverse]
        step = {"LSTM": self._lstm, "GRU": self._gru, "RNN": self._rnn}[self.op]
        with np.errstate(over="ignore", invalid="ignore"):    # rows past their length run on
            for k in range(d.seq):                             # padding, whatever it holds
                step(k, [self.xw[n][times[n][k]] for n in range(d.nd)])
        self._finish(lens)

    def _lengths(self, lens) -> Optional[np.ndarray]:
        """The sequence lengths, or None when every sequence has all the steps."""
        seq = self.dims.seq
        if lens is None:
            return None
        lens = np.asarray(lens).astype(np.int64).reshape(-1)
        if lens.size and (lens.min() < 0 or lens.max() > seq):
            raise ValueError(f"{self.op}: sequence_lens {lens.tolist()} must lie in [0, {seq}]")
        return None if bool((lens == seq).all()) else lens

    def _add_bias(self, b: np.ndarray) -> None:
        h, a = self.dims.hidden, self.a
        gh = self.dims.gates * h
        bias = a["bias"]
        np.add(b[:, :gh, None], b[:, gh:, None], out=bias)
        if self.op == "GRU" and self.lbr:    # Rbh is added inside the reset gate's product
            np.copyto(bias[:, 2 * h:], b[:, 2 * h:gh, None])
            np.copyto(a["rbh"], b[:, gh + 2 * h:, None])
        np.add(a["proj"], bias, out=a["proj"])

    def _reverse_rows(self, lens: np.ndarray) -> None:
        """Each row's projection reversed within its length, for the reverse direction."""
        d, proj = self.dims, self.a["proj"]
        for n, rev in enumerate(self.reverse):
            for row, length in enumerate(lens.tolist() if rev else ()):
                v = (proj[n, :, row * d.seq:row * d.seq + length] if self.layout
                     else proj[n, :, row:length * d.batch:d.batch])
                v[...] = v[:, ::-1]

    @staticmethod
    def _initial(slot: np.ndarray, given: Optional[np.ndarray]) -> None:
        if given is None:
            slot.fill(0)
        else:
            np.copyto(slot, given.transpose(0, 2, 1))

    def _recur(self, k: int, product: str, h: np.ndarray) -> None:
        """One of the step's products with the recurrence weights, ``R @ h`` (0 for a zero
        initial state)."""
        r, out = self.products[product]
        if k == 0 and self.h0 is None:
            out.fill(0)
        else:
            np.matmul(r, h, out=out)

    def _add_inputs(self, xw: list, lo: int = 0, hi: Optional[int] = None) -> None:
        """Add the step's input projection (rows ``lo:hi``, all by default) to the gates."""
        for rec, v in zip(self.rec_n, xw):
            if hi is not None:
                rec, v = rec[lo:hi], v[lo:hi]
            np.add(rec, v, out=rec)

    def _act(self, j: int, name: str) -> None:
        """Activation ``j`` of each direction applied to gate view ``name`` in place."""
        for acts, v, _ in self.groups:
            gate, tmp = v[name]
            acts[j](gate, gate, tmp)

    def _last_act(self, src: np.ndarray, dst: np.ndarray) -> None:
        """The last activation of each direction (LSTM's h, RNN's f) of ``src`` into ``dst``."""
        for fn, s, tmp in self.last:
            fn(src if s is None else src[s], dst if s is None else dst[s], tmp)

    # -------------------------------------------------------------- cells
    def _rnn(self, k: int, xw: list) -> None:
        self._recur(k, "all", self.h_in[k])
        self._add_inputs(xw)
        _clip(self.a["rec"], self.clip)
        self._last_act(self.a["rec"], self.hs[k + 1])

    def _gru(self, k: int, xw: list) -> None:
        v, h = self.v, self.dims.hidden
        hprev, th, hg = self.hs[k], v["th"], v["g"]
        self._recur(k, "all" if self.lbr else "zr", self.h_in[k])
        self._add_inputs(xw, 0, 2 * h)
        _clip(v["zr"], self.clip)
        self._act(0, "zr")
        if self.lbr:
            if self.has_bias:
                np.add(hg, self.a["rbh"], out=hg)
            np.multiply(hg, v["r"], out=hg)
        else:
            np.multiply(v["r"], hprev, out=th)
            self._recur(k, "h", th[:, None])
        self._add_inputs(xw, 2 * h, 3 * h)
        _clip(hg, self.clip)
        self._act(1, "g")
        np.subtract(hprev, hg, out=th)
        np.multiply(v["lead"][:, :h], th, out=th)
        np.add(hg, th, out=self.hs[k + 1])

    def _lstm(self, k: int, xw: list) -> None:
        v, rec, peep, th = self.v, self.a["rec"], self.peep, self.v["th"]
        i, o, f, h = v["i"], v["o"], v["f"], self.dims.hidden
        cprev, cnew = self.c_slots[k], self.c_slots[k + 1]
        self._recur(k, "all", self.h_in[k])
        self._add_inputs(xw)
        if peep is not None:
            for gate, pv in ((i, peep[:, :h]), (f, peep[:, 2 * h:])):
                np.add(gate, np.multiply(pv, cprev, out=th), out=gate)
            _clip(rec[:, :h], self.clip)
            _clip(rec[:, 2 * h:], self.clip)
            self._act(0, "i")
            self._act(0, "f")
        else:
            _clip(rec, self.clip)
            if self.fused:      # Sigmoid (via tanh) and Tanh: one tanh for the four gates
                lead = v["lead"]
                np.multiply(lead, 0.5, out=lead)
                np.tanh(rec, out=rec)
                np.add(np.multiply(lead, 0.5, out=lead), 0.5, out=lead)
            else:
                self._act(0, "lead")
        if not self.fused:
            self._act(1, "g")
        if self.input_forget:
            np.subtract(1.0, i, out=f)
        np.multiply(f, cprev, out=cnew)
        np.add(cnew, np.multiply(i, v["g"], out=i), out=cnew)
        if peep is not None:
            np.add(o, np.multiply(peep[:, h:2 * h], cnew, out=th), out=o)
            _clip(o, self.clip)
            self._act(0, "o")
        self._last_act(cnew, th)
        np.multiply(o, th, out=self.hs[k + 1])

    # -------------------------------------------------------------- outputs
    def _finish(self, lens: Optional[np.ndarray]) -> None:
        d, hs, cs = self.dims, self.a["hs"], self.a.get("cs")
        if lens is None:
            if self.y is not None:
                for n, rev in enumerate(self.reverse):
                    np.copyto(self.y[::-1, n] if rev else self.y[:, n],
                              hs[1:, n].transpose(0, 2, 1))
            if self.y_h is not None:
                np.copyto(self.y_h, hs[d.seq].transpose(0, 2, 1))
            if self.y_c is not None:
                np.copyto(self.y_c, cs[-1].transpose(0, 2, 1))
            return
        rows, empty = np.arange(d.batch), lens == 0
        for out, slots in ((self.y_h, hs), (self.y_c, cs)):
            for n in range(d.nd if out is not None else 0):
                out[n] = slots[lens, n, :, rows]
                out[n, empty] = 0
        for n, rev in enumerate(self.reverse if self.y is not None else ()):
            y = self.y[:, n]
            if not rev:
                np.copyto(y, hs[1:, n].transpose(0, 2, 1))
            for row, length in enumerate(lens.tolist()):
                if rev:
                    y[:length, row] = hs[length:0:-1, n, :, row]
                y[length:, row] = 0


# ------------------------------------------------------------------ the kernels
def _rnn_kernel(op: str):
    """The kernel class of ``op`` (every version computes the same)."""

    def tiling(types, attrs: dict, target) -> dict:
        types = _pad(types)
        x, r = types[0], types[2]
        if not (x.is_static and r.is_static):
            return {}
        _, total = _layout(op, _dims(op, x.shape, r.shape, attrs), types[4] is not None,
                           op == "LSTM" and types[7] is not None, _compute_dtype(x.dtype).itemsize)
        return {"workspace": total}

    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        if ins[0].dtype == np.float16:
            return None
        return _Layer(op, ins, outs, attrs, ws).run

    def kernel(ins, outs, attrs, tiling, ws) -> None:
        if ins[0].dtype != np.float16:
            _Layer(op, ins, outs, attrs, ws).run()
            return
        wide = [a if a is None or a.dtype != np.float16 else a.astype(np.float32) for a in ins]
        results = [None if o is None else np.empty(o.shape, np.float32) for o in outs]
        _Layer(op, wide, results, attrs, ws).run()
        for o, res in zip(outs, results):
            if o is not None:
                np.copyto(o, res, casting="same_kind")

    return type(op, (), {"__doc__": f"{op}: one GEMM for every step's input projection, "
                                    "then per step the recurrent product and in-place gate math.",
                         "tiling": staticmethod(tiling), "prepare": staticmethod(prepare),
                         "kernel": staticmethod(kernel)})


for _op in GATES:
    _cls = _rnn_kernel(_op)
    for _since in (1, 7, 14):
        NUMPY.kernel(_op, _since)(_cls)

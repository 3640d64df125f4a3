"""aircc.Attention on oneDNN: [Q | K | V] = X W + b in one matmul, the scores Q K^T of
every head in one batched matmul that reads Q and K as strided views of that product
(scaled to natural units and the mask added as post-ops), oneDNN's softmax over them in
place, and their product with V written straight into the output's head layout.

Four primitives, made once when the task is bound; their operands and scratchpads are
carved from the task's workspace.  ``nan_guard`` (a mask that may empty a row, as
PyTorch's SDPA exports guard against): one sum over the context tells whether a NaN came
out (a row of -inf scores gives NaN probabilities), and only then the numpy kernel makes
that call again, counting NaN probabilities as 0 as the guard does.
"""
from __future__ import annotations

import math

import numpy as np

from aircc.executor.kernels.dnnl.attr import Attr, Binary, Eltwise
from aircc.executor.kernels.dnnl.enums import Arg, post_op_arg
from aircc.executor.kernels.dnnl.memory import Memory, MemoryDesc
from aircc.executor.kernels.dnnl.ops import matmul, softmax
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.ops import TensorType

from . import DNNL
from .common import NotForDnnl, bind, cached_pd, twin_prepare, twin_tiling

ALIGN = 64
LN2 = math.log(2.0)


def _geometry(x: tuple, w: tuple, heads: int, seq_first: bool) -> tuple[int, int, int, int, int]:
    d0, d1, e = (int(v) for v in x)
    b, s = (d1, d0) if seq_first else (d0, d1)
    return b, s, e, heads, int(w[1]) // 3 // heads


def _heads(b: int, s: int, h: int, d: int, seq_first: bool, part: int) -> tuple[tuple, tuple, int]:
    """(dims [B, H, S, D], strides, element offset) of Q, K or V (``part`` 0, 1, 2) in the
    [rows, 3 H D] product whose rows are [B, S] (or [S, B]) positions."""
    row = 3 * h * d
    sb, ss = (row, b * row) if seq_first else (s * row, row)
    return (b, h, s, d), (sb, d, ss, 1), part * h * d


def _out(b: int, s: int, h: int, d: int, seq_first: bool) -> tuple[tuple, tuple]:
    """Dims [B, H, S, D] and strides of the output [B, S, H, D] (or [S, B, H, D])."""
    sb, ss = (h * d, b * h * d) if seq_first else (s * h * d, h * d)
    return (b, h, s, d), (sb, d, ss, 1)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class _Plan:
    """The four primitive descriptors of one attention shape and where their buffers lie
    in the workspace."""

    def __init__(self, types: list, attrs: dict):
        x, w = types[0], types[1]
        if x.dtype != "float32":
            raise NotForDnnl(f"{x.dtype} data")
        seq_in, seq_out = bool(attrs.get("seq_first_in")), bool(attrs.get("seq_first_out"))
        b, s, e, h, d = _geometry(x.shape, w.shape, int(attrs["heads"]), seq_in)
        self.geometry = (b, s, e, h, d)
        rows, f = b * s, np.float32
        mask = types[3] if len(types) > 3 and types[3] is not None else None
        key = ("attention", tuple(x.shape), tuple(w.shape),
               None if mask is None else tuple(mask.shape), repr(sorted(attrs.items())))
        ops = [Eltwise("linear", LN2, 0.0)] if attrs.get("base2") else []
        self.mask_arg = None
        if mask is not None:
            mshape = (1,) * (4 - len(mask.shape)) + tuple(int(v) for v in mask.shape)
            self.mask_md = MemoryDesc.from_tag(mshape, f, "abcd")
        q_dims, q_strides, _ = _heads(b, s, h, d, seq_in, 0)
        k_strides = (q_strides[0], q_strides[1], 1, q_strides[2])       # K^T: [B, H, D, S]
        o_dims, o_strides = _out(b, s, h, d, seq_out)
        user = "user"
        products = 2.0 * b * h * s * s * d
        self.qkv = cached_pd(key + ("qkv",), lambda: matmul(
            MemoryDesc.from_tag((rows, e), f, "ab"), MemoryDesc.from_tag((e, 3 * h * d), f, "ab"),
            MemoryDesc.from_tag((rows, 3 * h * d), f, "ab"),
            MemoryDesc.from_tag((1, 3 * h * d), f, "ab"), attr=Attr((), scratchpad=user)),
            2.0 * rows * e * 3 * h * d)
        def scores(post_ops: list) -> PrimitiveDesc:
            return cached_pd(key + ("scores", len(post_ops)), lambda: matmul(
                MemoryDesc.from_strides(q_dims, f, q_strides),
                MemoryDesc.from_strides((b, h, d, s), f, k_strides),
                MemoryDesc.from_tag((b, h, s, s), f, "abcd"), attr=Attr(post_ops, scratchpad=user)),
                products)
        self.scores = scores(ops)
        if mask is not None:    # the mask as a post-op where oneDNN runs that fast, else added after
            with_mask = scores(ops + [Binary("add", self.mask_md)])
            if not with_mask.is_reference:
                self.scores, self.mask_arg = with_mask, post_op_arg(len(ops))
        self.softmax = cached_pd(key + ("softmax",), lambda: softmax(
            MemoryDesc.from_tag((b, h, s, s), f, "abcd"), MemoryDesc.from_tag((b, h, s, s), f, "abcd"),
            3, attr=Attr((), scratchpad=user)), 8.0 * b * h * s * s)
        self.context = cached_pd(key + ("context",), lambda: matmul(
            MemoryDesc.from_tag((b, h, s, s), f, "abcd"),
            MemoryDesc.from_strides(q_dims, f, q_strides), MemoryDesc.from_strides(o_dims, f, o_strides),
            attr=Attr((), scratchpad=user)), products)
        for pd in (self.qkv, self.scores, self.softmax, self.context):
            if pd.is_reference:
                raise NotForDnnl(f"oneDNN has only its reference implementation ({pd.impl})")
        sizes = [rows * 3 * h * d * 4, b * h * s * s * 4,
                 *(pd.scratchpad_size for pd in (self.qkv, self.scores, self.softmax, self.context))]
        self.offsets = [0]
        for n in sizes:
            self.offsets.append(self.offsets[-1] + _align(n))

    @property
    def workspace(self) -> int:
        return self.offsets[-1]


def _carve(ws: np.ndarray, start: int, end: int) -> np.ndarray | None:
    return ws[start:end] if end > start else None


@DNNL.kernel("Attention", 1, "aircc")
class Attention:
    @staticmethod
    def tiling(types: list, attrs: dict, target) -> dict:
        try:
            if any(t is not None and not t.is_static for t in types):
                raise NotForDnnl("shapes known only at run time")
            plan = _Plan(types, attrs)
        except NotForDnnl as e:
            return twin_tiling("Attention", 1, "aircc", types, attrs, target, str(e))
        return {"backend": "dnnl", "workspace": plan.workspace}

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        if tiling.get("backend") == "dnnl" and ws is not None:
            try:
                run = _bind(_Plan([TensorType.of(a) if a is not None else None for a in ins],
                                  attrs), ins, outs, attrs, ws)
            except NotForDnnl:
                pass
            else:
                return _guarded(run, ins, outs, attrs, tiling, ws, constant, prepared) \
                    if attrs.get("nan_guard") else run
        return twin_prepare("Attention", 1, "aircc", ins, outs, attrs, tiling, ws, constant,
                            prepared)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        Attention.prepare(ins, outs, attrs, tiling, ws, [False] * len(ins), None)()


def _guarded(run, ins, outs, attrs, tiling, ws, constant, prepared):
    """``run``, then, when its context has a NaN, numpy's kernel (bound the first time it
    is needed), which makes it again with the NaN probabilities as 0."""
    flat = outs[0].reshape(-1)
    twin: list = []

    def guarded(add=np.add, isnan=math.isnan):
        run()
        if isnan(add.reduce(flat)):
            if not twin:
                twin.append(twin_prepare("Attention", 1, "aircc", ins, outs, attrs, tiling, ws,
                                         constant, prepared))
            twin[0]()
    return guarded


def _bind(plan: _Plan, ins, outs, attrs, ws: np.ndarray):
    x, w, bias = ins[0], ins[1], ins[2]
    y = outs[0]
    mask = ins[3] if len(ins) > 3 else None
    if ws.nbytes < plan.workspace or not (x.flags.c_contiguous and y.flags.c_contiguous) \
            or (mask is not None and not mask.flags.c_contiguous):
        raise NotForDnnl("a workspace or operands not as planned")
    b, s, e, h, d = plan.geometry
    seq_in = bool(attrs.get("seq_first_in"))
    off = plan.offsets
    qkv = ws[off[0]:off[0] + b * s * 3 * h * d * 4].view(np.float32)
    scores = ws[off[1]:off[1] + b * h * s * s * 4].view(np.float32)
    pads = [_carve(ws, off[2 + i], off[3 + i]) for i in range(4)]

    def at(part: int, pd: PrimitiveDesc, arg: int) -> Memory:
        _, _, elements = _heads(b, s, h, d, seq_in, part)
        return Memory(pd.arg_md(arg), qkv.ctypes.data + 4 * elements, qkv)

    steps = [
        bind(plan.qkv, {Arg.src: Memory(plan.qkv.src_md(), x.ctypes.data, x),
                        Arg.weights: Memory(plan.qkv.weights_md(), w.ctypes.data, w),
                        Arg.bias: Memory(plan.qkv.arg_md(Arg.bias), bias.ctypes.data, bias),
                        Arg.dst: Memory(plan.qkv.dst_md(), qkv.ctypes.data, qkv)}, pads[0]),
        bind(plan.scores, {Arg.src: at(0, plan.scores, Arg.src), Arg.weights: at(1, plan.scores, Arg.weights),
                           Arg.dst: Memory(plan.scores.dst_md(), scores.ctypes.data, scores),
                           **({plan.mask_arg: Memory(plan.mask_md, ins[3].ctypes.data, ins[3])}
                              if plan.mask_arg is not None else {})}, pads[1]),
        bind(plan.softmax, {Arg.src: Memory(plan.softmax.src_md(), scores.ctypes.data, scores),
                            Arg.dst: Memory(plan.softmax.dst_md(), scores.ctypes.data, scores)}, pads[2]),
        bind(plan.context, {Arg.src: Memory(plan.context.src_md(), scores.ctypes.data, scores),
                            Arg.weights: at(2, plan.context, Arg.weights),
                            Arg.dst: Memory(plan.context.dst_md(), y.ctypes.data, y)}, pads[3]),
    ]

    if mask is not None and plan.mask_arg is None:
        s4 = scores.reshape(b, h, s, s)
        steps.insert(2, lambda add=np.add: add(s4, mask, out=s4))

    def run():
        for step in steps:
            step()
    return run

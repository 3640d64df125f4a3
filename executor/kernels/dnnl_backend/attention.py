"""aircc.Attention on oneDNN: [Q | K | V] = X W + b in one matmul, the scores Q K^T of
every head in one batched matmul that reads Q and K as strided views of that product
(scaled to natural units and the mask added as post-ops), oneDNN's softmax over them in
place, and their product with V written straight into the output's head layout.

Four primitives, made once when the task is bound; their operands and scratchpads are
carved from the task's workspace.  ``nan_guard`` (a mask that may empty a row, as
PyTorch's SDPA exports guard against): one sum over the context tells whether a NaN came
out (a row of -inf scores gives NaN probabilities), and only then the numpy kernel makes
that call again, counting NaN probabilities as 0 as the guard does.

Where the extension module is built, a C step (``aircc_attention_softmax`` in
``attention_core.c``) takes the place of oneDNN's softmax: the scores matmul then has no
post-ops, and the C step scales, adds the mask and takes the softmax in one pass a row,
guarding rows itself (no second call).  For MiniLM's heads at (8, 128) it takes the
scores and softmax from 0.94 + 0.69 ms to 0.55 + 0.55 ms: oneDNN adds a broadcast mask in
a pass of its own, and its softmax costs 0.9 ns an element here.

Small heads (:func:`use_core`, decided in the tiling): after the QKV matmul, the C core
(``attention_core.c``) makes scores, softmax and context in one pass per head, where
oneDNN's three primitives cost 3-5 us each whatever their size (a BERT-style encoder at
batch 1, 16 tokens: about 15 us a layer, against 3.5 us).  Where the C module was not
built, a .om that chose it runs the three primitives (the workspace holds either).
"""
from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from aircc.executor.kernels.dnnl.attr import Attr, Binary, Eltwise
from aircc.executor.kernels.dnnl.enums import Arg, post_op_arg
from aircc.executor.kernels.dnnl.memory import Memory, MemoryDesc
from aircc.executor.kernels.dnnl.ops import matmul, softmax
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.formats.alignment import align_up
from aircc.ops import TensorType

from aircc.executor.device import threads

from . import DNNL
from .common import NotForDnnl, bind, cached_pd, team_size, twin_prepare, twin_tiling, worker_cpus

ALIGN = 64
LN2 = math.log(2.0)

#: The C core runs where a head's K (keys x head size) has at most this many elements
#: (it then stays in the L1 cache while the head's queries pass over it), or where the
#: whole core is at most ``CORE_MAX_WORK`` floating-point operations (see :func:`use_core`).
CORE_MAX_KEYS_BY_HEAD = 2048
CORE_MAX_WORK = 8e6
LANES = 16
"""The C core's vector width: it rounds the keys up to a multiple of this."""


class _CoreParams(ctypes.Structure):
    """The C core's operands (``Params`` in attention_core.c)."""

    _fields_ = [("qkv", ctypes.c_void_p), ("sb", ctypes.c_long), ("si", ctypes.c_long),
                ("B", ctypes.c_int), ("S", ctypes.c_int), ("H", ctypes.c_int), ("D", ctypes.c_int),
                ("mask", ctypes.c_void_p), ("mb", ctypes.c_long), ("mh", ctypes.c_long),
                ("mi", ctypes.c_long), ("mj", ctypes.c_long), ("scale", ctypes.c_float),
                ("nan_guard", ctypes.c_int), ("out", ctypes.c_void_p), ("ob", ctypes.c_long),
                ("oi", ctypes.c_long), ("scratch", ctypes.c_void_p), ("threads", ctypes.c_int)]


class _SoftmaxParams(ctypes.Structure):
    """The C softmax step's operands (``SoftmaxParams`` in attention_core.c)."""

    _fields_ = [("scores", ctypes.c_void_p), ("B", ctypes.c_int), ("H", ctypes.c_int),
                ("S", ctypes.c_int), ("mask", ctypes.c_void_p), ("mb", ctypes.c_long),
                ("mh", ctypes.c_long), ("mi", ctypes.c_long), ("mj", ctypes.c_long),
                ("scale", ctypes.c_float), ("nan_guard", ctypes.c_int), ("threads", ctypes.c_int)]


def _c_function(name: str):
    """A function of attention_core.c taking one struct address, or None where the
    extension module was not built."""
    try:
        from . import attention_core  # type: ignore[attr-defined]
    except ImportError:
        return None
    fn = getattr(ctypes.CDLL(attention_core.__file__), name)
    fn.argtypes, fn.restype = [ctypes.c_void_p], None
    return fn


@functools.lru_cache(maxsize=None)
def core():
    """The C core (a ctypes function of one ``_CoreParams`` address), or None where the
    extension module was not built."""
    return _c_function("aircc_attention_core")


@functools.lru_cache(maxsize=None)
def c_softmax():
    """The C softmax step (a ctypes function of one ``_SoftmaxParams`` address), or None
    where the extension module was not built."""
    return _c_function("aircc_attention_softmax")


def use_core(b: int, s: int, h: int, d: int) -> bool:
    """Does the C core make this attention's scores, softmax and context (after the QKV
    matmul)?  Measured on 2 vCPUs, the attention call with the core over the one with
    oneDNN's three primitives (B, S, H, D): inside the BERT-style sample 0.84-0.89 at
    (8, 128, 4, 16); alone 0.53-0.60 at (1, 16, 4, 16), 0.56 at (4, 64, 4, 16), 0.94 at
    (8, 64, 8, 32), 0.85 at (1, 64, 4, 64), 0.92 at (1, 16, 12, 64).  Where a head's K
    outgrows the L1 cache and the work is larger, the core's one query row at a time
    loses to oneDNN's blocked products: 1.11 at (4, 64, 4, 64), 1.20 at (8, 128, 12, 32),
    1.33 at (1, 128, 4, 64)."""
    return s * d <= CORE_MAX_KEYS_BY_HEAD or 4.0 * b * h * s * s * d <= CORE_MAX_WORK


def _core_scratch(s: int, d: int) -> int:
    """Bytes of the C core's scratch per thread (K^T and a row of scores)."""
    keys = align_up(s, LANES)
    return 4 * (keys * d + keys)


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
        self.plain_scores = scores([])          # for the C softmax, which scales and masks
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
        self.softmax_threads = team_size(8.0 * b * h * s * s)
        sizes = [rows * 3 * h * d * 4, b * h * s * s * 4, self.qkv.scratchpad_size,
                 max(self.scores.scratchpad_size, self.plain_scores.scratchpad_size),
                 self.softmax.scratchpad_size, self.context.scratchpad_size]
        self.offsets = [0]
        for n in sizes:
            self.offsets.append(self.offsets[-1] + align_up(n))
        # the C core's: Q|K|V, the QKV matmul's scratchpad, a scratch per thread
        self.core_work = 4.0 * b * h * s * s * d
        self.core_threads = team_size(self.core_work)
        self.core_offsets = [0, align_up(sizes[0]), align_up(sizes[0]) + align_up(sizes[2])]
        self.core_offsets.append(self.core_offsets[-1] + self.core_threads * _core_scratch(s, d))

    @property
    def workspace(self) -> int:
        return max(self.offsets[-1], self.core_offsets[-1])


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
        b, s, _, h, d = plan.geometry
        return {"backend": "dnnl", "workspace": plan.workspace, "core": use_core(b, s, h, d)}

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        if tiling.get("backend") == "dnnl" and ws is not None:
            try:
                plan = _Plan([TensorType.of(a) if a is not None else None for a in ins], attrs)
                if tiling.get("core") and core() is not None:
                    return _bind_core(plan, ins, outs, attrs, ws, core())
                softmax_fn = None if plan.plain_scores.is_reference else c_softmax()
                run = _bind(plan, ins, outs, attrs, ws, softmax_fn)
            except NotForDnnl:
                pass
            else:       # the C softmax guards rows itself
                return _guarded(run, ins, outs, attrs, tiling, ws, constant, prepared) \
                    if attrs.get("nan_guard") and softmax_fn is None else run
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


def _bind(plan: _Plan, ins, outs, attrs, ws: np.ndarray, softmax_fn=None):
    """The four steps: QKV, scores, softmax, context.  With ``softmax_fn`` (the C
    softmax), the scores matmul has no post-ops and the C step scales, masks and guards."""
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

    qkv_step = bind(plan.qkv, {Arg.src: Memory(plan.qkv.src_md(), x.ctypes.data, x),
                               Arg.weights: Memory(plan.qkv.weights_md(), w.ctypes.data, w),
                               Arg.bias: Memory(plan.qkv.arg_md(Arg.bias), bias.ctypes.data, bias),
                               Arg.dst: Memory(plan.qkv.dst_md(), qkv.ctypes.data, qkv)}, pads[0])
    context_step = bind(plan.context, {
        Arg.src: Memory(plan.context.src_md(), scores.ctypes.data, scores),
        Arg.weights: at(2, plan.context, Arg.weights),
        Arg.dst: Memory(plan.context.dst_md(), y.ctypes.data, y)}, pads[3])
    if softmax_fn is not None:
        pd = plan.plain_scores
        scores_step = bind(pd, {Arg.src: at(0, pd, Arg.src), Arg.weights: at(1, pd, Arg.weights),
                                Arg.dst: Memory(pd.dst_md(), scores.ctypes.data, scores)}, pads[1])
        steps = [qkv_step, scores_step, _c_softmax_step(plan, scores, mask, attrs, softmax_fn),
                 context_step]
        steps[2].keep = (scores, ws, mask)          # what its pointers point into
        return _in_turn(steps)
    steps = [
        qkv_step,
        bind(plan.scores, {Arg.src: at(0, plan.scores, Arg.src), Arg.weights: at(1, plan.scores, Arg.weights),
                           Arg.dst: Memory(plan.scores.dst_md(), scores.ctypes.data, scores),
                           **({plan.mask_arg: Memory(plan.mask_md, ins[3].ctypes.data, ins[3])}
                              if plan.mask_arg is not None else {})}, pads[1]),
        bind(plan.softmax, {Arg.src: Memory(plan.softmax.src_md(), scores.ctypes.data, scores),
                            Arg.dst: Memory(plan.softmax.dst_md(), scores.ctypes.data, scores)}, pads[2]),
        context_step,
    ]

    if mask is not None and plan.mask_arg is None:
        s4 = scores.reshape(b, h, s, s)
        steps.insert(2, lambda add=np.add: add(s4, mask, out=s4))
    return _in_turn(steps)


def _in_turn(steps: list):
    def run():
        for step in steps:
            step()
    return run


def _c_softmax_step(plan: _Plan, scores: np.ndarray, mask, attrs: dict, fn):
    """The C softmax over ``scores`` in place: scaled, ``mask`` added, rows guarded."""
    b, s, _, h, _ = plan.geometry
    params = _SoftmaxParams(scores=scores.ctypes.data, B=b, H=h, S=s,
                            scale=LN2 if attrs.get("base2") else 1.0,
                            nan_guard=int(bool(attrs.get("nan_guard"))), threads=1)
    if mask is not None:
        strides = np.broadcast_to(mask, (b, h, s, s)).strides
        params.mask = mask.ctypes.data
        params.mb, params.mh, params.mi, params.mj = (st // mask.itemsize for st in strides)
    address = ctypes.addressof(params)

    def run():
        _size_team(params, plan.softmax_threads)
        fn(address)
    run.params = params
    return run


def _size_team(params, wanted: int) -> None:
    """A C call's team, sized as :func:`~.common.bind` sizes a primitive's: ``wanted``
    threads at most, no more than the calling worker may use."""
    n = min(wanted, worker_cpus())
    if n != params.threads:
        params.threads = n
        if n > 1:
            threads.team_formed()
    if n > 1:
        threads.parallel_calls += 1


def _bind_core(plan: _Plan, ins, outs, attrs, ws: np.ndarray, fn):
    """The QKV matmul on oneDNN, then the C core from its product to the output."""
    x, w, bias = ins[0], ins[1], ins[2]
    y = outs[0]
    mask = ins[3] if len(ins) > 3 else None
    off = plan.core_offsets
    if ws.nbytes < off[-1] or not (x.flags.c_contiguous and y.flags.c_contiguous) \
            or (mask is not None and not mask.flags.c_contiguous):
        raise NotForDnnl("a workspace or operands not as planned")
    b, s, e, h, d = plan.geometry
    qkv = ws[off[0]:off[0] + b * s * 3 * h * d * 4].view(np.float32)
    matmul_step = bind(plan.qkv, {Arg.src: Memory(plan.qkv.src_md(), x.ctypes.data, x),
                                  Arg.weights: Memory(plan.qkv.weights_md(), w.ctypes.data, w),
                                  Arg.bias: Memory(plan.qkv.arg_md(Arg.bias), bias.ctypes.data, bias),
                                  Arg.dst: Memory(plan.qkv.dst_md(), qkv.ctypes.data, qkv)},
                       _carve(ws, off[1], off[2]))
    row = 3 * h * d
    sb, si = (row, b * row) if attrs.get("seq_first_in") else (s * row, row)
    ob, oi = (h * d, b * h * d) if attrs.get("seq_first_out") else (s * h * d, h * d)
    params = _CoreParams(qkv=qkv.ctypes.data, sb=sb, si=si, B=b, S=s, H=h, D=d,
                         scale=LN2 if attrs.get("base2") else 1.0,
                         nan_guard=int(bool(attrs.get("nan_guard"))), out=y.ctypes.data,
                         ob=ob, oi=oi, scratch=ws.ctypes.data + off[2], threads=1)
    if mask is not None:
        strides = np.broadcast_to(mask, (b, h, s, s)).strides
        params.mask = mask.ctypes.data
        params.mb, params.mh, params.mi, params.mj = (st // mask.itemsize for st in strides)
    address = ctypes.addressof(params)
    keep = (qkv, ws, x, w, bias, y, mask, params)      # what the pointers point into

    def run():
        matmul_step()
        _size_team(params, plan.core_threads)
        fn(address)
    run.keep = keep
    return run

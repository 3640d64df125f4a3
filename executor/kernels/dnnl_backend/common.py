"""What every oneDNN kernel shares: descriptors of device arrays, the numpy twin it falls
back to, primitive descriptors made once, and binding.

A kernel of this backend makes its primitive descriptor from the operands' shapes and
attributes (:func:`cached_pd`: once per distinct request in a process, so a compile's
tiling and the load that follows share it), with a **user scratchpad**: the scratch
memory is the task's workspace, planned by the compiler from the descriptor's size
(the tiling's ``workspace``).  Where oneDNN has no implementation for a request, or the
kernel does not cover a use of its op, the *numpy twin* runs (the numpy backend's
kernel for the same op and opset range), on the same device memory; the tiling records
which (``backend``).
"""
from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from typing import Callable, Optional

import ml_dtypes
import numpy as np

from aircc.executor.device import threads
from aircc.executor.device.prepared import prepared_array
from aircc.executor.kernels.dnnl.attr import Eltwise
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.library import (DnnlError, DnnlUnimplemented, set_threads,
                                                 using_threads)
from aircc.executor.kernels.dnnl.memory import Memory, MemoryDesc
from aircc.executor.kernels.dnnl.ops import reorder
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.formats.alignment import align_up
from aircc.ops import KernelImpl, TensorType, kernel_backend
from aircc.ops.layout import adapt_kernel, to_first
from aircc.ops.precision import COMPUTE_DTYPE

#: Primitive descriptors kept per process (least recently used dropped first).
PD_CACHE_SIZE = 1024

_pds: "OrderedDict[tuple, PrimitiveDesc]" = OrderedDict()
_pd_lock = threading.Lock()


class NotForDnnl(Exception):
    """This use of an op is left to the numpy twin (said why, for the tiling)."""


#: Below this much work (floating-point operations; 8 per element for an op that only
#: streams memory) a primitive runs on one thread: waking the OpenMP team costs more.
PARALLEL_WORK = 4e6


def team_size(work: float) -> int:
    """The OpenMP threads a primitive of ``work`` operations runs with."""
    return threads.threads() if work >= PARALLEL_WORK else 1


def cached_pd(key: tuple, make: Callable[[], PrimitiveDesc], work: float,
              team: int | None = None) -> PrimitiveDesc:
    """The primitive descriptor for ``key``, made by ``make()`` the first time, with the
    thread count it will run with (implementations split their work when made and keep
    that count): all of aircc's, or one for a small one (:func:`team_size` of ``work``),
    or ``team``.  ``pd.remake(n)`` gives the same primitive for a team of ``n``."""
    n = team_size(work) if team is None else team
    base, key = key, key + (n,)
    with _pd_lock:
        pd = _pds.get(key)
        if pd is not None:
            _pds.move_to_end(key)
            return pd
    with using_threads(n):
        pd = make()
    pd.team = n
    pd.remake = lambda m: cached_pd(base, make, work, m)
    with _pd_lock:
        _pds[key] = pd
        while len(_pds) > PD_CACHE_SIZE:
            _pds.popitem(last=False)
    return pd


def logical_md(dtype, shape: tuple, channels_last: bool) -> MemoryDesc:
    """The plain descriptor of a dense array of ``shape`` seen with the op's (channels-first)
    dims: a channels-last array ``(N, *S, C)`` is dims ``(N, C, *S)`` with NHWC strides."""
    dims = tuple(int(d) for d in shape)
    strides = [0] * len(dims)
    step = 1
    for i in range(len(dims) - 1, -1, -1):
        strides[i] = step
        step *= max(dims[i], 1)
    if channels_last and len(dims) >= 3:
        return MemoryDesc.from_strides(to_first(dims), dtype, to_first(tuple(strides)))
    return MemoryDesc.from_strides(dims, dtype, strides)


def array_md(array: np.ndarray, channels_last: bool = False) -> MemoryDesc:
    """:func:`logical_md` of a device array, which must be dense (C-contiguous)."""
    if not array.flags.c_contiguous:
        raise NotForDnnl(f"an operand of shape {array.shape} is not dense")
    return logical_md(array.dtype, array.shape, channels_last)


def act(array: np.ndarray, channels_last: bool = False) -> Memory:
    """A device array as an activation operand: its memory seen with the op's dims (a
    channels-last array is bound as NHWC strides over (N, C, *S), never by its shape)."""
    return storage(array, array_md(array, channels_last))


def storage(array: np.ndarray, md: MemoryDesc) -> Memory:
    """Memory of descriptor ``md`` over a dense array's bytes (whatever its shape says)."""
    return Memory.of(array.reshape(-1), md)


def reordered_constant(src: Memory, want: MemoryDesc, owner: np.ndarray, prepared) -> Memory:
    """A constant weight (``src``, over ``owner``'s bytes) reordered once into the layout
    ``want``, in the model's prepared device memory (:func:`~aircc.executor.device.
    prepared.prepared_array`, shared by every task bound to the same weight and layout):
    Memory of the copy.  The reorder runs on one thread (see :func:`worker_cpus`)."""

    def fill(out: np.ndarray) -> None:
        with using_threads(1):
            reorder(src.md, want).bind({Arg.src: src, Arg.dst: storage(out, want)})()

    key = ("dnnl-weights", owner.ctypes.data, owner.shape, owner.strides, owner.dtype.str,
           repr(want))
    return storage(prepared_array(prepared, key, (want.size,), np.uint8, fill), want)


#: The type a ``compute_dtype`` bfloat16 kernel reads its activation and weights in.
BF16 = np.dtype(ml_dtypes.bfloat16)


def convert_to_bf16(pd: PrimitiveDesc, src: MemoryDesc) -> None:
    """Give a bfloat16 primitive ``pd`` the reorder that converts its float32 activation
    (of descriptor ``src``) into the head of its workspace (``pd.to_bf16``), once."""
    if not hasattr(pd, "to_bf16"):
        pd.to_bf16 = reorder(src, pd.src_md())
        pd.to_bf16.team = pd.team
        pd.workspace = align_up(pd.src_md().size) + pd.scratchpad_size


def bf16_source(pd: PrimitiveDesc, src: Memory, ws: np.ndarray | None):
    """(the call converting ``src`` to bfloat16, or None, Memory of the activation the
    primitive reads, the workspace left for it): ``src`` itself, or, where ``pd`` has a
    ``to_bf16``, its copy in the head of the workspace (a buffer of its own where the plan
    gave less)."""
    if getattr(pd, "to_bf16", None) is None:
        return None, src, ws
    md = pd.src_md()
    if ws is None or ws.nbytes < pd.workspace:
        ws = np.empty(pd.workspace, np.uint8)
    copy = storage(ws[:md.size], md)
    return bind(pd.to_bf16, {Arg.src: src, Arg.dst: copy}, None), copy, ws[align_up(md.size):]


def type_md(t: TensorType, channels_last: bool = False) -> MemoryDesc:
    return logical_md(np.dtype(t.dtype), t.shape, channels_last)


@functools.lru_cache(maxsize=None)
def numpy_twin(op: str, since: int, domain: str = "") -> KernelImpl:
    """The numpy backend's kernel for ``op`` at opset ``since``."""
    return kernel_backend("numpy").impl(op, since, domain)


def twin_tiling(op: str, since: int, domain: str, types: list, attrs: dict, target,
                why: str) -> dict:
    """The numpy twin's tiling, marked as such (``backend: numpy`` and why)."""
    attrs = {k: v for k, v in attrs.items() if k not in ("fused_activation", COMPUTE_DTYPE)}
    twin = adapt_kernel(numpy_twin(op, since, domain), attrs)
    return {**twin.tile(types, attrs, target), "backend": "numpy", "why": why}


def twin_prepare(op: str, since: int, domain: str, ins, outs, attrs, tiling, ws, constant,
                 prepared):
    """The numpy twin bound to the operands (its tiling made here when the compile chose
    oneDNN but this machine's library refuses the request), followed by the fused
    activation numpy's kernels do not run themselves."""
    after = numpy_activation(attrs, outs)
    if after is not None:
        attrs = {k: v for k, v in attrs.items() if k != "fused_activation"}
        run = twin_prepare(op, since, domain, ins, outs, attrs, tiling, ws, constant, prepared)

        def with_activation():
            run()
            after()
        return with_activation
    attrs = {k: v for k, v in attrs.items() if k != COMPUTE_DTYPE}   # numpy's: float32
    twin = adapt_kernel(numpy_twin(op, since, domain), attrs)
    if tiling.get("backend") != "numpy":
        from aircc.ops import resolve_target
        types = [None if x is None else TensorType.of(x) for x in ins]
        tiling = twin.tile(types, attrs, resolve_target(None))
        need = int(tiling.get("workspace", 0))
        if need and (ws is None or ws.nbytes < need):
            ws = np.empty(need, np.uint8)
    bound = twin.prepare(ins, outs, attrs, tiling, ws, constant, prepared=prepared) \
        if twin.prepare is not None else None
    if bound is not None:
        return bound
    kernel = twin.kernel
    return lambda: kernel(ins, outs, attrs, tiling, ws)


#: ``fused_activation`` (op, its attributes) -> oneDNN eltwise (algorithm, alpha, beta).
ACTIVATIONS = {
    "Clip": lambda a: ("clip_v2", a["min"], a["max"]),
    "HardSwish": lambda a: ("hardswish", 1.0 / 6.0, 0.5),
    "Sigmoid": lambda a: ("logistic", 0.0, 0.0),
    "Tanh": lambda a: ("tanh", 0.0, 0.0),
    "LeakyRelu": lambda a: ("relu", a["alpha"], 0.0),
    "HardSigmoid": lambda a: ("hardsigmoid", a["alpha"], a["beta"]),
    "Elu": lambda a: ("elu", a["alpha"], 0.0),
    "Gelu": lambda a: ("gelu_tanh" if a["approximate"] == "tanh" else "gelu_erf", 0.0, 0.0),
}
#: The opset each activation's numpy kernel is looked up at (a Clip's bounds as attributes).
ACTIVATION_SINCE = {"Clip": 6, "HardSwish": 14, "Gelu": 20}


def unfaithful(attrs: dict) -> bool:
    """Does the ``fused_activation`` post-op differ from ONNX on NaN or an infinity?  Its
    JIT takes NaN to a bound in ``clip_v2``, ``hardsigmoid`` and a ``relu`` of slope 0
    (``vmaxps`` / ``vminps``); ``gelu_erf`` makes NaN of +inf.  Finite operands that cannot
    overflow make none of these (:func:`~.nan.relu_guard`), so the post-op runs there;
    elsewhere numpy's kernel, after the product (``keep_nan``)."""
    act = attrs.get("fused_activation")
    if not act:
        return False
    a = act["attrs"]
    return act["op"] in ("Clip", "HardSigmoid") or (act["op"] == "LeakyRelu" and not a["alpha"]) \
        or (act["op"] == "Gelu" and a["approximate"] != "tanh")


def activation_post_op(attrs: dict, keep_nan: bool = False) -> list[Eltwise]:
    """The ``fused_activation`` of ``attrs`` as a post-op: none when there is none, or when
    ``keep_nan`` and it is :func:`unfaithful` (:func:`activation_after` then runs it)."""
    act = attrs.get("fused_activation")
    if not act or (keep_nan and unfaithful(attrs)):
        return []
    alg, alpha, beta = ACTIVATIONS[act["op"]](act["attrs"])
    return [Eltwise(alg, float(alpha), float(beta))]


def activation_after(attrs: dict, outs: list, keep_nan: bool = False):
    """A call running the ``fused_activation`` that no post-op ran (``keep_nan`` and
    :func:`unfaithful`: numpy's kernel, on the first output in place), or None."""
    if not (keep_nan and unfaithful(attrs)):
        return None
    return numpy_activation(attrs, outs)


def then(*calls):
    """One call making ``calls`` in order (those that are None left out), its ``bound`` the
    first one's that has one (the bound primitive)."""
    calls = [c for c in calls if c is not None]
    if len(calls) == 1:
        return calls[0]

    def each():
        for call in calls:
            call()
    each.bound = next((c.bound for c in calls if hasattr(c, "bound")), None)  # the primitive
    return each


def numpy_activation(attrs: dict, outs: list):
    """A call applying ``fused_activation`` to the first output in place with the numpy
    backend's kernel for it, or None."""
    act = attrs.get("fused_activation")
    if not act:
        return None
    impl = numpy_twin(act["op"], ACTIVATION_SINCE.get(act["op"], 1))
    y, params = outs[0], dict(act["attrs"])
    tiling = impl.tile([TensorType.of(y)], params, None)
    return lambda: impl.kernel([y], [y], params, tiling, None)


_tls = threading.local()


def worker_cpus() -> int:
    """How large the calling thread's OpenMP team may be: in a device's stream worker,
    the CPUs it may run on (a stream worker of a pinned device may have fewer than the
    process) less those other processes keep busy (:func:`~aircc.executor.device.threads.
    usable_cpus`); one anywhere else.  libgomp keeps a team per thread that ever ran a
    parallel region; once its threads outnumber the CPUs, every team waits the throttled
    way (a futex wake per region: SqueezeNet 4.0 -> 5.2 ms).  So constant folding, a
    loading thread, a test or a profiler calling kernels directly never forms a team."""
    n = getattr(_tls, "cpus", None)
    if n is None:
        if not threads.is_device_worker():
            n = 1
        elif hasattr(os, "sched_getaffinity"):
            n = len(os.sched_getaffinity(0))
        else:
            n = threads.threads()
        _tls.cpus = n
    return n if n == 1 else min(n, threads.usable_cpus())


def _bind_with_scratchpad(pd: PrimitiveDesc, args: dict, ws: Optional[np.ndarray]):
    need = pd.scratchpad_size
    if need:
        if ws is None or ws.nbytes < need:
            ws = np.empty(need, np.uint8)        # a machine whose library wants more
        args = {**args, Arg.scratchpad: ws}
    return pd.bind(args)


def bind(pd: PrimitiveDesc, args: dict, ws: Optional[np.ndarray]):
    """``pd`` bound to ``args`` (arg id -> array), its scratchpad in ``ws``.  A call from a
    thread whose team must be smaller than the one ``pd`` was made for (:func:`worker_cpus`)
    runs a twin made for that size, bound to the same buffers, when the twin lays out
    every operand the same way (else ``pd`` itself); each call sets the calling thread's
    OpenMP count first when it differs."""
    bound = _bind_with_scratchpad(pd, args, ws)
    team = getattr(pd, "team", threads.threads())
    smaller: dict[int, object] = {}
    state = _tls

    def for_team(n: int):
        if n >= team or not hasattr(pd, "remake"):
            return bound
        twin = smaller.get(n)
        if twin is None:
            other = pd.remake(n)
            same = all(other.arg_md(a) == pd.arg_md(a) for a in args if a != Arg.scratchpad)
            twin = smaller[n] = _bind_with_scratchpad(other, args, ws) if same else bound
        return twin

    if team == 1:                       # a one-thread primitive: nothing to choose
        def run():
            if getattr(state, "team", None) != 1:
                set_threads(1)
                state.team = 1
            bound()
        run.bound = bound
        return run

    def run():
        n = min(team, worker_cpus())
        if getattr(state, "team", None) != n:
            set_threads(n)
            state.team = n
            if n > 1:
                threads.team_formed()
        if n > 1:
            threads.parallel_calls += 1
        (bound if n == team else for_team(n))()
    run.bound = bound
    return run


def dnnl_or_twin(op: str, since: int, domain: str = ""):
    """Class decorator: give a kernel class whose ``plan(types, attrs)`` makes its
    primitive descriptor (raising :class:`NotForDnnl` or :class:`DnnlUnimplemented` for a
    use it leaves to numpy; a ``pd.workspace`` it sets is the workspace to plan, when
    ``bind_to`` may bind another primitive than ``pd``) and whose ``bind_to(pd, ins,
    outs, attrs, ws, constant, prepared)`` binds it, the ``tiling``, ``prepare`` and
    ``kernel`` hooks of the backend.
    A ``fused_*`` attribute the class does not list in ``FUSED`` leaves the node to numpy."""

    def wrap(cls):
        handled = frozenset(getattr(cls, "FUSED", ()))

        def plan(types, attrs):
            fused = {k for k in attrs if k.startswith("fused_")} - handled
            if fused:
                raise NotForDnnl(f"fused {', '.join(sorted(fused))}")
            if any(t is not None and not t.is_static for t in types):
                raise NotForDnnl("shapes known only at run time")
            pd = cls.plan(types, attrs)
            if pd.is_reference:
                raise NotForDnnl(f"oneDNN has only its reference implementation ({pd.impl})")
            return pd

        def tiling(types, attrs, target):
            try:
                pd = plan(types, attrs)
            except (NotForDnnl, DnnlError) as e:
                return twin_tiling(op, since, domain, types, attrs, target, str(e))
            return {"backend": "dnnl", "workspace": getattr(pd, "workspace", pd.scratchpad_size),
                    "impl": pd.impl}

        def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
            if tiling.get("backend") == "dnnl":
                types = [None if x is None else TensorType.of(x) for x in ins]
                try:
                    pd = plan(types, attrs)
                    return cls.bind_to(pd, ins, outs, attrs, ws, constant, prepared)
                except (NotForDnnl, DnnlUnimplemented):
                    pass
            return twin_prepare(op, since, domain, ins, outs, attrs, tiling, ws, constant,
                                prepared)

        def kernel(ins, outs, attrs, tiling, ws):
            prepare(ins, outs, attrs, tiling, ws, [False] * len(ins), None)()

        cls.tiling, cls.prepare, cls.kernel = (staticmethod(tiling), staticmethod(prepare),
                                               staticmethod(kernel))
        return cls
    return wrap

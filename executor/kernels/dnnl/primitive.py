"""Primitive descriptors, primitives, and :class:`Bound` executables.

A :class:`PrimitiveDesc` is the implementation oneDNN picked for a request (the
constructors of :mod:`.ops` make them): ask it for the layouts it wants
(:meth:`~PrimitiveDesc.src_md`, :meth:`~PrimitiveDesc.weights_md`...), the scratchpad
it needs, the implementation's name (``brg:avx512_core``, ``jit:uni``, ``ref:any``...).
:meth:`PrimitiveDesc.bind` makes the primitive and binds its arguments once; the
:class:`Bound` it returns executes on the calling thread's stream when called.

A primitive must not run on two threads at once (its state, and a library-mode
scratchpad, are its own); two Bound over the same primitive desc are two primitives
only when made from two :meth:`~PrimitiveDesc.bind` calls.
"""
from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Union

import numpy as np

from .capi import ExecArg
from .enums import Arg, Query, Status, post_op_arg
from .library import DnnlError, error, lib, max_threads, thread_state
from .memory import Memory, MemoryDesc, md_of, same_layout

Argument = Union[Memory, np.ndarray, int]
"""What :meth:`PrimitiveDesc.bind` takes for an argument: a :class:`Memory`, a numpy
array, or a raw address (device memory) laid out as the primitive wants."""

_FIXED_ARGS = (Arg.src_0, Arg.src_1, Arg.src_2, Arg.src_3, Arg.weights_0, Arg.weights_1,
               Arg.weights_2, Arg.weights_3, Arg.bias, Arg.mean, Arg.variance, Arg.scale,
               Arg.shift, Arg.workspace, Arg.scratchpad, Arg.dst_0, Arg.dst_1, Arg.dst_2)
"""The argument ids :meth:`PrimitiveDesc.args` asks about (besides multiple sources and
post-ops' inputs): the RNN primitives' states and peephole / projection weights too."""


def arg_name(arg: int) -> str:
    """A readable name of an execution-argument id."""
    base = int(Arg.attr_multiple_post_op_base)
    if arg >= base:
        return f"post_op_arg({arg // base - 1}, {arg_name(arg % base)})"
    if Arg.multiple_src <= arg < Arg.multiple_dst:
        return f"multiple_src+{arg - Arg.multiple_src}"
    try:
        return Arg(arg).name
    except ValueError:
        return str(arg)


class PrimitiveDesc:
    """A primitive descriptor (owns its ``dnnl_primitive_desc_t``)."""

    def __init__(self, handle: ctypes.c_void_p, what: str, attr=None):
        self.handle = handle
        self.what = what
        """The request, for messages (e.g. ``convolution 1x3x8x8 f32 nhwc -> ...``)."""
        self.attr = attr
        self.threads = max_threads()
        """The OpenMP count in force on the thread that made it: the count the
        implementation split its work for, and the one its primitives are made under."""

    @classmethod
    def create(cls, function: str, args: tuple, what: str, attr=None) -> PrimitiveDesc:
        """Call ``dnnl_<kind>_primitive_desc_create`` with ``args`` (after the output
        handle); a failure names ``what`` was asked."""
        handle = ctypes.c_void_p()
        try:
            getattr(lib().dll, function)(ctypes.byref(handle), *args)
        except DnnlError as exc:
            raise error(exc.status or 0, function, what) from None
        return cls(handle, what, attr)

    def __del__(self):
        if self.handle:
            try:
                lib().dll.dnnl_primitive_desc_destroy(self.handle)
            except Exception:           # interpreter shutting down
                pass

    # ------------------------------------------------------------ queries
    def md(self, query: Query, index: int = 0) -> MemoryDesc | None:
        """The descriptor a query returns (None where the primitive has none)."""
        return MemoryDesc.borrowed(lib().dll.dnnl_primitive_desc_query_md(self.handle, query,
                                                                          index))

    def src_md(self, index: int = 0) -> MemoryDesc | None:
        return self.md(Query.src_md, index)

    def weights_md(self, index: int = 0) -> MemoryDesc | None:
        """Weights (index 0) or bias (index 1) as the implementation wants them."""
        return self.md(Query.weights_md, index)

    def dst_md(self, index: int = 0) -> MemoryDesc | None:
        return self.md(Query.dst_md, index)

    def scratchpad_md(self) -> MemoryDesc | None:
        return self.md(Query.scratchpad_md)

    def arg_md(self, arg: int) -> MemoryDesc | None:
        """The descriptor of execution argument ``arg`` (None: not an argument of it)."""
        return self.md(Query.exec_arg_md, int(arg))

    @property
    def scratchpad_size(self) -> int:
        """Bytes of scratchpad the caller binds (0 in library scratchpad mode)."""
        md = self.scratchpad_md()
        return md.size if md is not None else 0

    @property
    def impl(self) -> str:
        """The implementation's name, e.g. ``brg:avx512_core`` (``ref:any`` is the slow
        reference code)."""
        out = ctypes.c_char_p()
        lib().dll.dnnl_primitive_desc_query(self.handle, Query.impl_info_str, 0,
                                            ctypes.byref(out))
        return out.value.decode() if out.value else ""

    @property
    def is_reference(self) -> bool:
        """Whether oneDNN fell back to a reference (unoptimized, often very slow) kernel."""
        return self.impl.startswith("ref")

    def next_impl(self) -> bool:
        """Move to the next implementation that fits the request; False (and unchanged)
        when this was the last."""
        try:
            lib().dll.dnnl_primitive_desc_next_impl(self.handle)
        except DnnlError as exc:
            if exc.status == Status.last_impl_reached:
                return False
            raise
        return True

    def args(self) -> dict[int, MemoryDesc]:
        """Every execution argument the primitive takes -> its descriptor."""
        candidates = list(_FIXED_ARGS)
        n_in = lib().dll.dnnl_primitive_desc_query_s32(self.handle, Query.num_of_inputs_s32, 0)
        candidates += [Arg.multiple_src + i for i in range(max(n_in, 0))]
        for i, _ in (self.attr.binary_inputs() if self.attr is not None else ()):
            candidates.append(post_op_arg(i))
        found = {}
        for arg in candidates:
            md = self.arg_md(arg)
            if md is not None:
                found[int(arg)] = md
        return found

    # ------------------------------------------------------------ executables
    def primitive(self) -> Primitive:
        """A new primitive (JIT-compiled now; oneDNN's primitive cache shares equal ones),
        made under the OpenMP count this descriptor was made under, whatever the calling
        thread's count: the cache keys a primitive on the count in force when it is made,
        not on the one its descriptor split the work for, so a descriptor made for two
        threads and turned into a primitive where the count is one would be cached under
        one, and a later descriptor made for one thread would get that two-thread
        primitive back (a stream worker's team of one then ran every convolution on two
        threads beside a busy neighbour: ResNet-50 90 ms instead of 65)."""
        return Primitive(self)

    def bind(self, args: Mapping[int, Argument], threads: int | None = None) -> Bound:
        """A primitive with its arguments bound (arg id -> Memory, array or address),
        checked against :meth:`args`: none missing, none extra, layouts that match.
        ``threads``: the OpenMP count it runs with (see :mod:`.library`); None, the
        executing thread's."""
        wanted = self.args()
        missing = [arg_name(a) for a in wanted if a not in args]
        extra = [arg_name(a) for a in args if int(a) not in wanted]
        if missing or extra:
            raise DnnlError(f"{self.what}: " + "; ".join(
                ([f"missing arguments {', '.join(missing)}"] if missing else [])
                + ([f"arguments it does not take: {', '.join(extra)}"] if extra else [])))
        memories = {int(a): self._memory(int(a), value, wanted[int(a)])
                    for a, value in args.items()}
        return Bound(self.primitive(), memories, threads)

    def _memory(self, arg: int, value: Argument, want: MemoryDesc) -> Memory:
        """``value`` as a memory of descriptor ``want`` (a copy of the descriptor wherever
        oneDNN would compare them)."""
        if isinstance(value, Memory):
            if not same_layout(value.md, want):
                raise DnnlError(f"{self.what}: {arg_name(arg)} is {value.md}, the primitive "
                                f"wants {want}")
            return value if value.md == want else value.view(want)
        if not isinstance(value, np.ndarray):
            return Memory(want, int(value))
        if want.is_plain and value.shape == want.dims:
            given = md_of(value)
            if not same_layout(given, want):
                raise DnnlError(f"{self.what}: {arg_name(arg)} is {given}, the primitive "
                                f"wants {want}")
        elif not (value.flags.c_contiguous and value.nbytes >= want.size):
            # any array of another shape is storage (e.g. a flat device-memory view)
            raise DnnlError(f"{self.what}: {arg_name(arg)} wants {want} ({want.size} bytes); "
                            f"an array of shape {value.shape} cannot hold it")
        return Memory(want, value.ctypes.data, value)

    def __repr__(self) -> str:
        return f"PrimitiveDesc({self.what}; impl {self.impl})"


class Primitive:
    """A primitive (owns its ``dnnl_primitive_t``; keeps its descriptor)."""

    def __init__(self, pd: PrimitiveDesc):
        self.pd = pd
        self.handle = ctypes.c_void_p()
        gomp = lib().gomp
        now = gomp.omp_get_max_threads()
        if now != pd.threads:               # see PrimitiveDesc.primitive
            gomp.omp_set_num_threads(pd.threads)
        try:
            lib().dll.dnnl_primitive_create(ctypes.byref(self.handle), pd.handle)
        except DnnlError as exc:
            raise error(exc.status or 0, "dnnl_primitive_create", pd.what) from None
        finally:
            if now != pd.threads:
                gomp.omp_set_num_threads(now)

    def __del__(self):
        if self.handle:
            try:
                lib().dll.dnnl_primitive_destroy(self.handle)
            except Exception:           # interpreter shutting down
                pass


class Bound:
    """A primitive and its arguments, bound once: ``bound()`` executes it on the
    calling thread's stream.  On the CPU engine the execution is synchronous (oneDNN's
    CPU stream's ``wait`` returns at once with the OpenMP runtime), so the call returns
    when the primitive is done and no ``dnnl_stream_wait`` follows (0.2 us a call)."""

    __slots__ = ("primitive", "memories", "threads", "_args", "_n", "_execute", "_handle")

    def __init__(self, primitive: Primitive, memories: Mapping[int, Memory],
                 threads: int | None = None):
        self.primitive = primitive
        self.memories = dict(memories)
        self.threads = threads
        self._n = len(self.memories)
        self._args = (ExecArg * max(self._n, 1))(
            *[ExecArg(arg, m.handle.value) for arg, m in self.memories.items()])
        hot = lib().hot
        self._execute = hot["dnnl_primitive_execute"]
        self._handle = primitive.handle

    def __call__(self) -> None:
        state = thread_state()
        if self.threads is not None and state.threads != self.threads:
            state.set_threads(self.threads)
        s = state.stream
        status = self._execute(self._handle, s, self._n, self._args)
        if status:
            raise error(status, "dnnl_primitive_execute", self.primitive.pd.what)

    def rebind(self, arg: int, target: np.ndarray | int) -> None:
        """Point argument ``arg`` at another buffer (about 1.5 us: for buffers that move
        between calls; bind once where they stay)."""
        memory = self.memories.get(int(arg))
        if memory is None:
            raise KeyError(f"{self.primitive.pd.what}: no argument {arg_name(arg)} bound")
        memory.bind(target)

    def __repr__(self) -> str:
        args = ", ".join(arg_name(a) for a in self.memories)
        return f"Bound({self.primitive.pd.what}; {args})"

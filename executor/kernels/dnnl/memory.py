"""Memory descriptors and memory objects over numpy arrays and raw device pointers.

A :class:`MemoryDesc` describes a tensor's dims, element type and layout: a format tag
(``nchw``, ``nhwc``, ``any`` to let a primitive choose), explicit strides (transposed or
batched views, e.g. attention's heads), or whatever a primitive descriptor reports
(possibly blocked, e.g. ``nChw16c`` weights).  :func:`md_of` describes a numpy array
as it lies in memory.  A :class:`Memory` binds a descriptor to a data pointer: a numpy
array's (kept alive with it) or a raw address in device memory.
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Union

import numpy as np

from .capi import DIMS
from .enums import MAX_NDIMS, DataType, FormatKind, FormatTag, Query
from .library import DnnlError, lib

try:
    from ml_dtypes import bfloat16 as _bfloat16  # onnx depends on ml_dtypes
except ImportError:                                 # pragma: no cover
    _bfloat16 = None

Tag = Union[FormatTag, str]

_TO_DNNL = {np.dtype(np.float32): DataType.f32, np.dtype(np.float16): DataType.f16,
            np.dtype(np.float64): DataType.f64, np.dtype(np.int32): DataType.s32,
            np.dtype(np.int8): DataType.s8, np.dtype(np.uint8): DataType.u8,
            np.dtype(np.bool_): DataType.boolean}
if _bfloat16 is not None:
    _TO_DNNL[np.dtype(_bfloat16)] = DataType.bf16
_TO_NUMPY = {dt: dtype for dtype, dt in _TO_DNNL.items()}


def data_type(dtype) -> DataType:
    """oneDNN's data type for a numpy dtype (ValueError for one it lacks)."""
    if isinstance(dtype, DataType):
        return dtype
    dt = _TO_DNNL.get(np.dtype(dtype))
    if dt is None:
        raise ValueError(f"oneDNN has no data type for numpy {np.dtype(dtype)} "
                         f"(it has {', '.join(sorted(str(d) for d in _TO_DNNL))})")
    return dt


def numpy_dtype(dt: int) -> np.dtype:
    """The numpy dtype of a oneDNN data type."""
    return _TO_NUMPY[DataType(dt)]


def format_tag(tag: Tag) -> FormatTag:
    """A :class:`FormatTag` from itself or its name (ValueError for an unknown name)."""
    if isinstance(tag, FormatTag):
        return tag
    try:
        return FormatTag[tag]
    except KeyError:
        raise ValueError(f"unknown oneDNN format tag {tag!r} (plain tags like 'abcd', "
                         f"'nchw', 'nhwc', 'acdb' or 'any')") from None


def dims_array(values: Sequence[int], what: str = "dims") -> DIMS:
    """A ``dnnl_dims_t`` holding ``values`` (ValueError past :data:`MAX_NDIMS`)."""
    values = [int(v) for v in values]
    if len(values) > MAX_NDIMS:
        raise ValueError(f"{what} {values}: oneDNN takes at most {MAX_NDIMS} dimensions")
    return DIMS(*values)


class MemoryDesc:
    """A memory descriptor (owns its ``dnnl_memory_desc_t``)."""

    __slots__ = ("handle", "__weakref__")

    def __init__(self, handle: ctypes.c_void_p):
        self.handle = handle

    def __del__(self):
        if self.handle:
            try:
                lib().dll.dnnl_memory_desc_destroy(self.handle)
            except Exception:           # interpreter shutting down
                pass

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_tag(cls, dims: Sequence[int], dtype, tag: Tag = "any") -> MemoryDesc:
        """Dims, element type (numpy dtype or :class:`DataType`) and a format tag."""
        h = ctypes.c_void_p()
        tag = format_tag(tag)
        dt = data_type(dtype)
        try:
            lib().dll.dnnl_memory_desc_create_with_tag(ctypes.byref(h), len(dims),
                                                       dims_array(dims), dt, tag)
        except DnnlError as exc:
            exc.args = (f"{exc}: memory desc {tuple(dims)} {dt.name} {tag.name}",)
            raise
        return cls(h)

    @classmethod
    def from_strides(cls, dims: Sequence[int], dtype, strides: Sequence[int]) -> MemoryDesc:
        """Dims, element type and strides in *elements* (not bytes)."""
        if len(strides) != len(dims):
            raise ValueError(f"memory desc {tuple(dims)}: {len(strides)} strides {tuple(strides)}")
        h = ctypes.c_void_p()
        dt = data_type(dtype)
        try:
            lib().dll.dnnl_memory_desc_create_with_strides(
                ctypes.byref(h), len(dims), dims_array(dims), dt, dims_array(strides, "strides"))
        except DnnlError as exc:
            exc.args = (f"{exc}: memory desc {tuple(dims)} {dt.name} strides {tuple(strides)}",)
            raise
        return cls(h)

    @classmethod
    def borrowed(cls, handle: int | None) -> MemoryDesc | None:
        """A copy of a descriptor owned by someone else (a primitive descriptor);
        None for NULL or the zero descriptor (an argument the primitive does not take)."""
        if not handle:
            return None
        h = ctypes.c_void_p()
        lib().dll.dnnl_memory_desc_clone(ctypes.byref(h), ctypes.c_void_p(handle))
        md = cls(h)
        return md if md.ndims else None

    # ------------------------------------------------------------ derived
    def reshape(self, dims: Sequence[int]) -> MemoryDesc:
        """The same memory seen with other dims (same element count)."""
        h = ctypes.c_void_p()
        lib().dll.dnnl_memory_desc_reshape(ctypes.byref(h), self.handle, len(dims),
                                           dims_array(dims))
        return MemoryDesc(h)

    def permute_axes(self, permutation: Sequence[int]) -> MemoryDesc:
        """The same memory with logical axis ``i`` renamed ``permutation[i]``."""
        h = ctypes.c_void_p()
        perm = (ctypes.c_int * len(permutation))(*permutation)
        lib().dll.dnnl_memory_desc_permute_axes(ctypes.byref(h), self.handle, perm)
        return MemoryDesc(h)

    def submemory(self, dims: Sequence[int], offsets: Sequence[int]) -> MemoryDesc:
        """A block of ``dims`` at ``offsets`` inside this memory."""
        h = ctypes.c_void_p()
        lib().dll.dnnl_memory_desc_create_submemory(ctypes.byref(h), self.handle,
                                                    dims_array(dims), dims_array(offsets))
        return MemoryDesc(h)

    # ------------------------------------------------------------ queries
    def _query_int(self, what: Query) -> int:
        out = ctypes.c_int()
        lib().dll.dnnl_memory_desc_query(self.handle, what, ctypes.byref(out))
        return out.value

    def _query_dims(self, what: Query) -> tuple[int, ...]:
        out = ctypes.POINTER(DIMS)()
        lib().dll.dnnl_memory_desc_query(self.handle, what, ctypes.byref(out))
        return tuple(out.contents[:self.ndims])

    @property
    def ndims(self) -> int:
        return self._query_int(Query.ndims_s32)

    @property
    def dims(self) -> tuple[int, ...]:
        return self._query_dims(Query.dims)

    @property
    def data_type(self) -> DataType:
        return DataType(self._query_int(Query.data_type))

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.data_type)

    @property
    def format_kind(self) -> FormatKind:
        return FormatKind(self._query_int(Query.format_kind))

    @property
    def strides(self) -> tuple[int, ...] | None:
        """Strides in elements of the outer blocks (None unless the format is blocked)."""
        return self._query_dims(Query.strides) if self.format_kind == FormatKind.blocked \
            else None

    @property
    def inner_blocks(self) -> tuple[tuple[int, int], ...]:
        """(logical dim, block size) of each inner block, outermost first; () for a
        plain (strided) layout."""
        if self.format_kind != FormatKind.blocked:
            return ()
        n = self._query_int(Query.inner_nblks_s32)
        if not n:
            return ()
        blks, idxs = self._query_dims(Query.inner_blks), self._query_dims(Query.inner_idxs)
        return tuple(zip(idxs[:n], blks[:n]))

    @property
    def padded_dims(self) -> tuple[int, ...]:
        return self._query_dims(Query.padded_dims)

    @property
    def size(self) -> int:
        """Bytes the memory takes (padding of blocked layouts included)."""
        return lib().dll.dnnl_memory_desc_get_size(self.handle)

    @property
    def is_plain(self) -> bool:
        """A strided layout without inner blocks (one numpy views exactly)."""
        return self.format_kind == FormatKind.blocked and not self.inner_blocks

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemoryDesc):
            return NotImplemented
        return bool(lib().dll.dnnl_memory_desc_equal(self.handle, other.handle))

    __hash__ = None      # type: ignore[assignment]

    def __repr__(self) -> str:
        dims = "x".join(map(str, self.dims))
        kind = self.format_kind
        if kind != FormatKind.blocked:
            return f"MemoryDesc({dims} {self.data_type.name} {kind.name})"
        blocks = "".join(f"{b}{'abcdefghijkl'[d]}" for d, b in self.inner_blocks)
        return (f"MemoryDesc({dims} {self.data_type.name} strides={self.strides}"
                + (f" blocks={blocks}" if blocks else "") + ")")


def md_of(array: np.ndarray) -> MemoryDesc:
    """The descriptor of a numpy array (or view) as it lies in memory (a 0-d array is
    1-d); ValueError for strides that are negative or not a multiple of the item size."""
    shape, strides = array.shape or (1,), array.strides or (array.itemsize,)
    elements = []
    for n, s in zip(shape, strides):
        if s < 0 or s % array.itemsize:
            raise ValueError(f"array of shape {array.shape} with strides {array.strides}: "
                             f"oneDNN takes non-negative strides in whole elements")
        elements.append(s // array.itemsize)
    return MemoryDesc.from_strides(shape, array.dtype, elements)


def same_layout(a: MemoryDesc, b: MemoryDesc) -> bool:
    """Whether two descriptors lay out the same bytes (equal, or both plain with the
    same dims, type and strides wherever a dim is over 1)."""
    if a == b:
        return True
    if not (a.is_plain and b.is_plain) or a.dims != b.dims or a.data_type != b.data_type:
        return False
    return all(n == 1 or s == t for n, s, t in zip(a.dims, a.strides, b.strides))


def fits(array: np.ndarray, md: MemoryDesc) -> bool:
    """Whether ``md`` may describe the array's memory: the array as it lies (same
    layout), or storage (e.g. a flat view) of at least ``md.size`` bytes."""
    if array.shape == md.dims and md.is_plain and array.dtype == md.dtype:
        return same_layout(md_of(array), md)
    return array.flags.c_contiguous and array.nbytes >= md.size


def span(array: np.ndarray) -> int:
    """Bytes from the array's data pointer to one past its last element."""
    if array.size == 0:
        return 0
    return sum((n - 1) * s for n, s in zip(array.shape, array.strides)) + array.itemsize


class Memory:
    """A memory object: a descriptor bound to a data pointer (owns its
    ``dnnl_memory_t``; keeps the numpy array it points into alive)."""

    __slots__ = ("handle", "md", "_array")

    def __init__(self, md: MemoryDesc, ptr: int | None = None, array: np.ndarray | None = None):
        """Bind ``md`` to the raw address ``ptr`` (None: no buffer yet, bind one with
        :meth:`bind`)."""
        self.md = md
        self._array = array
        self.handle = ctypes.c_void_p()
        lib().dll.dnnl_memory_create(ctypes.byref(self.handle), md.handle, lib().engine,
                                     ctypes.c_void_p(ptr))

    @classmethod
    def of(cls, array: np.ndarray, md: MemoryDesc | None = None) -> Memory:
        """Memory over a numpy array: described as it lies (:func:`md_of`), or as ``md``
        (e.g. a primitive's blocked layout) when the array's bytes hold it."""
        if md is None:
            md = md_of(array)
        elif not fits(array, md):
            raise ValueError(f"an array of shape {array.shape}, strides {array.strides} "
                             f"cannot hold {md} ({md.size} bytes)")
        return cls(md, array.ctypes.data, array)

    def view(self, md: MemoryDesc) -> Memory:
        """Another memory over the same buffer, described by ``md``."""
        return Memory(md, self.ptr, self._array)

    @property
    def ptr(self) -> int:
        out = ctypes.c_void_p()
        lib().dll.dnnl_memory_get_data_handle(self.handle, ctypes.byref(out))
        return out.value or 0

    def bind(self, target: np.ndarray | int) -> None:
        """Point the memory at another buffer (a numpy array, kept alive, or an address);
        about 1.5 us, so bind once where the buffer stays."""
        if isinstance(target, np.ndarray):
            if not fits(target, self.md):
                raise ValueError(f"an array of shape {target.shape}, strides {target.strides} "
                                 f"cannot hold {self.md}")
            self._array, ptr = target, target.ctypes.data
        else:
            self._array, ptr = None, int(target)
        status = lib().hot["dnnl_memory_set_data_handle"](self.handle, ptr)
        if status:
            lib().dll.dnnl_memory_set_data_handle(self.handle, ptr)   # raises, naming it

    def array(self) -> np.ndarray:
        """A numpy view of a plain memory (ValueError for a blocked or opaque layout)."""
        md = self.md
        if not md.is_plain:
            raise ValueError(f"{md} is not a plain layout numpy can view")
        itemsize = md.dtype.itemsize
        buf = (ctypes.c_char * max(md.size, 1)).from_address(self.ptr)
        return np.ndarray(md.dims, md.dtype, buffer=buf,
                          strides=[s * itemsize for s in md.strides])

    def __del__(self):
        if self.handle:
            try:
                lib().dll.dnnl_memory_destroy(self.handle)
            except Exception:           # interpreter shutting down
                pass

    def __repr__(self) -> str:
        return f"Memory({self.md!r} at {self.ptr:#x})"

"""Section payloads as msgpack: numpy arrays as an extension type, strict and bounded decoding.

A payload is plain data (dicts, lists, str, int, float, bool, None, bytes) and
numpy arrays of the stored dtypes; anything else is refused when it is written,
with the path of the first value that cannot be stored.

Decoding is bounded by the section's size (:class:`DecodeLimits`, docs/om-format.md):
msgpack itself refuses a list, a map, a string or a binary longer than its limit before
it allocates it, and nests at most 1024 levels; the reader counts the lists and maps as
they are made, and stops at one empty one per :data:`BYTES_PER_EMPTY` bytes of the section
(an empty map is one byte of the file and 64 of memory) or once they take
:data:`MEMORY_PER_BYTE` bytes of memory per byte of the section.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from aircc.errors import ModelFormatError

from .checks import array_spec, dtype_name

NDARRAY_EXT = 1       # msgpack ExtType code of a packed [dtype, shape, raw bytes] ndarray


def _pack_array(a: np.ndarray) -> msgpack.ExtType:
    name = dtype_name(a.dtype)
    if name is None:
        raise TypeError(f"unsupported type numpy.ndarray of dtype {a.dtype}")
    raw = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
    return msgpack.ExtType(NDARRAY_EXT, msgpack.packb([name, list(a.shape), raw],
                                                      use_bin_type=True))


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return _pack_array(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, int):  # msgpack hands over ints outside [-2**63, 2**64)
        raise TypeError(f"integer {obj} is out of range for msgpack (64 bits)")
    t = type(obj)
    raise TypeError(f"unsupported type {t.__module__}.{t.__qualname__}")


_LEAVES = (type(None), bool, int, float, str, bytes, bytearray, memoryview,
           np.bool_, np.integer, np.floating)


def _find_unsupported(obj: Any, path: str = "") -> str | None:
    """Path of the first value msgpack cannot store (used only to explain an error)."""
    if isinstance(obj, _LEAVES):
        return None
    if isinstance(obj, np.ndarray):
        return None if dtype_name(obj.dtype) else f"{path or '<root>'} ({obj.dtype})"
    if isinstance(obj, (list, tuple, dict)):
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        bad = (_find_unsupported(v, f"{path}[{k!r}]") for k, v in items)
        return next((b for b in bad if b), None)
    return f"{path or '<root>'} ({type(obj).__module__}.{type(obj).__qualname__})"


def encode_payload(name: str, payload: Any) -> bytes:
    """msgpack bytes of one section payload; TypeError naming the section if it cannot."""
    try:
        return msgpack.packb(payload, default=_default, use_bin_type=True, datetime=False)
    except (TypeError, ValueError, OverflowError) as exc:
        where = _find_unsupported(payload)
        at = f" at {where}" if where else ""
        raise TypeError(f"cannot serialise section '{name}'{at}: {exc}") from exc


def _ext_hook(code: int, data: bytes) -> Any:
    if code != NDARRAY_EXT:
        raise ValueError(f"unknown msgpack extension type {code}")
    obj = msgpack.unpackb(data, raw=False, use_list=True)
    if not (isinstance(obj, list) and len(obj) == 3 and isinstance(obj[2], bytes)):
        raise ValueError("malformed ndarray extension (want [dtype, shape, bytes])")
    dtype, shape = array_spec(obj[0], obj[1], len(obj[2]))
    return np.frombuffer(bytearray(obj[2]), dtype).reshape(shape)


#: At most one empty list or map per this many bytes of a section (one byte of the file,
#: some 60 decoded; compiled models have one per hundred bytes or more), and
#: :data:`FREE_CONTAINERS` more.
BYTES_PER_EMPTY = 8
FREE_CONTAINERS = 1024
#: The most memory the lists and maps of a section may take, per byte of it (as
#: ``sys.getsizeof`` counts them, element slots included, and 16 bytes of allocator overhead
#: each), and :data:`FREE_MEMORY` more: compiled models' sections take 7 or less, a tiling's
#: lists of index pairs (three bytes, 88 decoded) 29.
MEMORY_PER_BYTE = 24
FREE_MEMORY = 4 << 20
#: The longest string a section may hold: names, dtypes and kinds are tens of bytes.  The
#: ``model`` section's (its ONNX metadata) are bounded by the section's size only.
MAX_STR_BYTES = 1 << 20


@dataclass(frozen=True)
class DecodeLimits:
    """How much one section may decode to (see the module doc)."""

    empty: int
    """Empty lists and maps."""
    memory: int
    """Bytes all its lists and maps take."""
    array_len: int
    """Elements of one list (or entries of one map)."""
    str_len: int

    @staticmethod
    def of(name: str, nbytes: int, extra_empty: int = 0,
           array_len: int | None = None) -> "DecodeLimits":
        """The limits of section ``name`` of ``nbytes`` bytes; ``extra_empty``: empty lists and
        maps it may hold beyond its share by size; ``array_len``: a tighter bound on a list's
        length than the section's size."""
        return DecodeLimits(nbytes // BYTES_PER_EMPTY + FREE_CONTAINERS + extra_empty,
                            nbytes * MEMORY_PER_BYTE + FREE_MEMORY,
                            nbytes if array_len is None else min(nbytes, array_len),
                            nbytes if name == "model" else min(nbytes, MAX_STR_BYTES))


class _TooMany(ValueError):
    pass


def decode_payload(name: str, data: Any, limits: DecodeLimits | None = None) -> Any:
    """Decode one msgpack section within ``limits`` (default: those of its size);
    ModelFormatError if it is not valid msgpack or exceeds them."""
    n = len(data)
    lim = limits or DecodeLimits.of(name, n)
    empty = memory = 0

    def count(obj: Any) -> Any:
        nonlocal empty, memory
        memory += sys.getsizeof(obj) + 16
        if not obj:
            empty += 1
            if empty > lim.empty:
                raise _TooMany(f"it holds more than {lim.empty} empty lists and maps (at most "
                               f"one per {BYTES_PER_EMPTY} bytes of its {n})")
        if memory > lim.memory:
            raise _TooMany(f"its lists and maps take more than {lim.memory} bytes decoded (at "
                           f"most {MEMORY_PER_BYTE} per byte of its {n})")
        return obj

    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True,
                               ext_hook=_ext_hook, object_hook=count, list_hook=count,
                               max_str_len=lim.str_len, max_bin_len=n, max_ext_len=n,
                               max_array_len=lim.array_len, max_map_len=lim.array_len)
    except _TooMany as exc:
        raise ModelFormatError(f"section '{name}' is too large for its size: {exc}") from None
    except Exception as exc:
        raise ModelFormatError(f"section '{name}' is not valid msgpack: "
                               f"{type(exc).__name__}: {exc}") from exc

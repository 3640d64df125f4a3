"""Section payloads as msgpack: numpy arrays as an extension type, strict decoding.

A payload is plain data (dicts, lists, str, int, float, bool, None, bytes) and
numpy arrays of the stored dtypes; anything else is refused when it is written,
with the path of the first value that cannot be stored.
"""
from __future__ import annotations

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


def decode_payload(name: str, data: Any) -> Any:
    """Decode one msgpack section; ModelFormatError if it is not valid msgpack."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True,
                               ext_hook=_ext_hook)
    except Exception as exc:
        raise ModelFormatError(f"section '{name}' is not valid msgpack: "
                               f"{type(exc).__name__}: {exc}") from exc

"""Checking a run's feeds against the model's declared inputs."""
from __future__ import annotations

import numpy as np

from aircc.errors import InputError
from aircc.formats.model_section import IOSpec
from aircc.ops import value_kind

from .host_values import check_host_feed, describe_value


def _shape_matches(expected: tuple, actual: tuple) -> bool:
    if len(expected) != len(actual):
        return False
    return all(not isinstance(e, int) or e == a for e, a in zip(expected, actual))


def check_feeds(inputs: list[IOSpec], feeds: dict, max_bytes: int | None = None) -> list[np.ndarray]:
    """The feeds in input order, as C-contiguous arrays; raise InputError on any mismatch.

    Each feed's dtype and shape are checked against its input before anything is copied,
    and with ``max_bytes`` (the device's memory) so is the size of the tensor feeds
    together: a broadcast view of a huge shape is refused by that shape, not copied."""
    if not isinstance(feeds, dict):
        raise InputError(f"feeds must be a dict of input name -> array, got {type(feeds).__name__}")
    names = [i.name for i in inputs]
    unknown = [k for k in feeds if k not in names]
    if unknown:
        raise InputError(f"unknown input names {unknown}; the model's inputs are {names}")
    missing = [n for n in names if n not in feeds]
    if missing:
        raise InputError(f"missing inputs {missing}; the model's inputs are {names}")
    ordered, total = [], 0
    for spec in inputs:
        value = feeds[spec.name]
        if value_kind(spec.dtype) != "tensor":
            ordered.append(check_host_feed(spec, value))
            continue
        if value is None or isinstance(value, (list, tuple)) and any(
                isinstance(v, np.ndarray) for v in value):
            raise InputError(f"input '{spec.name}' is a {spec.dtype} tensor: feed an "
                             f"array, got {describe_value(value)}")
        arr = np.asarray(value)
        if arr.dtype != np.dtype(spec.dtype) and arr.size == 0:
            arr = arr.astype(spec.dtype)          # no element whose type could be wrong
        if arr.dtype != np.dtype(spec.dtype):
            raise InputError(f"input '{spec.name}' must be {spec.dtype}, got {arr.dtype}")
        if not _shape_matches(spec.shape, arr.shape):
            raise InputError(f"input '{spec.name}' must have shape {list(spec.shape)}, "
                             f"got {list(arr.shape)}")
        total += arr.nbytes
        if max_bytes is not None and total > max_bytes:
            raise InputError(f"input '{spec.name}' of shape {list(arr.shape)} ({arr.nbytes} bytes) "
                             f"makes the feeds {total} bytes: more than the device's {max_bytes}")
        ordered.append(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr).reshape(arr.shape))
    return ordered


def exact_feeds(specs: list[tuple], feeds) -> list[np.ndarray] | None:
    """The feeds in order when each is already a C-contiguous ndarray of exactly the
    (name, dtype, shape tuple) in ``specs``; None otherwise (then :func:`check_feeds`
    converts what it can and names what is wrong)."""
    if type(feeds) is not dict or len(feeds) != len(specs):
        return None
    ordered = []
    for name, dtype, shape in specs:
        a = feeds.get(name)
        if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape \
                or not a.flags.c_contiguous:
            return None
        ordered.append(a)
    return ordered


def select_outputs(outputs: dict, names: list[str] | None) -> dict:
    """Only the outputs asked for (all when ``names`` is None)."""
    if names is None:
        return outputs
    missing = [n for n in names if n not in outputs]
    if missing:
        raise InputError(f"unknown output names {missing}; the model's outputs are {list(outputs)}")
    return {n: outputs[n] for n in names}

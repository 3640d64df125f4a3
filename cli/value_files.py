"""Sequences and optionals in airrun's .npz files (an .npz holds arrays only).

A sequence ``seq`` is the arrays ``seq/0``, ``seq/1``, ... (in order); an empty one is
the single empty marker array ``seq/``.  An optional ``opt`` holding a value is that
value's form (``opt`` for a tensor, ``opt/0`` ... for a sequence); an empty one is the
marker ``opt/none``, or (for an input) no key at all.
"""
from __future__ import annotations

import numpy as np

from aircc.errors import InputError
from aircc.formats.model_section import IOSpec

NONE_MARK = "none"


def kind(dtype: str) -> str:
    return "sequence" if dtype.startswith("sequence:") else \
        "optional" if dtype.startswith("optional:") else "tensor"


def pack(values: dict, specs: list[IOSpec]) -> dict[str, np.ndarray]:
    """Outputs (arrays, lists of arrays, None) as the arrays of an .npz, by key."""
    dtypes = {s.name: s.dtype for s in specs}
    out: dict[str, np.ndarray] = {}
    for name, value in values.items():
        if value is None:
            out[f"{name}/{NONE_MARK}"] = np.zeros(0, np.uint8)
        elif isinstance(value, list):
            out.update({f"{name}/{k}": v for k, v in enumerate(value)} if value else
                       {f"{name}/": np.zeros(0, dtypes.get(name, "sequence:float32")
                                             .rsplit(":", 1)[-1])})
        else:
            out[name] = value
    return out


def unpack(arrays: dict[str, np.ndarray], specs: list[IOSpec], path: str) -> dict:
    """The feeds an .npz's arrays make (see the module's doc): InputError for a key no
    input has, a sequence with a gap, or a sequence or optional given as a bare array."""
    by_name = {s.name: s for s in specs}
    feeds: dict = {}
    parts: dict[str, dict[int, np.ndarray]] = {}
    dtypes = {s.name: s.dtype for s in specs}
    unknown = sorted(k for k in arrays if k not in by_name and kind(
        dtypes.get(k.rpartition("/")[0], "") or "tensor") == "tensor")
    if unknown:
        raise InputError(f"input file {path!r} holds {unknown}, which the model does not "
                         f"have; its inputs are {list(by_name)}")
    for key, arr in arrays.items():
        if key in by_name:
            if kind(by_name[key].dtype) == "sequence":
                raise InputError(f"input file {path!r}: input '{key}' is a sequence; store "
                                 f"it as {key}/0, {key}/1, ... ({key}/ alone when empty)")
            feeds[key] = arr
            continue
        name, sep, index = key.rpartition("/")
        spec = by_name[name]
        if index == NONE_MARK and kind(spec.dtype) == "optional":
            feeds[name] = None
        elif index == "":
            parts.setdefault(name, {})
        elif index.isdigit():
            parts.setdefault(name, {})[int(index)] = arr
        else:
            raise InputError(f"input file {path!r}: key {key!r}: after '{name}/' give an "
                             f"element index, nothing (an empty sequence) or '{NONE_MARK}'")
    for name, items in parts.items():
        if sorted(items) != list(range(len(items))):
            raise InputError(f"input file {path!r}: sequence '{name}' has elements "
                             f"{sorted(items)}; give {name}/0 to {name}/{len(items) - 1}")
        feeds[name] = [items[k] for k in range(len(items))]
    return feeds


def empty_optionals(feeds: dict, specs: list[IOSpec]) -> dict:
    """Every optional input no file gave, as empty (None)."""
    for s in specs:
        if kind(s.dtype) == "optional":
            feeds.setdefault(s.name, None)
    return feeds


def describe(value) -> str:
    """One line for airrun's summary of an output."""
    if value is None:
        return "empty optional"
    if isinstance(value, list):
        return f"sequence of {len(value)}: " + ", ".join(f"{v.dtype}{list(v.shape)}" for v in value)
    return f"{value.dtype}{list(value.shape)}"

"""The tiling cache: an op's tiling result under a hash of what it depends on.

As in the graph engine's CacheableTiling, the key is built from the runtime
inputs that tiling depends on: input shapes and dtypes, plus the values of
value-dependent inputs.  Each node keeps its own LRU of at most 120 entries
and evicts 8 at a time when full.
"""
from __future__ import annotations

import numpy as np

from collections import OrderedDict
from typing import Callable, Hashable

CAPACITY = 120
EVICT = 8


class TilingCache:
    """LRU of tiling results for one node."""

    __slots__ = ("entries", "capacity", "evict", "hits", "misses", "evictions")

    def __init__(self, capacity: int = CAPACITY, evict: int = EVICT):
        self.entries: OrderedDict[Hashable, dict] = OrderedDict()
        self.capacity, self.evict = capacity, evict
        self.hits = self.misses = self.evictions = 0

    def get(self, key: Hashable, compute: Callable[[], dict]) -> dict:
        entry = self.entries.get(key)
        if entry is not None:
            self.hits += 1
            self.entries.move_to_end(key)
            return entry
        self.misses += 1
        entry = compute()
        if len(self.entries) >= self.capacity:
            for _ in range(min(self.evict, len(self.entries))):
                self.entries.popitem(last=False)
                self.evictions += 1
        self.entries[key] = entry
        return entry


def tiling_key(types, values) -> tuple:
    """Key of one launch: (dtype, shape) per input, and the bytes of value inputs."""
    return (tuple(None if t is None else (t.dtype, t.shape) for t in types),
            tuple(_value_key(v) for v in values))


def _value_key(v):
    """An input value's bytes; a sequence's, element by element (with their shapes)."""
    if v is None:
        return None
    if isinstance(v, list):
        return tuple((x.shape, x.dtype.str, x.tobytes()) for x in map(np.asarray, v))
    return v.tobytes()

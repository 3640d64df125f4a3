"""The weight table: name, dtype, shape, offset and size of every stored weight."""
from __future__ import annotations

from typing import Any

import numpy as np

from .checks import MAX_KERNEL_RANK, Checker, array_spec


def validate_weight_table(table: Any, section_size: int,
                          alignment: int) -> list[tuple[str, np.dtype, tuple[int, ...], int, int]]:
    """Check the weight table against a weights section of ``section_size`` bytes.

    Returns ``(name, dtype, shape, offset, nbytes)`` per entry, offsets relative
    to the start of the weights section.
    """
    c = Checker("weight_table")
    out = []
    seen: set[str] = set()
    for i, e in enumerate(c.list(table, "")):
        w = f"entry {i}"
        ed = c.dict(e, w)
        name = c.str(ed, "name", w)
        w = f"entry {i} ('{name}')"
        if name in seen:
            c.fail(w, "is a duplicate weight name")
        seen.add(name)
        offset = c.int(ed, "offset", w, lo=0)
        nbytes = c.int(ed, "nbytes", w, lo=0)
        try:
            dtype, shape = array_spec(c.get(ed, "dtype", w), c.get(ed, "shape", w), nbytes,
                                      MAX_KERNEL_RANK)
        except ValueError as exc:
            c.fail(w, str(exc))
        if offset % alignment:
            c.fail(w, f"offset {offset} is not aligned to {alignment} bytes")
        if offset + nbytes > section_size:
            c.fail(w, f"offset {offset} + nbytes {nbytes} points outside the weights "
                      f"section ({section_size} bytes)")
        out.append((name, dtype, shape, offset, nbytes))
    spans = sorted((off, off + n, name) for name, _, _, off, n in out if n)
    for (_, end_a, a), (start_b, _, b) in zip(spans, spans[1:]):
        if start_b < end_a:
            c.fail("", f"weights '{a}' and '{b}' overlap")
    return out

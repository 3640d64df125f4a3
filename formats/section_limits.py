"""How much each section of a file may decode to, from its size and the sections before it.

Every count in a file is bounded before anything of that count is allocated (the limits
and their reasons: docs/om-format.md):

- each section by its own size (:class:`~.payload.DecodeLimits`: empty lists and maps,
  the memory of all of them, the length of one list, the length of a string);
- section ``model`` by :data:`MAX_MODEL_SECTION_BYTES`: it holds names, the inputs and
  outputs, the target, the ONNX metadata and the compile report;
- the lists of section ``memory_plan`` (buffers, aliases, weights, a buffer's readers and
  writers) by the operands of section ``tasks``: each buffer and each alias is a value some
  task writes, each weight one some task reads, so a plan of a million buffers over a few
  tasks is refused as msgpack reads the list's length, before the list is made;
- the empty maps of section ``tiling`` by the kernel tasks: one entry each, often an
  empty map (one byte).

Cost: one pass over the task lists of section ``tasks`` (already decoded).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aircc.errors import ModelFormatError

from .payload import DecodeLimits

#: The most bytes section ``model`` may have: compiled models' are a few kilobytes.
MAX_MODEL_SECTION_BYTES = 16 << 20
#: Lists a memory plan has beyond its tasks' operands (its top-level keys, slack).
PLAN_SLACK = 64


def task_counts(tasks: Any) -> tuple[int, int]:
    """(operands, kernel tasks) of a decoded ``tasks`` payload, counting a workspace and a
    copy's operand as two operands of every task; (0, 0) where it is malformed (its own
    checks say how)."""
    operands = kernels = 0
    lists = tasks.get("lists") if isinstance(tasks, Mapping) else None
    for tl in lists if isinstance(lists, list) else ():
        for t in tl if isinstance(tl, list) else ():
            if isinstance(t, Mapping):
                kernels += t.get("kind") == "kernel"
                operands += 2 + sum(len(t[k]) for k in ("inputs", "outputs")
                                    if isinstance(t.get(k), list))
    return operands, kernels


def section_limits(name: str, nbytes: int, decoded: Mapping[str, Any]) -> DecodeLimits:
    """The limits of section ``name`` of ``nbytes`` bytes, given the sections ``decoded``
    before it (by name); ModelFormatError if the section is larger than any can be."""
    if name == "model" and nbytes > MAX_MODEL_SECTION_BYTES:
        raise ModelFormatError(f"section 'model' is {nbytes} bytes; at most "
                               f"{MAX_MODEL_SECTION_BYTES} (names, inputs and outputs, target, "
                               f"metadata and compile report)")
    operands, kernels = task_counts(decoded.get("tasks"))
    if name == "memory_plan":
        return DecodeLimits.of(name, nbytes, array_len=operands + PLAN_SLACK)
    if name == "tiling":
        return DecodeLimits.of(name, nbytes, extra_empty=kernels)
    return DecodeLimits.of(name, nbytes)

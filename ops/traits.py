"""What an op *is*, as the compiler's passes and the runtimes ask it.

Each trait is declared once, on the op's definition (:func:`aircc.ops.define`),
and read through :func:`aircc.ops.has_trait`; no pass keeps a set of op names
of its own.
"""
from __future__ import annotations

import enum


class Trait(enum.Enum):
    """A property of an op that holds for every use of it."""

    ELEMENTWISE = "elementwise"
    """Applies per element, broadcasting its inputs the numpy way: it commutes with an
    Expand of an input that broadcasts into the others (``sink-expand``)."""
    VIEW = "view"
    """Its output is its first input's bytes in another shape (Reshape, Flatten,
    Squeeze, Unsqueeze): the memory planner places it inside its input."""
    LAYOUT = "layout"
    """Moves elements without computing on them (a VIEW or a Transpose): a per-tensor
    scale passes through it unchanged."""
    SHAPE_ONLY = "shape_only"
    """Reads only its input's shape, never its data (Shape, Size): it runs on the host
    in dynamic mode and folds at compile time when the shape is static."""
    HOST_CAPABLE = "host_capable"
    """May run on the host in dynamic mode, when all it reads is host data and its
    result is small (shape arithmetic)."""
    SIDE_EFFECT = "side_effect"
    """Has an effect besides its outputs (synchronisation, copies, jumps, loop state):
    dead-code elimination keeps it."""
    CONTROL_FLOW = "control_flow"
    """Has bodies (If, Loop, Scan): typed through them, lowered to control tasks."""
    DEVICE_TASK = "device_task"
    """A task of the device itself, not a kernel: it has no tiling and lowers to a task
    kind of its own (event record and wait, copies, labels, jumps)."""
    INTERNAL = "internal"
    """Made by the compiler, never written in a model (the device's own ops, the ops of
    fusion passes): ``aircc ops`` and the ops an error message lists leave it out."""

    # Members are singletons compared by identity: hash them so, in C (Enum's own hash
    # runs Python code, and every pass asks traits once per node).
    __hash__ = object.__hash__

"""Device memory for operands a kernel derives from a model's weights once.

Some kernels run on a transformed copy of their weights: the Winograd mode's
weights in the Winograd domain (four times the taps' size for F(4x4, 3x3)), the
wide and stacked conv modes' GEMM operands with the bias as one more column.
They are made when a task is bound (``prepare``), and they are device data like
the weights they come from: :class:`PreparedConstants` puts each one in an
allocation of the device's memory, counted against its capacity (a model that
does not fit fails its load with :class:`~aircc.errors.DeviceOutOfMemoryError`),
and frees them with the model.

A request names its source by key (the weight's device address and what is made
of it), so tasks that share a weight share its transform, and in dynamic mode
every input shape's recorded run uses the one made for the first.
"""
from __future__ import annotations

import threading
from typing import Callable, Hashable, Optional

import numpy as np

from aircc.executor.device.memory import DeviceMemory

Fill = Callable[[np.ndarray], None]


class PreparedConstants:
    """The prepared operands of one loaded model, in ``memory`` (labelled ``owner``)."""

    def __init__(self, memory: DeviceMemory, owner: str):
        self.memory, self.owner = memory, owner
        self._made: dict[Hashable, np.ndarray] = {}
        self._fills: list[tuple[np.ndarray, Fill]] = []
        self._offsets: list[int] = []
        self._lock = threading.Lock()
        self.nbytes = 0
        """Bytes held in device memory (each allocation's own size, before alignment)."""

    def get(self, key: Hashable, shape: tuple, dtype, fill: Fill) -> np.ndarray:
        """The device array for ``key``: on the first request, ``shape`` x ``dtype`` bytes
        allocated and written by ``fill(array)``; later requests get the same array."""
        with self._lock:
            made = self._made.get(key)
            if made is not None:
                return made
            dt = np.dtype(dtype)
            size = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            off = self.memory.malloc(max(size, 1), f"prepared weights of {self.owner}")
            try:
                arr = self.memory.view(off, dt, shape)
                fill(arr)
            except BaseException:
                self.memory.free(off)
                raise
            self._offsets.append(off)
            self._made[key] = arr
            self._fills.append((arr, fill))
            self.nbytes += size
            return arr

    def refill(self) -> None:
        """Make every prepared operand again in place (the device lost its memory contents;
        the weights they come from were written back first)."""
        with self._lock:
            for arr, fill in self._fills:
                fill(arr)

    def release(self) -> None:
        """Free every prepared operand (the model is closing, or its load failed)."""
        with self._lock:
            for off in self._offsets:
                self.memory.free(off)
            self._offsets.clear()
            self._made.clear()
            self._fills.clear()
            self.nbytes = 0


def prepared_array(store: Optional[PreparedConstants], key: Hashable, shape: tuple, dtype,
                   fill: Fill) -> np.ndarray:
    """``store.get(...)``, or without a store (a kernel bound outside a loaded model, as
    unit tests do) a host array of its own, filled once."""
    if store is not None:
        return store.get(key, shape, dtype, fill)
    arr = np.empty(shape, dtype)
    fill(arr)
    return arr

"""A model's weights on one device, held once for every execution context there.

A loaded model runs on N execution contexts (``aircc.load(..., contexts=N)``), each with
its own arena, streams and events; they read one :class:`Residency` of the weights per
device: the weights region, the constants kernels derive from it
(:class:`~aircc.executor.device.prepared.PreparedConstants`, keyed by the weight's device
address, so every context's tasks share them) and the device epoch it was last written in.
:class:`SharedWeights` hands each context the residency of its device, making it for the
first, and frees it when the last context there lets it go (a context whose kernel is
stuck lets go only when the kernel returns: :meth:`Residency.drop` runs from its
quarantine).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import numpy as np

from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.prepared import PreparedConstants


class Residency:
    """The weights of one model in one device's memory (see the module doc)."""

    def __init__(self, device: VirtualDevice, owner: str, offsets: Mapping[str, int], size: int,
                 weights: Mapping[str, np.ndarray]):
        self.device, self.owner = device, owner
        self.size = size
        self.offsets = dict(offsets)
        """Weight name -> its offset in the region."""
        self._weights = weights
        self.users = 0
        self._retired = False
        self._lock = threading.Lock()
        self.base = device.memory.malloc(max(size, 1), f"weights of {owner}")
        self.prepared = PreparedConstants(device.memory, owner)
        self.epoch = -1
        """The device's epoch when the weights were last written."""
        try:
            self.views = {name: device.memory.view(self.base + off, weights[name].dtype,
                                                   weights[name].shape)
                          for name, off in self.offsets.items()}
            self.write()
        except BaseException:
            self.release()
            raise

    def write(self) -> None:
        """Copy the weights in, and make again what kernels derived from them."""
        for name, view in self.views.items():
            np.copyto(view, self._weights[name])
        self.prepared.refill()
        self.epoch = self.device.epoch

    def restore(self) -> None:
        """Write the weights again if the device lost its memory since they were written
        (once, whichever context asks first)."""
        with self._lock:
            if self.epoch != self.device.epoch:
                self.write()

    def take(self) -> bool:
        """One more context reads the weights (False: the last one let them go already)."""
        with self._lock:
            if self._retired:
                return False
            self.users += 1
            return True

    def drop(self) -> None:
        """One context no longer reads the weights; the last one frees them."""
        with self._lock:
            self.users -= 1
            self._retired = last = self.users == 0
        if last:
            self.release()

    def release(self) -> None:
        self.prepared.release()
        if self.base is not None:
            self.device.memory.free(self.base)
            self.base = None

    @property
    def released(self) -> bool:
        return self.base is None


class SharedWeights:
    """Per device, the model's one :class:`Residency` (``make(device)`` makes it)."""

    def __init__(self, make: Callable[[VirtualDevice], Residency]):
        self._make = make
        self._on: dict[int, Residency] = {}
        self._lock = threading.Lock()

    def acquire(self, device: VirtualDevice) -> Residency:
        """The residency on ``device``, made for the first context there; the caller
        :meth:`Residency.drop`\\ s it when done."""
        with self._lock:
            r = self._on.get(id(device))
            if r is None or r.device is not device or not r.take():
                r = self._on[id(device)] = self._make(device)
                r.take()
            return r

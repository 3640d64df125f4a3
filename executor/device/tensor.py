"""Tensors that live in a device's memory: a model's inputs and outputs kept on the
device between runs, and a checkpoint's device tensors.

    x = DeviceTensor.from_numpy(batch, device)            # one H2D copy
    y = model_a.run({"x": x}, device_outputs=True)["y"]   # y stays on the device
    z = model_b.run({"y": y})["z"]                        # read from device memory: no copy off it
    z_host = y.numpy()                                    # one D2H copy

A tensor the device allocated for you (:meth:`DeviceTensor.empty`, :meth:`from_numpy`,
a model's device output) gives its memory back when the last reference to it goes, or
at once with :meth:`free`.  A view (:meth:`of_view`: a loaded model's weights) owns
nothing.  Device memory lost to a fault takes its tensors' contents with it: reading
or feeding one made before is a :class:`~aircc.errors.DeviceLostError`.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from aircc.errors import CheckpointError, DeviceLostError, InputError

if TYPE_CHECKING:
    from .device import VirtualDevice

@dataclass(frozen=True, eq=False)
class DeviceTensor:
    """A tensor in a device's memory: ``dtype`` and ``shape`` at byte ``offset``."""

    device: VirtualDevice
    offset: int
    dtype: np.dtype
    shape: tuple[int, ...]
    epoch: int = -1
    """The device's epoch when the tensor was written (-1: not checked, a view)."""
    owner: Any = field(default=None, repr=False)
    """What keeps the memory allocated: a finalizer that frees it (None: a view that owns
    nothing, or a tensor given back by :meth:`free` alone)."""

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    # ------------------------------------------------------------ making one
    @classmethod
    def allocate(cls, device: VirtualDevice, dtype: Any, shape: tuple[int, ...],
                 what: str = "a device tensor") -> DeviceTensor:
        """A new allocation of ``device`` (DeviceOutOfMemoryError when it does not fit),
        its contents undefined; given back by :meth:`free` or when the tensor is collected."""
        dt, shape = np.dtype(dtype), tuple(int(d) for d in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        memory = device.memory
        offset = memory.malloc(max(nbytes, 1), what)
        holder = _Allocation(memory, offset)
        tensor = cls(device, offset, dt, shape, device.epoch, holder)
        holder.finalizer = weakref.finalize(tensor, _give_back, memory, offset)
        return tensor

    empty = allocate

    @classmethod
    def from_numpy(cls, array: Any, device: VirtualDevice | int | None = None) -> DeviceTensor:
        """A copy of ``array`` on ``device`` (a device, a logical id, None: device 0): one
        host-to-device copy, counted by :func:`~.copies.copy_stats`."""
        from .discovery import resolve_device

        dev = resolve_device(device)
        host = np.ascontiguousarray(array)
        if host.dtype == object:
            raise InputError("a device tensor holds numbers: an object array cannot go to "
                             "the device")
        tensor = cls.allocate(dev, host.dtype, host.shape)
        tensor.write(host)
        return tensor

    @classmethod
    def of_view(cls, device: VirtualDevice, view: np.ndarray) -> DeviceTensor:
        """The device tensor a numpy view of ``device``'s memory shows (a loaded model's
        weights, ``device.memory.view(...)``); CheckpointError when it is not one."""
        data = device.memory.data
        offset = view.ctypes.data - data.ctypes.data if isinstance(view, np.ndarray) else -1
        if offset < 0 or offset + view.nbytes > data.nbytes or not view.flags.c_contiguous:
            raise CheckpointError(f"the array is not a contiguous view of device "
                                  f"{device.id}'s memory; add a host array without device=")
        return cls(device, int(offset), view.dtype, tuple(view.shape))

    def rows(self, n: int) -> DeviceTensor:
        """The first ``n`` rows (of the first dim), sharing this tensor's memory (and
        keeping it allocated)."""
        return DeviceTensor(self.device, self.offset, self.dtype, (int(n), *self.shape[1:]),
                            self.epoch, self)

    # ------------------------------------------------------------ using one
    def check_valid(self, what: str = "the device tensor") -> None:
        """DeviceLostError when the tensor was freed, or its device lost its memory since
        it was written."""
        if isinstance(self.owner, _Allocation) and not self.owner.alive:
            raise DeviceLostError(f"{what} was freed: its memory on device {self.device.id} "
                                  f"is given back")
        if self.epoch >= 0 and self.epoch != self.device.epoch:
            raise DeviceLostError(f"{what} was on device {self.device.id} when it lost its "
                                  f"memory contents: make it again")

    def view(self) -> np.ndarray:
        """The tensor's bytes in device memory, as numpy (no copy)."""
        return self.device.memory.view(self.offset, self.dtype, self.shape)

    def numpy(self) -> np.ndarray:
        """A host copy of the tensor (DeviceLostError when its device lost its memory)."""
        from .copies import copy_d2h

        self.check_valid()
        out = np.empty(self.shape, self.dtype)
        copy_d2h(self.device, self.offset, out)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def write(self, array: np.ndarray) -> None:
        """Copy ``array`` (of this dtype and shape) into the tensor."""
        from .copies import copy_h2d

        if array.dtype != self.dtype or array.shape != self.shape:
            raise CheckpointError(f"cannot write a {array.dtype} array of shape "
                                  f"{list(array.shape)} into a device tensor of {self.dtype}, "
                                  f"shape {list(self.shape)}")
        copy_h2d(self.device, self.offset, np.ascontiguousarray(array))

    def free(self) -> None:
        """Give the tensor's memory back now (an allocation; a view frees nothing of a
        model's).  Using it afterwards is a DeviceLostError."""
        owner = self.owner
        while isinstance(owner, DeviceTensor):     # rows(): the tensor they were cut from
            owner = owner.owner
        if isinstance(owner, _Allocation):
            owner.finalizer()
        else:
            self.device.memory.free(self.offset)

    def chunks(self, size: int) -> Iterator[memoryview]:
        """Its bytes in order, copied off the device ``size`` bytes at a time."""
        from .copies import copy_d2h

        buf = np.empty(min(size, self.nbytes), np.uint8)
        for start in range(0, self.nbytes, size):
            n = min(size, self.nbytes - start)
            copy_d2h(self.device, self.offset + start, buf[:n])
            yield memoryview(buf[:n])

    def __eq__(self, other: object) -> bool:
        """The same bytes of the same device, seen as the same dtype and shape."""
        return isinstance(other, DeviceTensor) and self.device is other.device and \
            (self.offset, self.dtype, self.shape) == (other.offset, other.dtype, other.shape)

    def __hash__(self) -> int:
        return hash((id(self.device), self.offset, self.dtype, self.shape))

    def __repr__(self) -> str:
        return (f"DeviceTensor({self.dtype}, shape={list(self.shape)}, device={self.device.id}, "
                f"offset={self.offset})")


class _Allocation:
    """An allocation a tensor owns, freed once (by :meth:`DeviceTensor.free` or when the
    tensor is collected)."""

    __slots__ = ("memory", "offset", "finalizer")

    def __init__(self, memory, offset: int):
        self.memory, self.offset = memory, offset
        self.finalizer: weakref.finalize | None = None

    @property
    def alive(self) -> bool:
        return self.finalizer is not None and self.finalizer.alive


def _give_back(memory, offset: int) -> None:
    memory.free(offset)          # a closed device's memory went with it: nothing to do

"""Checkpoints: named device tensors and host arrays saved to one file and restored onto
a device, so that long work resumes after a fault instead of starting again.

    ck = aircc.Checkpoint({"step": 1200})
    ck.add("state", DeviceTensor.allocate(device, np.float32, (64, 128)))   # device memory
    ck.add("rng", np.array([7, 9], np.uint64))                               # a host array
    ck.add_model(model)                        # a loaded model's weights, as views
    ck.save("run.ckpt")                        # atomic; a checksum per tensor
    back = aircc.Checkpoint.load("run.ckpt")   # every size and checksum checked
    back["rng"]                                # numpy
    tensors = back.restore(device)             # new allocations, or into=existing tensors

Tensors are read when :meth:`Checkpoint.save` runs, not when they are added: synchronize
whatever writes a device tensor first.  The file's layout and its checks are in
:mod:`.checkpoint_format`.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from aircc.errors import CheckpointError
from aircc.executor.device.tensor import DeviceTensor

from .checkpoint_format import (CHUNK, Source, host_chunks, read_index, read_tensor,
                                storable_dtype, write_checkpoint)

if TYPE_CHECKING:
    from aircc.executor.device.device import VirtualDevice


Tensor = Union[np.ndarray, DeviceTensor]


class Checkpoint:
    """Named tensors (device tensors and host arrays) and a small ``meta`` dict (strings,
    numbers, booleans), saved to and loaded from one file."""

    def __init__(self, meta: dict | None = None):
        self.meta: dict = dict(meta or {})
        self._tensors: dict[str, Tensor] = {}

    # ------------------------------------------------------------ contents
    def add(self, name: str, value: Tensor, *, device: VirtualDevice | None = None) -> None:
        """Add ``value`` as ``name``: a :class:`DeviceTensor`, a host array, or with
        ``device`` a numpy view of that device's memory.  CheckpointError for a dtype no
        checkpoint holds (strings, objects) or a name already added."""
        if name in self._tensors:
            raise CheckpointError(f"tensor '{name}' is already in the checkpoint")
        if device is not None:
            value = DeviceTensor.of_view(device, value)
        elif isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, (np.ndarray, DeviceTensor)):
            raise CheckpointError(f"tensor '{name}': expected a numpy array or a DeviceTensor, "
                                  f"got {type(value).__name__}")
        storable_dtype(value.dtype, f"tensor '{name}'")
        self._tensors[name] = value

    def add_model(self, model: Any, prefix: str = "") -> list[str]:
        """Add every weight of a loaded model as a view of its device memory, named
        ``prefix + weight name``; returns the names."""
        names = []
        for name, tensor in model_tensors(model).items():
            self.add(prefix + name, tensor)
            names.append(prefix + name)
        return names

    def names(self) -> list[str]:
        """The tensors' names, in the order they were added (or stored)."""
        return list(self._tensors)

    def __contains__(self, name: object) -> bool:
        return name in self._tensors

    def __len__(self) -> int:
        return len(self._tensors)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def spec(self, name: str) -> tuple[np.dtype, tuple[int, ...]]:
        """(dtype, shape) of tensor ``name``."""
        t = self._get(name)
        return t.dtype, tuple(t.shape)

    def tensor(self, name: str) -> Tensor:
        """Tensor ``name`` as it was added: a host array or a :class:`DeviceTensor`."""
        return self._get(name)

    def numpy(self, name: str) -> np.ndarray:
        """Tensor ``name`` as a host array (a device tensor is copied off its device)."""
        t = self._get(name)
        return t.numpy() if isinstance(t, DeviceTensor) else t

    __getitem__ = numpy

    def _get(self, name: str) -> Tensor:
        if name not in self._tensors:
            raise CheckpointError(f"the checkpoint has no tensor {name!r}; it has "
                                  f"{sorted(self._tensors)[:20]}")
        return self._tensors[name]

    # ------------------------------------------------------------ files
    def save(self, path: str | os.PathLike) -> int:
        """Write every tensor as it is now (device tensors read off their device) and the
        meta to ``path``, atomically; returns the file's size."""
        sources: list[Source] = []
        for name, t in self._tensors.items():
            if isinstance(t, DeviceTensor):
                t.device.check_usable()       # a lost device's memory is not saved
            chunks = (lambda t=t: t.chunks(CHUNK)) if isinstance(t, DeviceTensor) \
                else host_chunks(t)
            sources.append((name, np.dtype(t.dtype), tuple(int(d) for d in t.shape), chunks))
        return write_checkpoint(path, sources, self.meta)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Checkpoint:
        """The checkpoint saved at ``path``, its tensors as host arrays.  CheckpointError
        for a file that is damaged, cut off, forged or of another version; no tensor is
        allocated before its size is checked against the file's."""
        where = f"checkpoint {os.fspath(path)!r}"
        try:
            f = open(path, "rb")
        except OSError as e:
            raise CheckpointError(f"{where} cannot be read: {e.strerror or e}") from None
        with f:
            index = read_index(f, where)
            tensors = {e.name: read_tensor(f, e, where) for e in index.entries}
        checkpoint = cls(index.meta)
        checkpoint._tensors = dict(tensors)
        return checkpoint

    # ------------------------------------------------------------ devices
    def restore(self, device: VirtualDevice | None = None, *,
                into: dict[str, DeviceTensor] | None = None,
                names: list[str] | None = None) -> dict[str, DeviceTensor]:
        """Copy tensors onto a device: into the device tensor ``into[name]`` (same dtype
        and shape) where given, else into a new allocation of ``device``.  ``names``: which
        (default: all of them with a ``device``, those of ``into`` without).  Returns every
        restored tensor by name; on an error, the allocations it made are given back."""
        into = dict(into or {})
        wanted = list(names) if names is not None else \
            list(self._tensors) if device is not None else list(into)
        for name in wanted:
            dtype, shape = self.spec(name)
            target = into.get(name)
            if target is None and device is None:
                raise CheckpointError(f"restore of {name!r}: give a device for new "
                                      f"allocations, or into={{{name!r}: DeviceTensor}}")
            if target is not None and (target.dtype != dtype or target.shape != shape):
                raise CheckpointError(f"restore of {name!r}: the checkpoint holds {dtype} of "
                                      f"shape {list(shape)}, the target is {target.dtype} of "
                                      f"shape {list(target.shape)}")
        made: list[DeviceTensor] = []
        out = {}
        try:
            for name in wanted:
                target = into.get(name)
                if target is None:
                    dtype, shape = self.spec(name)
                    target = DeviceTensor.allocate(device, dtype, shape, f"checkpoint tensor "
                                                                         f"'{name}'")
                    made.append(target)
                target.write(self.numpy(name))
                out[name] = target
        except BaseException:
            for t in made:
                t.free()
            raise
        return out


    def restore_model(self, model: Any, prefix: str = "") -> list[str]:
        """Write the tensors :meth:`add_model` took (``prefix + weight name``) back into a
        loaded model's weights, between its runs, and make again what its kernels derived
        from them (prepacked or Winograd-domain weights); returns the weights written."""
        targets = {prefix + name: t for name, t in model_tensors(model).items()}
        missing = sorted(set(targets) - set(self._tensors))
        if missing:
            raise CheckpointError(f"the checkpoint has no tensor for the model's weights "
                                  f"{missing[:5]}; it was not made by add_model of this model")
        self.restore(into=targets)
        prepared = getattr(getattr(model, "engine", model), "prepared", None)
        if prepared is not None:
            prepared.refill()
        return list(targets)


def model_tensors(model: Any) -> dict[str, DeviceTensor]:
    """The weights of a loaded model (``aircc.load``) as device tensors: views of the
    model's device memory, by weight name."""
    engine = getattr(model, "engine", model)
    device = getattr(engine, "device", None)
    if getattr(engine, "device_weights", None) is not None:          # a dynamic model
        return {name: DeviceTensor.of_view(device, view)
                for name, view in engine.device_weights.items()}
    if getattr(engine, "weights_base", None) is not None:            # a static model
        out = {}
        for plan in engine.plan.plans:
            for w in plan.memory_plan.weights:
                array = engine.om.weights[w.name]
                out[w.name] = DeviceTensor(device, engine.weights_base + w.offset,
                                           array.dtype, tuple(array.shape))
        return out
    raise CheckpointError(f"{type(model).__name__} is not a model loaded on one device; "
                          f"add the tensors of each device's model")

"""Checking a run's feeds against the model's declared inputs."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from aircc.errors import InputError
from aircc.executor.device.tensor import DeviceTensor
from aircc.formats.model_section import IOSpec
from aircc.ops import value_kind

from .host_values import check_host_feed, describe_value


def _shape_matches(expected: tuple, actual: tuple) -> bool:
    if len(expected) != len(actual):
        return False
    return all(not isinstance(e, int) or e == a for e, a in zip(expected, actual))


def check_feeds(inputs: list[IOSpec], feeds: dict, max_bytes: int | None = None,
                device=None) -> list[np.ndarray]:
    """The feeds in input order, as C-contiguous arrays; raise InputError on any mismatch.

    Each feed's dtype and shape are checked against its input before anything is copied,
    and with ``max_bytes`` (the device's memory) so is the size of the tensor feeds
    together: a broadcast view of a huge shape is refused by that shape, not copied.
    A :class:`~aircc.executor.device.tensor.DeviceTensor` on ``device`` (the model's) is
    fed as its view of device memory: the run reads it there."""
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
        if isinstance(value, DeviceTensor):
            ordered.append(device_feed(spec, value, device))
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


def device_feed(spec: IOSpec, tensor: DeviceTensor, device) -> np.ndarray:
    """A device tensor fed to input ``spec`` of a model on ``device``: its view of device
    memory, once its device, dtype and shape are the input's."""
    if device is None or tensor.device is not device:
        where = "a model split across devices" if device is None else f"device {device.id}"
        raise InputError(f"input '{spec.name}' is a tensor on device {tensor.device.id}, but "
                         f"the run is on {where}: feed a host array, or a tensor on the "
                         f"model's device (DeviceTensor.from_numpy(a, model.device))")
    tensor.check_valid(f"the device tensor fed to input '{spec.name}'")
    if tensor.dtype != np.dtype(spec.dtype):
        raise InputError(f"input '{spec.name}' must be {spec.dtype}, got a device tensor of "
                         f"{tensor.dtype}")
    if not _shape_matches(spec.shape, tensor.shape):
        raise InputError(f"input '{spec.name}' must have shape {list(spec.shape)}, got a "
                         f"device tensor of shape {list(tensor.shape)}")
    return tensor.view()


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


class RunCall(NamedTuple):
    """What one run was asked: its feeds, the outputs it returns, those left on the device."""

    feeds: dict
    output_names: list[str] | None
    device_outputs: frozenset[str]


def device_output_names(outputs: list[IOSpec], wanted, output_names: list[str] | None
                        ) -> frozenset[str]:
    """The outputs a run leaves on the device: ``wanted`` True, every one it returns
    (``output_names``, else all), else the names given; InputError for a name the run
    does not return, or a value that is not a tensor."""
    if wanted is False or wanted is None:
        return frozenset()
    returned = list(output_names) if output_names else [o.name for o in outputs]
    names = returned if wanted is True else [wanted] if isinstance(wanted, str) else list(wanted)
    unknown = [n for n in names if n not in returned]
    if unknown:
        raise InputError(f"device_outputs {unknown}: the run returns {returned}")
    kinds = {o.name: o.dtype for o in outputs}
    not_tensors = [n for n in names if value_kind(kinds[n]) != "tensor"]
    if not_tensors:
        raise InputError(f"outputs {not_tensors} are not tensors "
                         f"({', '.join(kinds[n] for n in not_tensors)}): only a tensor stays "
                         f"on the device")
    return frozenset(names)


def select_outputs(outputs: dict, names: list[str] | None) -> dict:
    """Only the outputs asked for (all when ``names`` is None)."""
    if names is None:
        return outputs
    missing = [n for n in names if n not in outputs]
    if missing:
        raise InputError(f"unknown output names {missing}; the model's outputs are {list(outputs)}")
    return {n: outputs[n] for n in names}

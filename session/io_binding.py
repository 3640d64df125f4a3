"""Values and bindings as onnxruntime's Python API has them: :class:`OrtValue`,
:class:`IOBinding`, and type names such as ``tensor(float)``.

An :class:`OrtValue` is a host array or a tensor in the virtual device's memory:
- ``OrtValue.ortvalue_from_numpy(a)`` (device ``cpu``) shares ``a``'s memory, as
  onnxruntime's CPU values do, so an output bound to it is written into ``a``; a run
  copies such an input to the device and such an output off it;
- ``OrtValue.ortvalue_from_numpy(a, "aircc", 0)`` copies ``a`` to device 0 once (a
  :class:`~aircc.executor.device.tensor.DeviceTensor`); a run reads it there, and an
  output bound with ``bind_output(name, "aircc")`` stays there, so one session's output
  feeds the next session with no copy through the host, as onnxruntime's CUDA values do.

An :class:`IOBinding` holds a session's feeds and the places its outputs go;
``session.run_with_iobinding(binding)`` runs with them.
"""
from __future__ import annotations

import ctypes
import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from onnx import TensorProto, helper

from aircc.errors import InputError
from aircc.executor.device.tensor import DeviceTensor
from aircc.formats.checks import ML_DTYPES

if TYPE_CHECKING:
    from .session import InferenceSession

#: Host memory (a run copies such inputs to the device and such outputs off it).
HOST_DEVICE = "cpu"
#: The virtual device's memory (a run reads and writes it there).
AIRCC_DEVICE = "aircc"


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of an aircc dtype name (``float32``, ``bfloat16``, ``object``)."""
    return ML_DTYPES[name] if name in ML_DTYPES else np.dtype(name)


def element_type(dtype: np.dtype) -> int:
    """ONNX's TensorProto element type of a numpy dtype (``object``: STRING)."""
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def tensor_type(dtype: np.dtype) -> str:
    """onnxruntime's name of a tensor of ``dtype``: ``tensor(float)``, ``tensor(int64)``."""
    return f"tensor({TensorProto.DataType.Name(element_type(dtype)).lower()})"


def ort_type(dtype_name: str) -> str:
    """onnxruntime's type name of an aircc value dtype: ``float32`` -> ``tensor(float)``,
    ``sequence:int64`` -> ``seq(tensor(int64))``, ``optional:...`` -> ``optional(...)``."""
    if dtype_name.startswith("optional:"):
        return f"optional({ort_type(dtype_name.removeprefix('optional:'))})"
    if dtype_name.startswith("sequence:"):
        return f"seq({ort_type(dtype_name.removeprefix('sequence:'))})"
    return tensor_type(numpy_dtype(dtype_name))


def _check_device(device_type: str, what: str) -> str:
    """``cpu`` or ``aircc``; InputError naming them for anything else."""
    kind = str(device_type).lower()
    if kind not in (HOST_DEVICE, AIRCC_DEVICE):
        raise InputError(f"{what}: device_type {device_type!r} is not available; aircc binds "
                         f"host memory ('{HOST_DEVICE}': copied to and from the device by "
                         f"every run) or its virtual device's memory ('{AIRCC_DEVICE}')")
    return kind


def _device(device_id: int):
    from aircc.executor.device.discovery import resolve_device

    return resolve_device(int(device_id))


def device_tensor_at(address: int, element_type: Any, shape: Sequence[int],
                     device_id: int) -> DeviceTensor:
    """The device tensor at ``address`` (a data_ptr of device ``device_id``'s memory): a
    view, owning nothing; InputError when the bytes are not in that device's memory."""
    device = _device(device_id)
    dtype, shape = np.dtype(element_type), tuple(int(d) for d in shape)
    base = device.memory.data.ctypes.data
    offset = int(address) - base
    nbytes = math.prod(shape) * dtype.itemsize
    if offset < 0 or offset + nbytes > device.memory.capacity:
        raise InputError(f"buffer_ptr {int(address):#x} with {nbytes} bytes is not in device "
                         f"{device.id}'s memory: bind a host buffer with device_type "
                         f"'{HOST_DEVICE}'")
    return DeviceTensor(device, offset, dtype, shape, device.epoch)


def array_at(address: int, dtype: Any, shape: Sequence[int]) -> np.ndarray:
    """A writable array over the memory at ``address`` (a buffer_ptr) of ``shape`` and
    ``dtype``: no copy, as onnxruntime binds a raw buffer."""
    dtype, shape = np.dtype(dtype), tuple(int(d) for d in shape)
    count = math.prod(shape)
    if count == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(address))
    return np.frombuffer(raw, dtype, count).reshape(shape)


class OrtValue:
    """A tensor on the host (``numpy()`` shares its memory) or in the device's memory
    (``numpy()`` copies it off the device), as onnxruntime's ``OrtValue``."""

    def __init__(self, value: np.ndarray | DeviceTensor):
        self._value = value

    @staticmethod
    def ortvalue_from_numpy(numpy_obj: np.ndarray, device_type: str = HOST_DEVICE,
                            device_id: int = 0) -> "OrtValue":
        """A value over ``numpy_obj``'s memory (a C-contiguous array; another is copied),
        or with device_type ``aircc`` a copy of it on device ``device_id``."""
        if _check_device(device_type, "OrtValue.ortvalue_from_numpy") == AIRCC_DEVICE:
            return OrtValue(DeviceTensor.from_numpy(numpy_obj, _device(device_id)))
        return OrtValue(np.ascontiguousarray(numpy_obj))

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any,
                                     device_type: str = HOST_DEVICE,
                                     device_id: int = 0) -> "OrtValue":
        """A new value of ``shape`` and numpy ``element_type`` (its contents undefined)."""
        if _check_device(device_type, "OrtValue.ortvalue_from_shape_and_type") == AIRCC_DEVICE:
            return OrtValue(DeviceTensor.allocate(_device(device_id), element_type, shape))
        return OrtValue(np.empty(tuple(shape), element_type))

    @property
    def value(self) -> np.ndarray | DeviceTensor:
        """What a run is fed: the host array, or the device tensor."""
        return self._value

    def numpy(self) -> np.ndarray:
        """The value as an array: its memory on the host, a copy of a device value."""
        v = self._value
        return v.numpy() if isinstance(v, DeviceTensor) else v

    def shape(self) -> list[int]:
        return list(self._value.shape)

    def data_type(self) -> str:
        """onnxruntime's type name, e.g. ``tensor(float)``."""
        return tensor_type(self._value.dtype)

    def element_type(self) -> int:
        """ONNX's TensorProto element type (1 for float)."""
        return element_type(self._value.dtype)

    def device_name(self) -> str:
        return AIRCC_DEVICE if isinstance(self._value, DeviceTensor) else HOST_DEVICE

    def data_ptr(self) -> int:
        """The address of the first element (in the device's memory for a device value)."""
        v = self._value
        if isinstance(v, DeviceTensor):
            return int(v.device.memory.data.ctypes.data) + v.offset
        return int(v.__array_interface__["data"][0])

    def tensor_size_in_bytes(self) -> int:
        return int(self._value.nbytes)

    def is_tensor(self) -> bool:
        return True

    def has_value(self) -> bool:
        return True

    def update_inplace(self, np_arr: np.ndarray) -> None:
        """Copy ``np_arr`` (same shape and dtype) into the value's memory."""
        v = self._value
        if isinstance(v, DeviceTensor):
            v.write(np.asarray(np_arr))
        else:
            np.copyto(v, np_arr, casting="no")

    def __repr__(self) -> str:
        return f"OrtValue({self.data_type()}, shape={self.shape()}, device='{self.device_name()}')"


class IOBinding:
    """A session's feeds and the destinations of its outputs (``session.io_binding()``)."""

    def __init__(self, session: "InferenceSession"):
        self._session = session
        self._inputs: dict[str, np.ndarray | DeviceTensor] = {}
        self._outputs: dict[str, OrtValue | str] = {}
        """Bound outputs in bind order: a value to write, or where the run makes it
        (:data:`HOST_DEVICE`, :data:`AIRCC_DEVICE`)."""
        self._results: list[OrtValue] = []

    def _known(self, name: str, kind: str) -> None:
        names = [a.name for a in (self._session.get_inputs() if kind == "input"
                                  else self._session.get_outputs())]
        if name not in names:
            raise InputError(f"cannot bind {kind} {name!r}: the model's {kind}s are {names}")

    # ---------------------------------------------------------------- inputs
    def bind_cpu_input(self, name: str, arr_on_cpu: np.ndarray) -> None:
        """Feed ``name`` from ``arr_on_cpu`` (read when the run starts, not copied now)."""
        self._known(name, "input")
        self._inputs[name] = np.asarray(arr_on_cpu)

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any,
                   shape: Sequence[int], buffer_ptr: int) -> None:
        """Feed ``name`` from the memory at ``buffer_ptr``, of ``shape`` and numpy
        ``element_type``: host memory, or device ``device_id``'s with device_type ``aircc``."""
        self._known(name, "input")
        if _check_device(device_type, f"bind_input('{name}')") == AIRCC_DEVICE:
            self._inputs[name] = device_tensor_at(buffer_ptr, element_type, shape, device_id)
        else:
            self._inputs[name] = array_at(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        """Feed ``name`` from ``ortvalue``: a device value is read where it is."""
        self._known(name, "input")
        self._inputs[name] = ortvalue.value

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: inputs are read from host memory when the run starts."""

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    # ---------------------------------------------------------------- outputs
    def bind_output(self, name: str, device_type: str = HOST_DEVICE, device_id: int = 0,
                    element_type: Any = None, shape: Sequence[int] | None = None,
                    buffer_ptr: int | None = None) -> None:
        """Ask for output ``name``: into the memory at ``buffer_ptr`` (with its numpy
        ``element_type`` and ``shape``), or, without one, into a value the run makes (on
        the device with device_type ``aircc``: it stays there)."""
        self._known(name, "output")
        kind = _check_device(device_type, f"bind_output('{name}')")
        if buffer_ptr is None:
            self._outputs[name] = kind
            return
        if element_type is None or shape is None:
            raise InputError(f"bind_output('{name}'): a buffer_ptr needs its element_type and "
                             f"shape")
        self._outputs[name] = OrtValue(
            device_tensor_at(buffer_ptr, element_type, shape, device_id) if kind == AIRCC_DEVICE
            else array_at(buffer_ptr, element_type, shape))

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Write output ``name`` into ``ortvalue`` (its shape and type must be the output's)."""
        self._known(name, "output")
        self._outputs[name] = ortvalue

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: the run's outputs are in place when it returns."""

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def get_outputs(self) -> list[OrtValue]:
        """The last run's outputs, in bind order (the bound values themselves)."""
        return list(self._results)

    get_outputs_as_ortvaluevector = get_outputs

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        """Copies of the last run's outputs, in bind order."""
        return [v.numpy() if v.device_name() == AIRCC_DEVICE else v.numpy().copy()
                for v in self._results]

    # ---------------------------------------------------------------- the run
    def place_outputs(self, outputs: dict[str, np.ndarray]) -> None:
        """Place a run's ``outputs`` where they are bound (the session's
        ``run_with_iobinding`` calls it): InputError naming a destination of another shape
        or type."""
        results = []
        for name, dest in self._outputs.items():
            value = outputs[name]
            if isinstance(dest, str):
                results.append(OrtValue(value))
                continue
            target = dest.value
            if target.shape != value.shape or target.dtype != value.dtype:
                raise InputError(f"output '{name}' is {value.dtype}{list(value.shape)} in this "
                                 f"run but the value bound to it is {target.dtype}"
                                 f"{list(target.shape)}; bind one of the output's shape, or "
                                 f"bind_output('{name}') to let the run allocate it")
            if isinstance(target, DeviceTensor):     # within the device
                from aircc.executor.device.copies import copy_d2d

                copy_d2d(target.device, target.offset, value.offset, value.nbytes)
            else:
                np.copyto(target, value)
            results.append(dest)
        self._results = results

    @property
    def feeds(self) -> dict[str, np.ndarray]:
        """The bound inputs by name."""
        return dict(self._inputs)

    @property
    def output_names(self) -> list[str]:
        """The bound outputs' names, in bind order."""
        return list(self._outputs)

    @property
    def device_outputs(self) -> list[str]:
        """The bound outputs a run leaves on the device."""
        return [n for n, d in self._outputs.items()
                if d == AIRCC_DEVICE or isinstance(d, OrtValue) and d.device_name() == AIRCC_DEVICE]

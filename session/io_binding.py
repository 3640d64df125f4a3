"""Values and bindings as onnxruntime's Python API has them: :class:`OrtValue`,
:class:`IOBinding`, and type names such as ``tensor(float)``.

An :class:`OrtValue` here is a host array (the virtual device's inputs are copied in and
its outputs copied out by every run): ``OrtValue.ortvalue_from_numpy(a)`` shares ``a``'s
memory, as onnxruntime's CPU values do, so an output bound to it is written into ``a``.
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
from aircc.formats.checks import ML_DTYPES

if TYPE_CHECKING:
    from .session import InferenceSession

#: The only place a binding can name: host memory (the device's copies read and write it).
HOST_DEVICE = "cpu"


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


def _check_device(device_type: str, what: str) -> None:
    if str(device_type).lower() != HOST_DEVICE:
        raise InputError(f"{what}: device_type {device_type!r} is not available; aircc binds "
                         f"host memory ('{HOST_DEVICE}'), which its virtual device copies from "
                         f"and to on every run")


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
    """A tensor on the host, as onnxruntime's ``OrtValue`` (``numpy()`` shares its memory)."""

    def __init__(self, array: np.ndarray):
        self._array = array

    @staticmethod
    def ortvalue_from_numpy(numpy_obj: np.ndarray, device_type: str = HOST_DEVICE,
                            device_id: int = 0) -> "OrtValue":
        """A value over ``numpy_obj``'s memory (a C-contiguous array; another is copied)."""
        _check_device(device_type, "OrtValue.ortvalue_from_numpy")
        return OrtValue(np.ascontiguousarray(numpy_obj))

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any,
                                     device_type: str = HOST_DEVICE,
                                     device_id: int = 0) -> "OrtValue":
        """A new value of ``shape`` and numpy ``element_type`` (its contents undefined)."""
        _check_device(device_type, "OrtValue.ortvalue_from_shape_and_type")
        return OrtValue(np.empty(tuple(shape), element_type))

    def numpy(self) -> np.ndarray:
        """The value as an array (its memory, not a copy)."""
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def data_type(self) -> str:
        """onnxruntime's type name, e.g. ``tensor(float)``."""
        return tensor_type(self._array.dtype)

    def element_type(self) -> int:
        """ONNX's TensorProto element type (1 for float)."""
        return element_type(self._array.dtype)

    def device_name(self) -> str:
        return HOST_DEVICE

    def data_ptr(self) -> int:
        """The address of the first element."""
        return int(self._array.__array_interface__["data"][0])

    def tensor_size_in_bytes(self) -> int:
        return int(self._array.nbytes)

    def is_tensor(self) -> bool:
        return True

    def has_value(self) -> bool:
        return True

    def update_inplace(self, np_arr: np.ndarray) -> None:
        """Copy ``np_arr`` (same shape and dtype) into the value's memory."""
        np.copyto(self._array, np_arr, casting="no")

    def __repr__(self) -> str:
        return f"OrtValue({self.data_type()}, shape={self.shape()}, device='{HOST_DEVICE}')"


class IOBinding:
    """A session's feeds and the destinations of its outputs (``session.io_binding()``)."""

    def __init__(self, session: "InferenceSession"):
        self._session = session
        self._inputs: dict[str, np.ndarray] = {}
        self._outputs: dict[str, OrtValue | None] = {}
        """Bound outputs in bind order; None: the run allocates it."""
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
        """Feed ``name`` from the memory at ``buffer_ptr``, of ``shape`` and numpy ``element_type``."""
        self._known(name, "input")
        _check_device(device_type, f"bind_input('{name}')")
        self._inputs[name] = array_at(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._known(name, "input")
        self._inputs[name] = ortvalue.numpy()

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: inputs are read from host memory when the run starts."""

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    # ---------------------------------------------------------------- outputs
    def bind_output(self, name: str, device_type: str = HOST_DEVICE, device_id: int = 0,
                    element_type: Any = None, shape: Sequence[int] | None = None,
                    buffer_ptr: int | None = None) -> None:
        """Ask for output ``name``: into the memory at ``buffer_ptr`` (with its numpy
        ``element_type`` and ``shape``), or, without one, into an array the run makes."""
        self._known(name, "output")
        _check_device(device_type, f"bind_output('{name}')")
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise InputError(f"bind_output('{name}'): a buffer_ptr needs its element_type and "
                             f"shape")
        self._outputs[name] = OrtValue(array_at(buffer_ptr, element_type, shape))

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Write output ``name`` into ``ortvalue`` (its shape and type must be the output's)."""
        self._known(name, "output")
        self._outputs[name] = ortvalue

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: the run has copied its outputs when it returns."""

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def get_outputs(self) -> list[OrtValue]:
        """The last run's outputs, in bind order (the bound values themselves)."""
        return list(self._results)

    get_outputs_as_ortvaluevector = get_outputs

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        """Copies of the last run's outputs, in bind order."""
        return [v.numpy().copy() for v in self._results]

    # ---------------------------------------------------------------- the run
    def place_outputs(self, outputs: dict[str, np.ndarray]) -> None:
        """Place a run's ``outputs`` where they are bound (the session's
        ``run_with_iobinding`` calls it): InputError naming a destination of another shape
        or type."""
        results = []
        for name, dest in self._outputs.items():
            value = outputs[name]
            if dest is None:
                results.append(OrtValue(value))
                continue
            target = dest.numpy()
            if target.shape != value.shape or target.dtype != value.dtype:
                raise InputError(f"output '{name}' is {value.dtype}{list(value.shape)} in this "
                                 f"run but the value bound to it is {target.dtype}"
                                 f"{list(target.shape)}; bind one of the output's shape, or "
                                 f"bind_output('{name}') to let the run allocate it")
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

"""Tensor types: what a value is, known at compile time or inferred at run time.

A value's type is a dtype (a numpy dtype name, or ``sequence:<elem>`` for a
sequence of tensors, ``object`` for strings) and a shape whose dims are ints
(known) or strings (symbols).  The compiler types every IR value with these;
the dynamic runtime types every run's values with the same rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import ml_dtypes  # noqa: F401 - makes np.dtype("bfloat16"), "float8_e4m3fn", "int4"... known
import numpy as np

Dim = Union[int, str]
"""One dim of a shape: an int when known, a symbol (a str) when not."""


def is_host_only(dtype: str) -> bool:
    """Strings (numpy ``object``), sequences (``sequence:<elem>``) and optionals
    (``optional:<inner>``) live on the host only."""
    return dtype == "object" or dtype.startswith(("sequence:", "optional:"))


def value_kind(dtype: str) -> str:
    """``tensor``, ``sequence`` (a list of arrays) or ``optional`` (None or its inner value)."""
    return "sequence" if dtype.startswith("sequence:") else \
        "optional" if dtype.startswith("optional:") else "tensor"


def onnx_to_np(elem_type) -> str:
    """ONNX TensorProto data type (enum int or name) -> numpy dtype name."""
    from onnx import TensorProto, helper

    if isinstance(elem_type, str):
        elem_type = TensorProto.DataType.Value(elem_type.upper())
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(elem_type))).name


@dataclass(frozen=True)
class TensorType:
    """The static type of a value."""

    dtype: str
    """numpy dtype name, e.g. ``float32`` or ``int64``."""
    shape: tuple[Dim, ...] | None
    """Dims as ints (known) or strings (symbols); ``None`` when the rank is unknown."""

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def numel(self) -> int:
        if not self.is_static:
            raise ValueError(f"numel of a non-static shape {self.shape}")
        n = 1
        for d in self.shape:  # type: ignore[union-attr]
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * np.dtype(self.dtype).itemsize

    @staticmethod
    def of(array: np.ndarray) -> "TensorType":
        return TensorType(array.dtype.name, tuple(int(d) for d in array.shape))


def types_of(arrays) -> list[TensorType | None]:
    """The types of run-time arrays (None stays None: an omitted optional input)."""
    return [None if a is None else TensorType.of(np.asarray(a)) for a in arrays]

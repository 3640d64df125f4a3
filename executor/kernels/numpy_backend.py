"""The numpy kernel backend: aircc's reference backend, covering every op.

Its kernels are numpy (and numpy's own CBLAS, :mod:`.blas`) writing into device
memory; an op or a use of an op without a native kernel runs onnx's reference
implementation in the same device path (:mod:`.fallback`).  It is found by the
compiler and the runtime as the entry point ``numpy`` of the group
``aircc.kernel_backends`` (``pyproject.toml``), never imported by them.

A kernel module registers its kernels with ``@NUMPY.kernel(op, since)`` on a class
with ``kernel``, and optionally ``tiling`` and ``prepare``, static methods; adding a
module means adding it to :data:`KERNEL_MODULES` (see ``docs/adding-an-op.md``).
"""
from __future__ import annotations

import importlib

from aircc.ops.backend import KernelBackend

#: The modules of this package that register kernels, imported when the backend loads.
KERNEL_MODULES = ("elementwise", "binary", "gelu", "softmax", "reduce", "gemm", "attention",
                  "fused", "conv", "pool", "norm", "spatial", "shape_ops", "movement",
                  "constant", "misc", "control_tasks", "rnn", "ml", "scatter", "optional",
                  "quant_linear", "quant_gemm", "quant_nbits", "quant_conv", "quant_pool",
                  "quant_elementwise", "quant_rnn", "quant_attention")
KERNEL_MODULES += ("contrib_activation", "contrib_norm", "contrib_matmul", "contrib_attention", "contrib_gqa", "contrib_position")
KERNEL_MODULES += ("ml_svm", "ml_features")


def _load_kernels() -> None:
    for name in KERNEL_MODULES:
        importlib.import_module(f"{__package__}.{name}")


def _fallback(op: str, version: int | None, domain: str):
    from .fallback import fallback_impl

    return fallback_impl(op, version, domain)


def _host_vector_class() -> str:
    from .blas import core_name, vector_class

    return vector_class(core_name())


NUMPY = KernelBackend(
    "numpy", "numpy kernels writing into device memory; onnx's reference ops as the fallback",
    vector_classes=("avx2", "avx512"), loader=_load_kernels, fallback=_fallback,
    host_vector_class=_host_vector_class)

"""The oneDNN kernel backend: oneDNN 3.2's primitives (through :mod:`..dnnl`, its C API by
ctypes) as the device's kernel library.

Its kernels make one primitive per task when the task is bound (weights reordered then
into the layout the implementation wants, the epilogue as post-ops, the scratchpad in
the task's workspace) and run it with one call; an op it has no kernel for, and a use
of an op oneDNN does not implement, run the numpy backend's kernel on the same device
memory (its ``base``).  It wants convolutions, pools and batch normalisation
channels-last, so the compiler plans their regions NHWC (pass ``plan-layouts``).

It is declared as the entry point ``dnnl`` of ``aircc.kernel_backends`` and runs where
the library loads: x86-64 Linux with the ``onednn-cpu-gomp`` wheel (a dependency there).
"""
from __future__ import annotations

import importlib

from aircc.ops.backend import KernelBackend
from aircc.ops.layout import SPATIAL_INPUTS
from aircc.ops.precision import COMPUTE_DTYPE

#: The modules of this package that register kernels, imported when the backend loads.
KERNEL_MODULES = ("conv", "pool", "matmul", "eltwise", "instance_norm", "attention", "movement", "resize",
                  "rnn")

#: Ops this backend runs channels-last (the layout its convolution kernels are fast in).
CHANNELS_LAST_OPS = ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
                     "GlobalMaxPool", "BatchNormalization", "InstanceNormalization", "Resize")


def _load_kernels() -> None:
    from aircc.executor.device.threads import openmp_in_use

    for name in KERNEL_MODULES:
        importlib.import_module(f"{__package__}.{name}")
    openmp_in_use()


def _unavailable() -> str | None:
    from aircc.executor.kernels.dnnl.library import unavailable_reason

    return unavailable_reason()


def _host_vector_class() -> str:
    from aircc.executor.kernels.dnnl.library import effective_isa

    return "avx512" if "avx512" in effective_isa() else "avx2"


DNNL = KernelBackend("dnnl", "oneDNN 3.2 primitives, numpy for the rest", ("avx2", "avx512"),
                     loader=_load_kernels, host_vector_class=_host_vector_class, base="numpy",
                     unavailable=_unavailable, kernels_span_cores=True)


def _float_activations(types: list, attrs: dict, target) -> bool:
    """Float32 activations, or the bfloat16 ones of a bfloat16 kernel (a chain)."""
    x = types[0] if types else None
    dtypes = ("float32", "bfloat16") if attrs.get(COMPUTE_DTYPE) == "bfloat16" else ("float32",)
    return x is not None and x.dtype in dtypes and x.shape is not None and len(x.shape) >= 3


for _op in CHANNELS_LAST_OPS:
    assert _op in SPATIAL_INPUTS, _op
    DNNL.channels_last(_op)(_float_activations)

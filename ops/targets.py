"""Compile targets: the kernel backend and the vector class a model is compiled for.

In the spirit of an offline compiler's ``--soc_version``, a target fixes what the
compile may assume about the machine that runs the model: which kernel backend
runs its kernels (and so which tiling and weight layouts are planned) and which
class of vector instructions the tilings were tuned for (the Winograd
thresholds, for instance, differ between AVX2 and AVX-512 GEMMs).  It is
recorded in the .om (section ``model``, field ``target``), shown by ``aircc
inspect`` and checked when the model is loaded (:mod:`aircc.ops.machine`: a machine
that lacks the backend or the vector class refuses the file).

``native`` means this machine: the oneDNN backend where it runs (x86-64 Linux with the
library installed), else numpy's, tuned for the vector class their kernels run with
here.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_BACKEND = "numpy"
"""The portable backend, on every machine."""
FAST_BACKEND = "dnnl"
"""The backend ``native`` prefers where it runs (oneDNN, on x86-64 Linux)."""
NATIVE = "native"

#: Vector classes by the CPU flags that must all be present, narrowest first.
VECTOR_CLASS_FLAGS: dict[str, tuple[str, ...]] = {
    "avx2": ("avx2", "fma"),
    "avx512": ("avx2", "fma", "avx512f", "avx512bw", "avx512vl"),
}


@dataclass(frozen=True)
class Target:
    """What a compile assumes about the machine that runs the model."""

    name: str
    """The name given to ``--target`` (``cpu-avx2``, ...)."""
    backend: str
    """The kernel backend that runs the kernels."""
    vector_class: str
    """The vector instructions the tilings were tuned for."""
    winograd: str | None = None
    """The Winograd mode the oneDNN backend's conv tilings use (``auto``, ``off``, ``2``,
    ``4``): a compile sets its ``CompileOptions.winograd``; None (a dynamic model's run-time
    tiling): ``$AIRCC_WINOGRAD``.  Not recorded in the .om: the tilings it chose are."""

    def describe(self) -> str:
        return f"{self.name} (kernel backend {self.backend}, vector class {self.vector_class})"


TARGETS: dict[str, Target] = {
    "cpu-avx2": Target("cpu-avx2", DEFAULT_BACKEND, "avx2"),
    "cpu-avx512": Target("cpu-avx512", DEFAULT_BACKEND, "avx512"),
    "dnnl-avx2": Target("dnnl-avx2", FAST_BACKEND, "avx2"),
    "dnnl-avx512": Target("dnnl-avx512", FAST_BACKEND, "avx512"),
}


def target_names() -> list[str]:
    return [NATIVE, *TARGETS]

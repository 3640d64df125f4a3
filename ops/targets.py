"""Compile targets: the kernel backend and the vector class a model is compiled for.

In the spirit of an offline compiler's ``--soc_version``, a target fixes what the
compile may assume about the machine that runs the model: which kernel backend
runs its kernels (and so which tiling and weight layouts are planned) and which
class of vector instructions the tilings were tuned for (the Winograd
thresholds, for instance, differ between AVX2 and AVX-512 GEMMs).  It is
recorded in the .om (section ``model``, field ``target``), shown by ``aircc
inspect`` and checked when the model is loaded: a machine that lacks the backend
or the vector class refuses the file with :class:`~aircc.errors.TargetUnavailableError`.

``native`` means this machine: the default backend, tuned for the vector class its
kernels run with here.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from aircc.errors import CompileOptionError, TargetUnavailableError

from .backend import available_backends, kernel_backend

DEFAULT_BACKEND = "numpy"
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

    def to_payload(self) -> dict:
        return {"name": self.name, "backend": self.backend, "vector_class": self.vector_class}

    def describe(self) -> str:
        return f"{self.name} (kernel backend {self.backend}, vector class {self.vector_class})"


TARGETS: dict[str, Target] = {
    "cpu-avx2": Target("cpu-avx2", DEFAULT_BACKEND, "avx2"),
    "cpu-avx512": Target("cpu-avx512", DEFAULT_BACKEND, "avx512"),
}


def target_names() -> list[str]:
    return [NATIVE, *TARGETS]


def resolve_target(name: str | None = None) -> Target:
    """The target called ``name``; None takes the configured default
    (``$AIRCC_TARGET``, else ``native``: this machine's)."""
    if name is None:
        from aircc.config import settings

        name = settings().target
    if name == NATIVE:
        return native_target()
    found = TARGETS.get(name)
    if found is None:
        raise CompileOptionError(f"unknown target {name!r}; known targets: "
                                 f"{', '.join(target_names())}")
    return found


@functools.lru_cache(maxsize=None)
def native_target() -> Target:
    """This machine's target: the default backend, at the vector class it runs with here."""
    cls = kernel_backend(DEFAULT_BACKEND).host_vector_class()
    return TARGETS[f"cpu-{cls}"]


@functools.lru_cache(maxsize=None)
def host_vector_classes() -> tuple[str, ...]:
    """The vector classes this machine's CPU offers (from /proc/cpuinfo's flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f
                          if line.startswith("flags")), set())
    except OSError:
        flags = set()
    if not flags:       # no x86 flags to read (another OS or architecture): cannot tell
        return tuple(VECTOR_CLASS_FLAGS)
    return tuple(c for c, need in VECTOR_CLASS_FLAGS.items() if flags.issuperset(need))


def check_target(recorded: dict, what: str = "this model") -> Target:
    """The target a file records, if this machine offers it; else TargetUnavailableError
    naming what the file needs and what the machine has."""
    target = Target(recorded["name"], recorded["backend"], recorded["vector_class"])
    backends = available_backends()
    if target.backend not in backends:
        raise TargetUnavailableError(
            f"{what} was compiled for target {target.describe()}, but kernel backend "
            f"'{target.backend}' is not installed here (installed: {', '.join(backends) or 'none'})")
    offered = host_vector_classes()
    if target.vector_class not in offered:
        raise TargetUnavailableError(
            f"{what} was compiled for target {target.describe()}, but this machine's CPU offers "
            f"vector classes {', '.join(offered) or 'none'}; recompile it with --target "
            f"{' or '.join(n for n, t in TARGETS.items() if t.vector_class in offered) or NATIVE}")
    if target.vector_class not in kernel_backend(target.backend).vector_classes:
        raise TargetUnavailableError(
            f"{what} was compiled for target {target.describe()}, but kernel backend "
            f"'{target.backend}' here has tunings for {', '.join(kernel_backend(target.backend).vector_classes)}")
    return target

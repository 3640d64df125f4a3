"""This machine against a compile target: what it offers, what ``native`` means here, and
whether a model's recorded target can run.

A target names a kernel backend and a vector class (:mod:`aircc.ops.targets`).
This machine offers the backends installed here (:func:`aircc.ops.available_backends`)
and the vector classes its CPU's flags allow (:func:`host_vector_classes`); a model
compiled for something it lacks is refused at load with
:class:`~aircc.errors.TargetUnavailableError` naming both sides.
"""
from __future__ import annotations

import functools

from aircc.errors import CompileOptionError, ConfigError, TargetUnavailableError

from .backend import available_backends, backend_unavailable, kernel_backend
from .precision import BF16_ISA
from .targets import (DEFAULT_BACKEND, FAST_BACKEND, NATIVE, TARGETS, VECTOR_CLASS_FLAGS, Target,
                      target_names)


def resolve_target(name: str | None = None) -> Target:
    """The target called ``name``; None takes the configured default
    (``$AIRCC_TARGET``, else ``native``: this machine's)."""
    from_env = name is None
    if from_env:
        from aircc.config import settings

        name = settings().target
    if name == NATIVE:
        return native_target()
    found = TARGETS.get(name)
    if found is None:
        if from_env:
            raise ConfigError(f"AIRCC_TARGET={name!r} is not a target; known targets: "
                              f"{', '.join(target_names())}")
        raise CompileOptionError(f"unknown target {name!r}; known targets: "
                                 f"{', '.join(target_names())}")
    return found


@functools.lru_cache(maxsize=None)
def native_target() -> Target:
    """This machine's target: the oneDNN backend where it can run, else numpy's, at the
    vector class it runs with here."""
    if backend_unavailable(FAST_BACKEND) is None:
        cls = kernel_backend(FAST_BACKEND).host_vector_class()
        return TARGETS[f"{FAST_BACKEND}-{cls}"]
    cls = kernel_backend(DEFAULT_BACKEND).host_vector_class()
    return TARGETS[f"cpu-{cls}"]


@functools.lru_cache(maxsize=None)
def host_cpu_flags() -> frozenset[str]:
    """The flags of this machine's CPU (/proc/cpuinfo; empty where there are none to read)."""
    try:
        with open("/proc/cpuinfo") as f:
            return frozenset(next((line.split(":", 1)[1].split() for line in f
                                   if line.startswith("flags")), ()))
    except OSError:
        return frozenset()


@functools.lru_cache(maxsize=None)
def host_vector_classes() -> tuple[str, ...]:
    """The vector classes this machine's CPU offers (from /proc/cpuinfo's flags)."""
    flags = host_cpu_flags()
    if not flags:       # no x86 flags to read (another OS or architecture): cannot tell
        return tuple(VECTOR_CLASS_FLAGS)
    return tuple(c for c, need in VECTOR_CLASS_FLAGS.items() if flags.issuperset(need))


def check_precision(mode: str, what: str = "this model") -> None:
    """TargetUnavailableError when a file's ``--precision_mode`` needs an ISA this CPU
    lacks (the bfloat16 modes: AVX512-BF16 or AMX-BF16), naming both."""
    if "bf16" not in mode:
        return
    flags = host_cpu_flags()
    if flags and not flags & set(BF16_ISA):
        raise TargetUnavailableError(
            f"{what} was compiled with --precision_mode {mode}, whose bfloat16 kernels need "
            f"{' or '.join(BF16_ISA.values())}, which this machine's CPU lacks; recompile it "
            f"with --precision_mode must_keep_origin_dtype")


def check_target(recorded: Target, what: str = "this model") -> Target:
    """The target a file records (its name, backend and vector class), if this machine
    offers it; else TargetUnavailableError naming what the file needs and what the
    machine has."""
    target = Target(recorded.name, recorded.backend, recorded.vector_class)
    reason = backend_unavailable(target.backend)
    if reason is not None:
        raise TargetUnavailableError(
            f"{what} was compiled for target {target.describe()}, but {reason} (installed "
            f"and able to run: {', '.join(available_backends()) or 'none'}); recompile it with "
            f"--target native")
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

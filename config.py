"""Every environment variable aircc honours, read in one place.

Defaults of the compile and of the runtime come from here; no other module
reads ``os.environ``.  :func:`settings` reads the environment when first asked
and keeps the result (:func:`reload` reads it again, for a program that changes
its environment on purpose).  An invalid value raises
:class:`~aircc.errors.ConfigError` naming the variable and the values it allows.

=============================  ==========================================================
``AIRCC_TARGET``               default ``aircc compile --target`` (``native``, ``cpu-avx2``,
                               ``cpu-avx512``); default ``native``
``AIRCC_VECTOR_CLASS``         older spelling: ``avx2`` or ``avx512`` selects ``cpu-<class>``
                               when ``AIRCC_TARGET`` is not set
``AIRCC_BLAS``                 ``numpy``: the numpy backend's GEMM with accumulate computes
                               with numpy alone instead of calling its CBLAS
``AIRCC_WINOGRAD``             the oneDNN backend's Winograd convolutions: the default of
                               ``CompileOptions.winograd`` (``aircc compile --winograd``) and
                               a dynamic model's run-time tiling: ``auto`` (default: where
                               they pay), ``off``, ``2`` or ``4`` (that tile wherever a conv
                               qualifies)
``AIR_DEVICE_MEMORY``          capacity of a new virtual device (``512M``, ``8G``); default 8G
``AIR_DEVICE_CPUS``            CPUs a new device's stream workers run on (``0``, ``0-1``)
``AIR_RUNTIME_CORE_NUMBER``    dynamic models' host threads: 1 or 3 (default 3)
``AIRCC_RUN_TIMEOUT``          deadline of every run in seconds, when neither ``run()`` nor
                               ``load()`` gives one (default 600)
``AIRCC_RECOVERY``             default recovery policy of loaded models
                               (:class:`aircc.executor.runtime.recovery.RecoveryPolicy`)
``AIRCC_FAULTS``               faults to inject (:mod:`aircc.faults`), e.g. ``hang@node=conv1``
``AIR_FAULT_DETECTION_MS``     a heartbeat every this many milliseconds on each device
                               discovery finds: a device that misses 3 in a row goes to
                               FAULT (:mod:`aircc.executor.device.heartbeat`); default off
``AIRCC_THREADS``              threads every pool aircc drives may use (default: the CPUs
                               this process may use)
``AIRCC_ADAPT_THREADS``        ``1`` (default): oneDNN's OpenMP teams shrink while other
                               processes keep CPUs busy; ``0``: always the full count
``AIRCC_SPIN_US``              microseconds a device worker spins for new work before it
                               sleeps (default 100; the host spins for runs shorter than 5x
                               that); 0: never spin (:mod:`aircc.executor.device.doorbell`)
``AIR_DEVICE_CONFIG``          a JSON file describing the virtual devices to discover
                               (docs/runtime.md); default one device sized from the host
``AIR_VISIBLE_DEVICES``        which configured devices this process sees, and in what
                               order (physical ids, e.g. ``2,0``), like
                               ``ASCEND_RT_VISIBLE_DEVICES``
``AIR_LOG``                    log level printed on stderr: ``debug``, ``info``,
                               ``warning``, ``error`` (default: nothing; :mod:`aircc.log`)
``AIRCC_CACHE_DIR``            where ``aircc.InferenceSession`` keeps the .om files it compiles
                               from .onnx models (default ``~/.cache/aircc``)
=============================  ==========================================================
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from aircc.errors import ConfigError

DEFAULT_DEVICE_MEMORY = 8 << 30

#: Every variable read here, with what it sets (``aircc --help`` and the README list them).
VARIABLES = {
    "AIRCC_TARGET": "default compile target",
    "AIRCC_VECTOR_CLASS": "older spelling of the target: avx2 or avx512 selects cpu-<class>",
    "AIRCC_BLAS": "numpy: GEMM with accumulate in numpy alone, not numpy's CBLAS",
    "AIRCC_WINOGRAD": "oneDNN backend's Winograd convs: auto (default), off, 2 or 4",
    "AIR_DEVICE_MEMORY": "capacity of a new virtual device (default 8G)",
    "AIR_DEVICE_CPUS": "CPUs a new device's stream workers run on (default: not pinned)",
    "AIR_RUNTIME_CORE_NUMBER": "dynamic models' host threads, 1 or 3 (default 3)",
    "AIRCC_RUN_TIMEOUT": "deadline of every run in seconds (default 600)",
    "AIRCC_RECOVERY": "default recovery policy, e.g. retries=1,device_lost=reset",
    "AIRCC_FAULTS": "faults to inject, e.g. hang@node=conv1,seconds=2;kernel_error@run=3",
    "AIR_FAULT_DETECTION_MS": "ms between heartbeats of each device, e.g. 100 (default: off)",
    "AIRCC_THREADS": "threads every pool aircc drives may use (default: the CPUs available)",
    "AIRCC_ADAPT_THREADS": "1 (default): OpenMP teams shrink while other processes keep CPUs busy; 0: never",
    "AIRCC_SPIN_US": "microseconds a device worker spins for work before it sleeps (default 100; 0: never)",
    "AIR_DEVICE_CONFIG": "JSON file describing the virtual devices (default: one, sized from the host)",
    "AIR_VISIBLE_DEVICES": "physical ids of the devices this process sees, in order, e.g. 2,0",
    "AIR_LOG": "log level printed on stderr: debug, info, warning or error (default: none)",
    "AIRCC_CACHE_DIR": "folder of the .om files InferenceSession compiles (default ~/.cache/aircc)",
}

DEFAULT_RUN_TIMEOUT = 600.0
DEFAULT_SPIN_US = 100
DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "aircc")


def parse_bytes(text: str) -> int:
    """``"512M"``, ``"4G"``, ``"1048576"`` -> bytes; ValueError when it is not a size."""
    raw = text
    text = text.strip().upper().rstrip("B").rstrip("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    try:
        if text and text[-1] in scale:
            value = int(float(text[:-1]) * scale[text[-1]])
        else:
            value = int(text)
    except ValueError:
        raise ValueError(f"{raw!r} is not a size (e.g. 512M, 8G or a number of bytes)") from None
    if value <= 0:
        raise ValueError(f"{raw!r} is not a positive size")
    return value


#: The oneDNN backend's Winograd modes: the shape rule, never, or that tile wherever it can.
WINOGRAD_MODES = ("auto", "off", "2", "4")


@dataclass(frozen=True)
class Settings:
    """The defaults the environment sets."""

    target: str = "native"
    blas: str = "cblas"
    """``cblas`` (numpy's own CBLAS) or ``numpy``."""
    winograd: str = "auto"
    """The oneDNN backend's Winograd mode: ``auto``, ``off``, ``2`` or ``4``."""
    device_memory: int = DEFAULT_DEVICE_MEMORY
    device_cpus: str | None = None
    runtime_core_number: int = 3
    run_timeout: float = DEFAULT_RUN_TIMEOUT
    """Seconds a run may take when neither ``run()`` nor ``load()`` says."""
    recovery: str = ""
    """The default recovery policy's text (parsed by the runtime)."""
    faults: str = ""
    """Faults to inject (parsed by :mod:`aircc.faults`)."""
    fault_detection: float | None = None
    """Seconds between two heartbeats of each discovered device (None: fault detection off)."""
    threads: int | None = None
    """Threads aircc's pools may use; None: the CPUs this process may use."""
    adapt_threads: bool = True
    """Shrink OpenMP teams to the CPUs other processes leave free."""
    spin_us: int = DEFAULT_SPIN_US
    """Microseconds a device worker spins for work before it sleeps (0: it never spins)."""
    device_config: str | None = None
    """Path of the device configuration (JSON); None: one device sized from the host."""
    visible_devices: tuple[int, ...] | None = None
    """Physical ids of the devices to use, in order; None: every configured one."""
    log: str = ""
    """Log level to print (``aircc.log``); empty: none."""
    cache_dir: str = DEFAULT_CACHE_DIR
    """Folder of the compile cache of ``aircc.InferenceSession`` (an absolute path)."""


def _check_cpus(text: str) -> str:
    """``AIR_DEVICE_CPUS`` as given, if it is a CPU list of CPUs this process may use."""
    spec = text.replace(" ", "")
    if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", spec):
        raise ConfigError(f"AIR_DEVICE_CPUS={text!r} is not a CPU list; expected e.g. 0, 0,1 "
                          f"or 0-3 (or unset: not pinned)")
    cpus = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if not cpus or (allowed is not None and not cpus <= allowed):
        raise ConfigError(f"AIR_DEVICE_CPUS={text!r}: CPUs {sorted(cpus)} are not all available "
                          f"to this process (available: {sorted(allowed or ())})")
    return text


def _cache_dir(text: str) -> str:
    """``AIRCC_CACHE_DIR`` as an absolute path (empty: the default), unless it names a file."""
    path = os.path.abspath(os.path.expanduser(text.strip())) if text.strip() else DEFAULT_CACHE_DIR
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"AIRCC_CACHE_DIR={text!r} is a file, not a folder; give a folder "
                          f"for the compile cache (or unset: {DEFAULT_CACHE_DIR})")
    return path


def _read(env) -> Settings:
    target = env.get("AIRCC_TARGET") or None
    if target is None and env.get("AIRCC_VECTOR_CLASS"):
        cls = env["AIRCC_VECTOR_CLASS"]
        if cls not in ("avx2", "avx512"):
            raise ConfigError(f"AIRCC_VECTOR_CLASS={cls!r} is not a vector class; "
                              f"expected avx2 or avx512 (or unset)")
        target = f"cpu-{cls}"
    blas = (env.get("AIRCC_BLAS") or "cblas").lower()
    if blas not in ("cblas", "numpy"):
        raise ConfigError(f"AIRCC_BLAS={env['AIRCC_BLAS']!r}: expected numpy or cblas (or unset)")
    winograd = (env.get("AIRCC_WINOGRAD") or "auto").strip().lower()
    if winograd not in WINOGRAD_MODES:
        raise ConfigError(f"AIRCC_WINOGRAD={env['AIRCC_WINOGRAD']!r}: expected auto, off, 2 or 4 "
                          f"(or unset: auto)")
    memory = DEFAULT_DEVICE_MEMORY
    if env.get("AIR_DEVICE_MEMORY"):
        try:
            memory = parse_bytes(env["AIR_DEVICE_MEMORY"])
        except ValueError as e:
            raise ConfigError(f"AIR_DEVICE_MEMORY: {e}") from None
    cpus = _check_cpus(env["AIR_DEVICE_CPUS"]) if env.get("AIR_DEVICE_CPUS") else None
    cores = env.get("AIR_RUNTIME_CORE_NUMBER") or "3"
    if cores.strip() not in ("1", "3"):
        raise ConfigError(f"AIR_RUNTIME_CORE_NUMBER={cores!r}: must be 1 (sequential) or "
                          f"3 (pipelined)")
    timeout = DEFAULT_RUN_TIMEOUT
    if env.get("AIRCC_RUN_TIMEOUT"):
        raw = env["AIRCC_RUN_TIMEOUT"]
        try:
            timeout = float(raw)
        except ValueError:
            timeout = math.nan
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ConfigError(f"AIRCC_RUN_TIMEOUT={raw!r}: expected a positive number of "
                              f"seconds (default {DEFAULT_RUN_TIMEOUT:g})")
    faults = env.get("AIRCC_FAULTS") or ""
    if faults:
        from aircc.faults import parse

        try:
            parse(faults)
        except ValueError as e:
            raise ConfigError(f"AIRCC_FAULTS={faults!r}: {e}") from None
    fault_detection = None
    if env.get("AIR_FAULT_DETECTION_MS"):
        from aircc.executor.device.heartbeat import interval_from_ms

        try:
            fault_detection = interval_from_ms(env["AIR_FAULT_DETECTION_MS"],
                                               "AIR_FAULT_DETECTION_MS")
        except ValueError as e:
            raise ConfigError(str(e)) from None
    threads = None
    if env.get("AIRCC_THREADS"):
        raw = env["AIRCC_THREADS"].strip()
        if not raw.isdigit() or int(raw) < 1:
            raise ConfigError(f"AIRCC_THREADS={env['AIRCC_THREADS']!r}: expected a whole number "
                              f">= 1 (or unset: the CPUs this process may use)")
        threads = int(raw)
    adapt = (env.get("AIRCC_ADAPT_THREADS") or "1").strip()
    if adapt not in ("0", "1"):
        raise ConfigError(f"AIRCC_ADAPT_THREADS={env['AIRCC_ADAPT_THREADS']!r}: expected 1 "
                          f"(teams shrink while other processes keep CPUs busy) or 0 (or unset: 1)")
    spin = DEFAULT_SPIN_US
    if env.get("AIRCC_SPIN_US"):
        raw = env["AIRCC_SPIN_US"].strip()
        if not raw.isdigit() or int(raw) > 100_000:
            raise ConfigError(f"AIRCC_SPIN_US={env['AIRCC_SPIN_US']!r}: expected a whole number "
                              f"of microseconds from 0 to 100000 (or unset: {DEFAULT_SPIN_US})")
        spin = int(raw)
    visible = None
    if env.get("AIR_VISIBLE_DEVICES") is not None:
        raw = env["AIR_VISIBLE_DEVICES"].replace(" ", "")
        if not re.fullmatch(r"(\d+(,\d+)*)?", raw):
            raise ConfigError(f"AIR_VISIBLE_DEVICES={env['AIR_VISIBLE_DEVICES']!r}: expected "
                              f"physical device ids separated by commas, e.g. 0,1 or 2,0")
        visible = tuple(int(x) for x in raw.split(",") if x)
        if len(set(visible)) != len(visible):
            raise ConfigError(f"AIR_VISIBLE_DEVICES={env['AIR_VISIBLE_DEVICES']!r} names a "
                              f"device twice")
    log = (env.get("AIR_LOG") or "").strip().lower()
    if log and log not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"AIR_LOG={env['AIR_LOG']!r}: expected debug, info, warning or error "
                          f"(or unset: no log)")
    cache_dir = _cache_dir(env.get("AIRCC_CACHE_DIR") or "")
    return Settings(target=target or "native", blas=blas, winograd=winograd, device_memory=memory,
                    device_cpus=cpus, runtime_core_number=int(cores), run_timeout=timeout,
                    recovery=env.get("AIRCC_RECOVERY") or "", faults=faults,
                    fault_detection=fault_detection,
                    threads=threads, adapt_threads=adapt == "1", spin_us=spin,
                    device_config=env.get("AIR_DEVICE_CONFIG") or None,
                    visible_devices=visible, log=log, cache_dir=cache_dir)


_settings: Settings | None = None


def settings() -> Settings:
    """The settings of this process's environment (read once)."""
    global _settings
    if _settings is None:
        _settings = _read(os.environ)
    return _settings


def reload() -> Settings:
    """Read the environment again (after a program changed it on purpose)."""
    global _settings
    _settings = None
    return settings()

"""aircc: compile ONNX models to offline .om files and run them on a virtual device.

    import aircc
    aircc.compile("model.onnx", "model.om")
    model = aircc.load("model.om")
    outputs = model.run({"data_0": x})      # dict: output name -> numpy array
"""
from __future__ import annotations

import os

from .errors import (AirccError, DeviceLostError, DeviceOutOfMemoryError,  # noqa: F401
                     InputError, KernelError, ModelClosedError, ModelFormatError,
                     ModelImportError, RunTimeoutError, ShapeInferenceError,
                     TargetUnavailableError, UnsupportedOpError)

__version__ = "0.1.0"


def compile(source, output: str | os.PathLike | None = None, *, streams: int | None = None,
            input_shapes: dict | None = None, mode: str = "auto",
            dynamic_batch: list[int] | None = None, passes: list[str] | None = None,
            min_branch_bytes: int | None = None, split_matrix_branches: bool = False,
            target: str | None = None, channels_last: bool | None = None):
    """Compile an ONNX model (path, bytes or ModelProto); write ``output`` if given.

    ``target`` names the compile target (``native``, ``cpu-avx2``, ``cpu-avx512``; default
    ``$AIRCC_TARGET`` or ``native``); ``channels_last`` plans convolution regions NHWC
    (None: as the target's kernel backend wants).  Returns the
    :class:`~aircc.compiler.driver.CompiledModel` (its ``om``, optimised ``graph`` and
    compile ``report``).
    """
    from .compiler.driver import CompileOptions, compile_model

    compiled = compile_model(source, CompileOptions(streams=streams,
                                                    input_shapes=dict(input_shapes or {}),
                                                    mode=mode, dynamic_batch=dynamic_batch,
                                                    passes=passes,
                                                    min_branch_bytes=min_branch_bytes,
                                                    split_matrix_branches=split_matrix_branches,
                                                    target=target, channels_last=channels_last))
    if output is not None:
        compiled.save(output)
    return compiled


def load(source, device=None, *, runtime_core_number: int | None = None, pad_to_gear: bool = False,
         replay: bool = True, timeout: float | None = None, recovery=None):
    """Load an .om (path, bytes, OmFile, or what :func:`compile` returned) onto ``device``
    (default: device 0); returns a :class:`~aircc.executor.runtime.loaded.LoadedModel`.

    ``runtime_core_number``: 1 (sequential) or 3 (pipelined) host execution of
    dynamic models; ``pad_to_gear``: let gear models pad a batch up to the next gear;
    ``replay``: let a dynamic model replay the launches of a run for inputs of the same
    shapes; ``timeout``: each run's deadline in seconds (default ``$AIRCC_RUN_TIMEOUT``);
    ``recovery``: a :class:`RecoveryPolicy` (default ``$AIRCC_RECOVERY``).
    """
    from .compiler.driver import CompiledModel
    from .executor.runtime.loader import load_model

    if isinstance(source, CompiledModel):
        source = source.om
    return load_model(source, device, runtime_core_number=runtime_core_number,
                      pad_to_gear=pad_to_gear, replay=replay, timeout=timeout, recovery=recovery)


def RecoveryPolicy(**fields):
    """What a loaded model does when a run fails (:mod:`aircc.executor.runtime.recovery`):
    ``retries``, ``out_of_memory``, ``timeout_retries``, ``timeout_factor``,
    ``device_lost``, ``failover_devices``."""
    from .executor.runtime.recovery import RecoveryPolicy as Policy

    return Policy(**fields)


def set_threads(n: int | None = None) -> int:
    """Let every thread pool aircc drives (numpy's OpenBLAS, oneDNN's OpenMP, the device's
    stream workers) use ``n`` threads (None: ``$AIRCC_THREADS``, else the CPUs this
    process may use); returns the count in force.  Set it before creating devices."""
    from .executor.device.threads import set_threads as apply

    return apply(n)


def VirtualDevice(memory_bytes: int | None = None, device_id: int = 0, cpus=None):
    """A new virtual device with ``memory_bytes`` of memory, its stream workers on ``cpus``
    (e.g. ``"0"``; default ``$AIR_DEVICE_CPUS``, else not pinned)."""
    from .executor.device.device import VirtualDevice as Device

    return Device(memory_bytes, device_id, cpus)

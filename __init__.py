"""aircc: compile ONNX models to offline .om files and run them on a virtual device.

    import aircc
    aircc.compile("model.onnx", "model.om")
    model = aircc.load("model.om")
    outputs = model.run({"data_0": x})      # dict: output name -> numpy array
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Literal, Sequence

from .errors import (AirccError, DeviceLostError, DeviceOutOfMemoryError,  # noqa: F401
                     InputError, KernelError, ModelClosedError, ModelFormatError,
                     ModelImportError, RunTimeoutError, ShapeInferenceError,
                     TargetUnavailableError, UnsupportedOpError)

__version__: str = "0.1.0"

if TYPE_CHECKING:                      # names for the annotations only
    import onnx

    from .compiler.driver import CompiledModel
    from .executor.device.caching_allocator import PoolOptions as _PoolOptions
    from .executor.device.device import VirtualDevice as _VirtualDevice
    from .executor.device.discovery import DeviceInfo
    from .executor.device.tensor import DeviceTensor  # noqa: F401
    from .executor.runtime.checkpoint import Checkpoint  # noqa: F401
    from .executor.runtime.loaded import LoadedModel
    from .executor.runtime.multi_device import MultiDeviceModel
    from .executor.runtime.recovery import RecoveryPolicy as _RecoveryPolicy
    from .formats import OmFile
    from .verification import VerifyReport


def compile(source: str | os.PathLike | bytes | onnx.ModelProto,
            output: str | os.PathLike | None = None, *, streams: int | None = None,
            input_shapes: dict[str, Sequence[int | str]] | None = None, mode: str = "auto",
            dynamic_batch: list[int] | None = None, passes: list[str] | None = None,
            min_branch_bytes: int | None = None, split_matrix_branches: bool = False,
            target: str | None = None, channels_last: bool | None = None,
            stream_priorities: dict[int, int] | None = None,
            winograd: str | None = None,
            precision_mode: str = "must_keep_origin_dtype") -> CompiledModel:
    """Compile an ONNX model (path, bytes or ModelProto); write ``output`` if given.

    ``target`` names the compile target (``native``, ``cpu-avx2``, ``cpu-avx512``; default
    ``$AIRCC_TARGET`` or ``native``); ``channels_last`` plans convolution regions NHWC
    (None: as the target's kernel backend wants); ``stream_priorities``: ``{stream index:
    priority}`` in [-7, 7] (higher is served first when streams share the device's compute
    units); ``winograd``: the oneDNN backend's Winograd mode, ``auto``, ``off``, ``2`` or ``4``
    (default ``$AIRCC_WINOGRAD``, else ``auto``); ``precision_mode``: the types the model
    computes in, ``must_keep_origin_dtype`` (its own) or ``force_fp32`` (float16 and
    bfloat16 computed in float32, inputs and outputs as declared).  Returns the
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
                                                    target=target, channels_last=channels_last,
                                                    stream_priorities=dict(stream_priorities or {}),
                                                    precision_mode=precision_mode,
                                                    **({"winograd": winograd} if winograd else {})))
    if output is not None:
        compiled.save(output)
    return compiled


def load(source: str | os.PathLike | bytes | OmFile | CompiledModel,
         device: _VirtualDevice | int | None = None, *,
         devices: Sequence[_VirtualDevice | int] | Literal["all"] | None = None,
         runtime_core_number: int | None = None,
         pad_to_gear: bool = False, replay: bool = True, timeout: float | None = None,
         recovery: _RecoveryPolicy | None = None,
         priority: int | str = 0, contexts: int | None = None,
         hint: str = "latency") -> LoadedModel | MultiDeviceModel:
    """Load an .om (path, bytes, OmFile, or what :func:`compile` returned) onto ``device``
    (a :class:`VirtualDevice` or a logical device id; default: logical device 0); returns
    a :class:`~aircc.executor.runtime.loaded.LoadedModel`.

    ``devices`` (a list of devices or logical ids, or ``"all"``): load it on each of them
    instead and return a :class:`~aircc.executor.runtime.multi_device.MultiDeviceModel`,
    whose ``run`` splits a batch across them.  ``priority``: its streams' priority on the
    device, in [-7, 7] or ``"low"``, ``"normal"``, ``"high"``.

    ``runtime_core_number``: 1 (sequential) or 3 (pipelined) host execution of
    dynamic models; ``pad_to_gear``: let gear models pad a batch up to the next gear;
    ``replay``: let a dynamic model replay the launches of a run for inputs of the same
    shapes; ``timeout``: each run's deadline in seconds (default ``$AIRCC_RUN_TIMEOUT``);
    ``recovery``: a :class:`RecoveryPolicy` (default ``$AIRCC_RECOVERY``).

    ``contexts``: how many runs the model takes at once, each in an execution context of
    its own (arena, streams, events) over weights held once; ``hint``: ``"latency"`` (one
    context on every CPU, the default) or ``"throughput"`` (a context per group of CPUs,
    each on its own group).  ``run_async`` queues requests onto the contexts.
    """
    from .executor.runtime.loader import load_model

    driver = sys.modules.get("aircc.compiler.driver")     # loading never imports the compiler
    if driver is not None and isinstance(source, driver.CompiledModel):
        source = source.om
    options = dict(runtime_core_number=runtime_core_number, pad_to_gear=pad_to_gear,
                   replay=replay, timeout=timeout, recovery=recovery, priority=priority)
    if devices is not None:
        from .executor.runtime.multi_device import MultiDeviceModel

        if devices == "all":
            devices = list(range(device_count()))
        return MultiDeviceModel(source, list(devices), **options)
    return load_model(source, device, contexts=contexts, hint=hint, **options)


def verify(model: str | os.PathLike | bytes | onnx.ModelProto, feeds: dict | None = None, *,
           input_shapes: dict[str, Sequence[int]] | None = None,
           modes: Sequence[str] = ("static", "dynamic"), target: str | None = None,
           rtol: float | None = None, atol: float | None = None, bisect: bool = True,
           seed: int = 0, compiled: CompiledModel | None = None) -> VerifyReport:
    """Compile ``model`` in each of ``modes`` (``static``, ``dynamic``), run it and the
    reference (onnxruntime, else onnx's ReferenceEvaluator) on ``feeds`` (inputs not given
    are generated from ``seed``; ``input_shapes`` sizes their symbolic dims), compare every
    output within ``rtol`` / ``atol`` (default per dtype), and on a mismatch name the
    first diverging node (``bisect``).  Returns a
    :class:`~aircc.verification.VerifyReport` (``passed``, ``modes``, ``to_dict()``);
    docs/cli.md (``aircc verify``) has the rules."""
    from .verification import verify as run

    return run(model, feeds, input_shapes=input_shapes, modes=modes, target=target, rtol=rtol,
               atol=atol, bisect=bisect, seed=seed, compiled=compiled)


def devices() -> list[DeviceInfo]:
    """Every device discovery found (:mod:`aircc.executor.device.discovery`): a
    ``DeviceInfo`` each (logical id, physical id, state, memory, compute units, probe
    time; an UNAVAILABLE one has no logical id and says why)."""
    from .executor.device.discovery import registry

    return list(registry().infos)


def device_count() -> int:
    """How many logical devices there are."""
    from .executor.device.discovery import registry

    return len(registry())


def device(logical_id: int = 0) -> _VirtualDevice:
    """The :class:`VirtualDevice` of logical id ``logical_id``."""
    from .executor.device.discovery import registry

    return registry().get(logical_id)


def PoolOptions(**fields: Any) -> _PoolOptions:
    """Settings of a device's caching allocator: ``initial_bytes``, ``growth_bytes``,
    ``reuse`` (:class:`aircc.executor.device.caching_allocator.PoolOptions`)."""
    from .executor.device.caching_allocator import PoolOptions as Options

    return Options(**fields)


def RecoveryPolicy(**fields: Any) -> _RecoveryPolicy:
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


def VirtualDevice(memory_bytes: int | None = None, device_id: int = 0,
                  cpus: str | set[int] | None = None, *, compute_units: int | None = None,
                  pool: _PoolOptions | None = None) -> _VirtualDevice:
    """A new virtual device apart from discovery, with ``memory_bytes`` of memory, its
    stream workers on ``cpus`` (e.g. ``"0"``; default ``$AIR_DEVICE_CPUS``, else not
    pinned), ``compute_units`` shared by its streams (default: its CPUs) and ``pool``
    (:func:`PoolOptions`)."""
    from .executor.device.device import VirtualDevice as Device

    return Device(memory_bytes, device_id, cpus, compute_units=compute_units, pool=pool)


#: onnxruntime's Python API (``aircc.InferenceSession`` ...; docs/from-onnxruntime.md), from
#: :mod:`aircc.session`, imported on first use (``import aircc`` stays light).
_ORT_API = ("InferenceSession", "NodeArg", "ModelMetadata", "get_available_providers",
            "get_device", "SessionOptions", "RunOptions", "GraphOptimizationLevel",
            "ExecutionMode", "OrtValue", "IOBinding")

if TYPE_CHECKING:
    from .session import (ExecutionMode, GraphOptimizationLevel, InferenceSession,  # noqa: F401
                          IOBinding, ModelMetadata, NodeArg, OrtValue, RunOptions,
                          SessionOptions, get_available_providers, get_device)


def __getattr__(name: str) -> Any:
    if name == "Checkpoint":           # saved tensors (docs/runtime.md), on first use
        from .executor.runtime.checkpoint import Checkpoint

        globals()[name] = Checkpoint
        return Checkpoint
    if name == "DeviceTensor":         # a value in device memory (docs/runtime.md)
        from .executor.device.tensor import DeviceTensor

        globals()[name] = DeviceTensor
        return DeviceTensor
    if name not in _ORT_API:
        raise AttributeError(f"module 'aircc' has no attribute {name!r}")
    from . import session

    value = getattr(session, name)
    globals()[name] = value
    return value

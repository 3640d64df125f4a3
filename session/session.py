"""An onnxruntime-compatible session: code written for ``onnxruntime.InferenceSession``
runs on aircc by changing the import.

    import aircc as ort                      # instead of: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {sess.get_inputs()[0].name: x})     # a list, in output order

An .onnx model (a path or its bytes) is compiled on first use and the .om kept in the
compile cache (:mod:`aircc.compile_cache`, ``$AIRCC_CACHE_DIR``), so the next session
of it loads instead of compiling; a model with symbolic input dims compiles dynamic.
An .om (path or bytes) is loaded as it is.  Inputs, outputs and metadata come from the
.om (its ``model`` section records what the ONNX model declared), so they read as
onnxruntime reads them from the ONNX file.  The model runs on one virtual device
(provider ``AirccVirtualDeviceProvider``; onnxruntime's provider names are accepted and
run there too).  ``sess.model`` is the underlying :class:`~aircc.executor.runtime.loaded.
LoadedModel` (``run_stats()``, ``close()``).
"""
from __future__ import annotations

import os
import time
import weakref
from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Sequence

import numpy as np
import onnx

from aircc import log
from .compile_cache import CacheLookup, cached_compile
from aircc.compiler.driver import CompileOptions
from aircc.compiler.passes.pipeline import DEFAULT_PIPELINE, get_pass
from aircc.errors import InputError, ModelImportError
from aircc.formats import OmFile, load_om
from aircc.formats.om import MAGIC
from .io_binding import IOBinding, OrtValue, ort_type
from .options import (MINIMAL_PIPELINE, GraphOptimizationLevel, RunOptions,
                                   SessionOptions, log_level)

#: The provider every session runs on.
PROVIDER = "AirccVirtualDeviceProvider"
#: onnxruntime's provider names: accepted, and run on aircc's virtual device.
ORT_PROVIDERS = (
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider",
    "OpenVINOExecutionProvider", "DnnlExecutionProvider", "VitisAIExecutionProvider",
    "QNNExecutionProvider", "NnapiExecutionProvider", "VSINPUExecutionProvider",
    "JsExecutionProvider", "CoreMLExecutionProvider", "DmlExecutionProvider",
    "RknpuExecutionProvider", "WebNNExecutionProvider", "WebGpuExecutionProvider",
    "XnnpackExecutionProvider", "CANNExecutionProvider", "AzureExecutionProvider",
    "ROCMExecutionProvider", "CPUExecutionProvider")
#: Options of ``AirccVirtualDeviceProvider`` (values may be strings, as onnxruntime's are).
PROVIDER_OPTIONS = ("device_id", "target", "mode", "winograd", "runtime_core_number", "timeout",
                    "priority", "pad_to_gear", "replay", "contexts", "hint", "precision_mode")
#: onnxruntime's ``ModelMetadata.version`` of a model that sets none.
NO_VERSION = 2**63 - 1


def get_available_providers() -> list[str]:
    """The providers a session can run on: aircc's virtual device."""
    return [PROVIDER]


def get_device() -> str:
    """What runs the models (onnxruntime says ``CPU`` or ``GPU``)."""
    return "AIRCC"


class NodeArg:
    """An input or output: ``name``, ``type`` (``tensor(float)``) and ``shape`` (ints, the
    names of symbolic dims, None for unnamed ones)."""

    def __init__(self, name: str, type: str, shape: list):
        self.name, self.type, self.shape = name, type, shape

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class ModelMetadata:
    """The model's metadata, as onnxruntime's ``get_modelmeta()`` gives it."""

    def __init__(self, producer_name: str = "", graph_name: str = "", domain: str = "",
                 description: str = "", graph_description: str = "", version: int = NO_VERSION,
                 custom_metadata_map: dict[str, str] | None = None):
        self.producer_name, self.graph_name, self.domain = producer_name, graph_name, domain
        self.description, self.graph_description = description, graph_description
        self.version = version
        self.custom_metadata_map = dict(custom_metadata_map or {})

    def __repr__(self) -> str:
        return (f"ModelMetadata(producer_name={self.producer_name!r}, graph_name="
                f"{self.graph_name!r}, domain={self.domain!r}, version={self.version})")


def shown_shape(compiled: tuple | None, declared: list | None) -> list:
    """A shape as onnxruntime shows it: the compiled model's fixed dims, and where the
    compiled shape has a symbol, what the ONNX model declared (a name, a size, or None)."""
    if compiled is None:
        return [] if declared is None else list(declared)
    if declared is None or len(declared) != len(compiled):
        return list(compiled)
    return [c if isinstance(c, int) else d for c, d in zip(compiled, declared)]


def resolve_providers(providers: Sequence | None,
                      provider_options: Sequence[dict] | None) -> dict[str, str]:
    """The options for aircc's provider from onnxruntime-style ``providers`` (names, or
    ``(name, options)`` pairs) and ``provider_options``; ValueError for a name neither aircc
    nor onnxruntime has, or for options aircc's provider does not take."""
    entries = [p if isinstance(p, (tuple, list)) else (p, {}) for p in (providers or [PROVIDER])]
    if provider_options is not None:
        if len(provider_options) != len(entries):
            raise ValueError(f"provider_options has {len(provider_options)} entries but "
                             f"providers has {len(entries)}: give one dict per provider")
        entries = [(name, {**dict(given), **dict(extra)})
                   for (name, given), extra in zip(entries, provider_options)]
    options: dict[str, str] = {}
    for name, given in entries:
        if name != PROVIDER and name not in ORT_PROVIDERS:
            raise ValueError(f"unknown provider {name!r}; aircc runs every model on {PROVIDER} "
                             f"and accepts onnxruntime's provider names for it "
                             f"({', '.join(ORT_PROVIDERS)})")
        if name == PROVIDER:
            unknown = sorted(set(given) - set(PROVIDER_OPTIONS))
            if unknown:
                raise ValueError(f"{PROVIDER} has no options {unknown}; its options are "
                                 f"{', '.join(PROVIDER_OPTIONS)}")
            options = {**{k: str(v) for k, v in given.items()}, **options}
        elif "device_id" in given:                    # e.g. CUDA's device_id: the device
            options.setdefault("device_id", str(given["device_id"]))
    return options


def _option(options: dict[str, str], key: str, kind: type, default: Any = None) -> Any:
    """A provider option as ``kind`` (ValueError naming it when it is not one)."""
    if key not in options:
        return default
    raw = options[key]
    try:
        if kind is bool:
            if raw.lower() not in ("1", "0", "true", "false"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true")
        return kind(raw)
    except ValueError:
        raise ValueError(f"{PROVIDER} option {key}={raw!r}: expected {kind.__name__}") from None


class InferenceSession:
    """A model to run, as ``onnxruntime.InferenceSession`` (see the module doc)."""

    def __init__(self, path_or_bytes: str | os.PathLike | bytes, sess_options: SessionOptions | None = None,
                 providers: Sequence | None = None, provider_options: Sequence[dict] | None = None,
                 **kwargs: Any):
        unknown = sorted(set(kwargs) - {"disabled_optimizers"})
        if unknown:
            raise TypeError(f"InferenceSession() got unexpected keyword arguments {unknown}; "
                            f"the one it takes is disabled_optimizers (aircc pass names)")
        if sess_options is not None and not isinstance(sess_options, SessionOptions):
            raise TypeError(f"sess_options must be an aircc.SessionOptions (import aircc as ort; "
                            f"ort.SessionOptions()), got {type(sess_options).__module__}."
                            f"{type(sess_options).__qualname__}")
        self._options = (sess_options if sess_options is not None else SessionOptions()).checked()
        self._provider_options = resolve_providers(providers, provider_options)
        self._disabled = list(kwargs.get("disabled_optimizers") or [])
        for name in self._disabled:
            get_pass(name)                          # PassError listing the passes there are
        self._profile_start_ns = 0
        self.compile_cache: CacheLookup | None = None
        """Where the compiled .om of an .onnx model is cached and whether it was compiled now."""
        with self._log():
            self._apply_threads()
            om = self._om(path_or_bytes)
            self._model = self._load(om)
        self._finalizer = weakref.finalize(self, self._model.close)
        model = om.parsed().model
        record = model.onnx
        self._inputs = [NodeArg(i.name, ort_type(i.dtype), shown_shape(
            i.shape, record.input_shapes.get(i.name) if record else None)) for i in model.inputs]
        self._outputs = [NodeArg(o.name, ort_type(o.dtype), shown_shape(
            o.shape, record.output_shapes.get(o.name) if record else None)) for o in model.outputs]
        self._meta = (ModelMetadata(record.producer_name, record.graph_name, record.domain,
                                    record.doc_string, record.graph_doc_string,
                                    NO_VERSION if record.model_version is None else record.model_version,
                                    record.metadata_props) if record is not None else
                      ModelMetadata(graph_name=model.name))
        self._profiling()

    # ---------------------------------------------------------------- making it
    def _log(self, run_options: RunOptions | None = None) -> ContextManager:
        """aircc's log at the run's or the session's severity while the block runs."""
        level = None
        if run_options is not None:
            level = log_level(run_options.log_severity_level, "RunOptions")
        if level is None:
            level = log_level(self._options.log_severity_level, "SessionOptions")
        return log.level(level) if level is not None else nullcontext()

    def _apply_threads(self) -> None:
        """``intra_op_num_threads`` as aircc's thread count (capped to the CPUs available)."""
        n = self._options.intra_op_num_threads
        if n:
            from aircc.executor.device.threads import available_cpus, set_threads

            cpus = len(available_cpus())
            if n > cpus:
                log.get("session").warning("intra_op_num_threads=%d: this process may use %d "
                                           "CPUs; using %d threads", n, cpus, cpus)
            set_threads(min(n, cpus))

    def _compile_options(self, model: onnx.ModelProto) -> CompileOptions:
        """The compile the options ask for: passes by optimisation level (less the disabled
        ones), target, mode and Winograd mode from the provider options, input shapes from
        free-dim overrides."""
        passes = (list(MINIMAL_PIPELINE) if self._options.graph_optimization_level
                  == GraphOptimizationLevel.ORT_DISABLE_ALL else None)
        if self._disabled:
            passes = [p for p in (passes or DEFAULT_PIPELINE) if p not in self._disabled]
        overrides = self._options.free_dimension_overrides
        shapes = {}
        weights = {t.name for t in model.graph.initializer}
        for v in model.graph.input:
            dims = v.type.tensor_type.shape.dim if v.type.HasField("tensor_type") else []
            if v.name not in weights and any(d.dim_param in overrides for d in dims):
                shapes[v.name] = [d.dim_value if d.HasField("dim_value") else
                                  overrides.get(d.dim_param, d.dim_param or f"{v.name}_{j}")
                                  for j, d in enumerate(dims)]
        given = {k: self._provider_options[k] for k in ("winograd", "precision_mode")
                 if k in self._provider_options}
        return CompileOptions(passes=passes, input_shapes=shapes,
                              target=self._provider_options.get("target"),
                              mode=self._provider_options.get("mode", "auto"), **given)

    def _om(self, source: str | os.PathLike | bytes) -> OmFile:
        """The .om of ``source``: read as it is, or compiled (through the cache) from ONNX."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            data, path = bytes(source), None
        elif isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise ModelImportError(f"cannot read model file '{path}': {e.strerror or e}") from None
        else:
            raise TypeError(f"InferenceSession takes a model path or its bytes, got "
                            f"{type(source).__name__}")
        if data[:len(MAGIC)] == MAGIC:
            return load_om(data)
        try:
            model = onnx.load_model_from_string(data)
        except Exception as e:  # protobuf decode errors have no common base
            raise ModelImportError(f"{path or 'the bytes given'} is neither an aircc .om nor an "
                                   f"ONNX model: {e}") from None
        base = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
        om, self.compile_cache = cached_compile(data, model, path or data,
                                                self._compile_options(model), base)
        return om

    def _load(self, om: OmFile):
        """The .om loaded on the device the provider options name."""
        from aircc import load

        o = self._provider_options
        return load(om, _option(o, "device_id", int, 0),
                    runtime_core_number=_option(o, "runtime_core_number", int),
                    pad_to_gear=_option(o, "pad_to_gear", bool, False),
                    replay=_option(o, "replay", bool, True),
                    timeout=_option(o, "timeout", float),
                    priority=_option(o, "priority", int, 0),
                    contexts=_option(o, "contexts", int), hint=_option(o, "hint", str, "latency"))

    def _profiling(self) -> None:
        """The profiling hook: with ``enable_profiling`` every run from now on is recorded
        (a Chrome trace; :meth:`end_profiling` writes it)."""
        if self._options.enable_profiling:
            self._model.start_profiling()
            self._profile_start_ns = time.time_ns()

    # ---------------------------------------------------------------- what it is
    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        """None: the compile folds the weights into the model."""
        return []

    def get_modelmeta(self) -> ModelMetadata:
        return self._meta

    def get_providers(self) -> list[str]:
        return [PROVIDER]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return {PROVIDER: dict(self._provider_options)}

    def get_session_options(self) -> SessionOptions:
        return self._options

    @property
    def model(self):
        """The loaded model (:class:`~aircc.executor.runtime.loaded.LoadedModel`)."""
        return self._model

    # ---------------------------------------------------------------- running it
    def _output_names(self, output_names: Sequence[str] | None) -> list[str]:
        names = [o.name for o in self._outputs]
        if not output_names:
            return names
        unknown = [n for n in output_names if n not in names]
        if unknown:
            raise InputError(f"unknown output names {unknown}; the model's outputs are {names}")
        return list(output_names)

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any],
            run_options: RunOptions | None = None) -> list[np.ndarray]:
        """The outputs ``output_names`` (None or empty: all) for ``input_feed`` ({input name:
        array}), as a list in that order.  InputError names a wrong input and the model's."""
        names = self._output_names(output_names)
        if not isinstance(input_feed, dict):
            raise InputError(f"input_feed must be a dict of input name -> array, got "
                             f"{type(input_feed).__name__}")
        feeds = {k: v.value if isinstance(v, OrtValue) else v for k, v in input_feed.items()}
        with self._log(run_options):
            outputs = self._model.run(feeds, names)
        return [outputs[n] for n in names]

    def run_async(self, output_names: Sequence[str] | None, input_feed: dict[str, Any],
                  callback: Callable[[list | None, Any, str], None], user_data: Any = None,
                  run_options: RunOptions | None = None) -> None:
        """As onnxruntime's: queue a run and return at once; ``callback(outputs, user_data,
        error)`` gets the outputs in the order of ``output_names`` and an empty error, or
        None and the error's text.  Runs go to the model's execution contexts
        (:meth:`~aircc.executor.runtime.loaded.LoadedModel.run_async`)."""
        names = self._output_names(output_names)
        if not isinstance(input_feed, dict):
            raise InputError(f"input_feed must be a dict of input name -> array, got "
                             f"{type(input_feed).__name__}")
        feeds = {k: v.value if isinstance(v, OrtValue) else v for k, v in input_feed.items()}

        def done(outputs: dict | None, error: BaseException | None) -> None:
            if error is None:
                callback([outputs[n] for n in names], user_data, "")
            else:
                callback(None, user_data, f"{type(error).__name__}: {error}")
        self._model.run_async(feeds, names, done)

    def run_with_ort_values(self, output_names: Sequence[str] | None,
                            input_dict_ort_values: dict[str, OrtValue],
                            run_options: RunOptions | None = None) -> list[OrtValue]:
        """As :meth:`run`, with OrtValues in and out."""
        return [OrtValue(a) for a in self.run(output_names, input_dict_ort_values, run_options)]

    def io_binding(self) -> IOBinding:
        """A binding of this session's inputs and outputs (:class:`~aircc.session_io.IOBinding`)."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None) -> None:
        """Run with the bound inputs; write the outputs where they are bound."""
        names = iobinding.output_names
        if not names:
            raise InputError("run_with_iobinding: no output is bound; bind_output() at least one "
                             f"of {[o.name for o in self._outputs]}")
        with self._log(run_options):
            outputs = self._model.run(iobinding.feeds, names,
                                      device_outputs=iobinding.device_outputs)
        iobinding.place_outputs(outputs)

    # ---------------------------------------------------------------- profiling, end
    def end_profiling(self) -> str:
        """Write the profile of the runs so far (``<profile_file_prefix>_<date>_<time>.json``)
        and stop recording; returns its path, or "" when the session is not profiling."""
        if self._model.profiler is None:
            return ""
        path = f"{self._options.profile_file_prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        return self._model.end_profiling(path)

    def get_profiling_start_time_ns(self) -> int:
        """When profiling began (ns since the epoch; 0: not profiling)."""
        return self._profile_start_ns

    def close(self) -> None:
        """Free the model's device memory and streams now (else when the session is collected)."""
        self._finalizer()

    def __enter__(self) -> "InferenceSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

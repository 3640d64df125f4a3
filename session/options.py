"""Options of an :class:`aircc.InferenceSession` and of its runs, as onnxruntime spells them.

Each setting onnxruntime has maps onto aircc's where one applies:

- ``intra_op_num_threads`` (> 0): :func:`aircc.set_threads` (every pool aircc drives, for
  the whole process; more than the CPUs available is capped to them);
- ``graph_optimization_level``: ``ORT_DISABLE_ALL`` compiles with :data:`MINIMAL_PIPELINE`
  (values typed, nothing rewritten), every other level with aircc's default pipeline;
- ``log_severity_level`` (0 verbose ... 4 fatal; -1 leaves aircc's log as it is): the level of
  aircc's log (:mod:`aircc.log`) while the session is made and while it runs;
- ``enable_profiling`` / ``profile_file_prefix``: a Chrome trace of every run, written by
  ``end_profiling()``;
- ``add_free_dimension_override_by_name(dim, n)``: fixes that symbolic dim of the inputs at
  compile time (a model whose every dim is fixed compiles static).

``inter_op_num_threads``, ``execution_mode`` and the memory switches are accepted and kept
(aircc schedules streams and plans memory itself).  An option of the wrong type or out of
range raises :class:`~aircc.errors.ConfigError` naming it.
"""
from __future__ import annotations

import enum
from typing import Any

from aircc.errors import ConfigError

#: The passes ``ORT_DISABLE_ALL`` keeps: the one every compile needs (it types the values).
MINIMAL_PIPELINE = ["infer-shapes"]

#: onnxruntime's log severities -> aircc's log levels.
LOG_LEVELS = {0: "debug", 1: "info", 2: "warning", 3: "error", 4: "error"}


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime's optimisation levels, with its names and values."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """onnxruntime's execution modes (accepted; aircc's streams run what can overlap)."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


def _enum(cls: type[enum.IntEnum], value: Any, option: str) -> enum.IntEnum:
    """``value`` (an aircc or onnxruntime member, or its int) as a member of ``cls``."""
    try:
        return cls(int(value))
    except (TypeError, ValueError):
        raise ConfigError(f"SessionOptions.{option}={value!r}: expected one of "
                          f"{', '.join(f'{m.name} ({m.value})' for m in cls)}") from None


def _int(value: Any, option: str, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ConfigError(f"SessionOptions.{option}={value!r}: expected a whole number >= {lo}")
    return value


def log_level(severity: Any, where: str) -> str | None:
    """aircc's log level for an onnxruntime severity (-1: None, leave the log as it is)."""
    if isinstance(severity, bool) or not isinstance(severity, int) or not -1 <= severity <= 4:
        raise ConfigError(f"{where}.log_severity_level={severity!r}: expected 0 (verbose), "
                          f"1 (info), 2 (warning), 3 (error), 4 (fatal) or -1 (as it is)")
    return LOG_LEVELS.get(severity)


class SessionOptions:
    """Settings of an :class:`~aircc.InferenceSession` (see the module doc)."""

    def __init__(self) -> None:
        self.intra_op_num_threads: int = 0
        """Threads for the kernels (0: aircc's default, ``$AIRCC_THREADS`` or every CPU)."""
        self.inter_op_num_threads: int = 0
        self.graph_optimization_level: GraphOptimizationLevel = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode: ExecutionMode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level: int = -1
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self.enable_profiling: bool = False
        self.profile_file_prefix: str = "aircc_profile"
        self.optimized_model_filepath: str = ""
        self.enable_cpu_mem_arena: bool = True
        self.enable_mem_pattern: bool = True
        self.enable_mem_reuse: bool = True
        self.use_deterministic_compute: bool = False
        self._config: dict[str, str] = {}
        self._free_dims: dict[str, int] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Keep a configuration entry (onnxruntime's ``session.*`` keys are accepted)."""
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise ConfigError(f"SessionOptions has no config entry {key!r} (set: "
                              f"{sorted(self._config) or 'none'})")
        return self._config[key]

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fix the symbolic dim ``dim_name`` of the model's inputs to ``dim_value``."""
        self._free_dims[str(dim_name)] = _int(dim_value, f"free dimension {dim_name!r}", 0)

    @property
    def free_dimension_overrides(self) -> dict[str, int]:
        """The symbolic dims fixed by :meth:`add_free_dimension_override_by_name`."""
        return dict(self._free_dims)

    def checked(self) -> "SessionOptions":
        """These options, each checked (ConfigError naming the first wrong one)."""
        _int(self.intra_op_num_threads, "intra_op_num_threads", 0)
        _int(self.inter_op_num_threads, "inter_op_num_threads", 0)
        self.graph_optimization_level = _enum(GraphOptimizationLevel,
                                              self.graph_optimization_level,
                                              "graph_optimization_level")
        self.execution_mode = _enum(ExecutionMode, self.execution_mode, "execution_mode")
        log_level(self.log_severity_level, "SessionOptions")
        if not isinstance(self.enable_profiling, bool):
            raise ConfigError(f"SessionOptions.enable_profiling={self.enable_profiling!r}: "
                              f"expected True or False")
        if not isinstance(self.profile_file_prefix, str) or not self.profile_file_prefix:
            raise ConfigError(f"SessionOptions.profile_file_prefix="
                              f"{self.profile_file_prefix!r}: expected a file name prefix")
        return self

    def __repr__(self) -> str:
        return (f"SessionOptions(intra_op_num_threads={self.intra_op_num_threads}, "
                f"graph_optimization_level={GraphOptimizationLevel(int(self.graph_optimization_level)).name}, "
                f"log_severity_level={self.log_severity_level}, "
                f"enable_profiling={self.enable_profiling})")


class RunOptions:
    """Settings of one run: ``log_severity_level`` (as the session's, for this run only);
    the others are accepted and kept."""

    def __init__(self) -> None:
        self.log_severity_level: int = -1
        self.log_verbosity_level: int = 0
        self.logid: str = ""
        self.terminate: bool = False
        self.only_execute_path_to_fetches: bool = False
        self._config: dict[str, str] = {}

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise ConfigError(f"RunOptions has no config entry {key!r} (set: "
                              f"{sorted(self._config) or 'none'})")
        return self._config[key]

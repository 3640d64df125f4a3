"""The closed vocabularies of an .om file: task kinds, host-kernel kinds, host stages,
memory regions and placements.

Each is defined here once; the lowering writes these values, the reader accepts
nothing else, and the runtime dispatches on them through explicit tables.  They
are ``str`` enums, so a payload stores their plain string values.
"""
from __future__ import annotations

import enum


class TaskKind(str, enum.Enum):
    """What one task of a static task list does."""

    KERNEL = "kernel"
    """Run an op's kernel on operands at fixed device addresses."""
    EVENT_RECORD = "event_record"
    EVENT_WAIT = "event_wait"
    MEMCPY_H2D = "memcpy_h2d"
    """Copy the feed of one input binding into device memory."""
    MEMCPY_D2H = "memcpy_d2h"
    """Copy a result out of device memory into one output binding."""
    LABEL = "label"
    GOTO = "goto"
    SWITCH = "switch"
    """Fall through when a device boolean is true, else jump to a label."""


class HostKernelKind(str, enum.Enum):
    """What one host kernel of a dynamic model's execute graph does."""

    INFER_SHAPE = "infer_shape"
    TILING = "tiling"
    HOST_COMPUTE = "host_compute"
    """Run a host-placed op on host values."""
    CONTROL = "control"
    """Run an If, Loop or Scan, its bodies being host-kernel lists of their own."""
    ALLOC = "alloc"
    FREE = "free"
    LAUNCH = "launch"
    MEMCPY_H2D = "memcpy_h2d"
    MEMCPY_D2H = "memcpy_d2h"
    EVENT_RECORD = "event_record"
    EVENT_WAIT = "event_wait"


class HostStage(str, enum.Enum):
    """The host pipeline's stages: each host kernel runs in exactly one."""

    NORMAL = "normal"
    """Shape work: InferShape, Tiling, host ops, control flow."""
    MEMORY = "memory"
    LAUNCH = "launch"


STAGE_OF: dict[HostKernelKind, HostStage] = {
    HostKernelKind.INFER_SHAPE: HostStage.NORMAL,
    HostKernelKind.TILING: HostStage.NORMAL,
    HostKernelKind.HOST_COMPUTE: HostStage.NORMAL,
    HostKernelKind.CONTROL: HostStage.NORMAL,
    HostKernelKind.ALLOC: HostStage.MEMORY,
    HostKernelKind.FREE: HostStage.MEMORY,
    HostKernelKind.LAUNCH: HostStage.LAUNCH,
    HostKernelKind.MEMCPY_H2D: HostStage.LAUNCH,
    HostKernelKind.MEMCPY_D2H: HostStage.LAUNCH,
    HostKernelKind.EVENT_RECORD: HostStage.LAUNCH,
    HostKernelKind.EVENT_WAIT: HostStage.LAUNCH,
}


class Region(str, enum.Enum):
    """The device memory a static model owns: its activation arena and its weights."""

    ARENA = "arena"
    WEIGHTS = "weights"


class Placement(str, enum.Enum):
    """Where a dynamic model's node runs."""

    HOST = "host"
    DEVICE = "device"


class Impl(str, enum.Enum):
    """Which kernel runs a node: the backend's native one or the fallback (onnx's reference)."""

    NATIVE = "native"
    FALLBACK = "fallback"


# The enums above equal their string values; hash them as those strings, in C (Enum's own
# hash runs Python code, and the runtime dispatches on these once per task).
for _kind in (TaskKind, HostKernelKind, HostStage, Region, Placement, Impl):
    _kind.__hash__ = str.__hash__


def values_of(kind: type[enum.Enum]) -> list[str]:
    """The string values of an enum, for messages."""
    return [m.value for m in kind]


class PrecisionMode(str, enum.Enum):
    """The types a model computes in (``aircc compile --precision_mode``; the offline
    compiler's names), recorded in the model section."""

    MUST_KEEP_ORIGIN_DTYPE = "must_keep_origin_dtype"
    """The graph's types unchanged (the default)."""
    FORCE_FP32 = "force_fp32"
    """Every float16 and bfloat16 tensor computed in float32; the model's inputs and
    outputs keep their declared types (cast at the boundary)."""
    ALLOW_MIX_PRECISION_BF16 = "allow_mix_precision_bf16"
    """Convolutions in bfloat16 (float32 accumulation and epilogue), as the mixlist
    allows; everything else float32."""
    FORCE_BF16 = "force_bf16"
    """Every op with a bfloat16 kernel in bfloat16, whatever the mixlist says."""

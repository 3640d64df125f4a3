"""Every error aircc raises, in one place, each with a stable code.

Codes follow the runtime's habit of numeric error codes (the device
out-of-memory code is the one ACL users know, 207018).  Each message names
the thing the user must fix.  Each class also says which exit code the
command-line tools give for it (``exit_code``): what went wrong, the command
line, the model, the input data or the run.
"""
from __future__ import annotations

import difflib

#: Exit codes of ``aircc`` and ``airrun``, by what went wrong (docs/errors.md).
EXIT_USAGE = 2
"""The command line or the environment: an option, a path, an environment variable."""
EXIT_MODEL = 3
"""The model: an ONNX file aircc cannot compile, an .om it cannot load."""
EXIT_INPUT = 4
"""The input data: a feed file, a feed's name, dtype or shape."""
EXIT_RUNTIME = 5
"""The run: a kernel failed, the device ran out of memory, timed out or was lost."""
EXIT_INTERNAL = 70
"""A bug in aircc (an exception that is not one of these classes)."""


class AirccError(Exception):
    """Base class of all aircc errors."""

    code: int = 100000
    exit_code: int = EXIT_RUNTIME

    def __init__(self, message: str):
        super().__init__(f"[{self.code}] {message}")
        self.message = message


# ---------------------------------------------------------------- command line, settings
class CommandLineError(AirccError):
    """A command-line option, argument or path that the command cannot use."""

    code = 100001
    exit_code = EXIT_USAGE


class ConfigError(AirccError):
    """An environment variable aircc reads (``aircc.config``) has a value it cannot use."""

    code = 100002
    exit_code = EXIT_USAGE


# ---------------------------------------------------------------- compiler
class ModelImportError(AirccError):
    """The ONNX model could not be read or failed the onnx checker."""

    code = 145000
    exit_code = EXIT_MODEL


class UnsupportedOpError(AirccError):
    """A node uses an op (or an op version) that aircc has no kernel for."""

    code = 145001
    exit_code = EXIT_MODEL

    def __init__(self, op: str, domain: str = "", version: int | None = None,
                 node: str = "", known: list[str] | None = None, reason: str = ""):
        where = f"node '{node}': " if node else ""
        dom = domain or "ai.onnx"
        ver = f", opset {version}" if version is not None else ""
        msg = f"{where}op '{op}' (domain {dom}{ver}) is not supported"
        if reason:
            msg += f": {reason}"
        close = difflib.get_close_matches(op, known or (), n=2, cutoff=0.7)
        if op in (known or ()):
            msg += f" (aircc runs an op '{op}' of another domain or version)"
        elif close:
            msg += f" (did you mean {' or '.join(repr(c) for c in close)}?)"
        msg += "; `aircc ops` lists the ops aircc runs, by domain"
        super().__init__(msg)
        self.op, self.domain, self.version, self.node = op, dom, version, node


class ShapeInferenceError(AirccError):
    """Shapes or types of a node's inputs do not fit the op."""

    code = 145002
    exit_code = EXIT_MODEL


class UnsupportedVariantError(ShapeInferenceError):
    """A native kernel does not cover this use of its op (an attribute value, an
    optional output); the op's fallback kernel may."""

    code = 145007


class VerificationError(AirccError):
    """The IR broke one of its invariants (SSA, types, ordering)."""

    code = 145003
    exit_code = EXIT_MODEL


class PassError(AirccError):
    """A pass name is unknown or a pass failed."""

    code = 145004
    exit_code = EXIT_MODEL


class CompileOptionError(AirccError):
    """A compile option has a value the compiler cannot use."""

    code = 145005
    exit_code = EXIT_USAGE


class IRParseError(AirccError):
    """The IR text could not be parsed."""

    code = 145006
    exit_code = EXIT_MODEL


# ---------------------------------------------------------------- format
class ModelFormatError(AirccError):
    """The .om file is not a valid aircc model (magic, version, size, checksum, schema)."""

    code = 145100
    exit_code = EXIT_MODEL


class TargetUnavailableError(ModelFormatError):
    """The model was compiled for a target (kernel backend, vector class) this machine
    does not offer."""

    code = 145101


# ---------------------------------------------------------------- executor
class DeviceOutOfMemoryError(AirccError):
    """An allocation does not fit in the virtual device's memory."""

    code = 207018

    def __init__(self, requested: int, available: int, capacity: int, what: str = ""):
        for_what = f" for {what}" if what else ""
        super().__init__(
            f"device out of memory: requested {requested} bytes{for_what}, "
            f"but only {available} bytes are available (capacity {capacity} bytes)")
        self.requested, self.available, self.capacity = requested, available, capacity


class InputError(AirccError):
    """A feed is missing, unknown, or has the wrong dtype or shape."""

    code = 145200
    exit_code = EXIT_INPUT


class CheckpointError(AirccError):
    """A checkpoint (:class:`aircc.Checkpoint`, a dataset job's ``checkpoint_dir``) that
    cannot be written, read or resumed: damaged, cut off, of another version, or made by
    another model or dataset."""

    code = 145300
    exit_code = EXIT_INPUT


class KernelError(AirccError):
    """A kernel raised while running on the device."""

    code = 507015

    def __init__(self, node: str, op: str, cause: BaseException):
        super().__init__(f"kernel for node '{node}' (op {op}) failed: "
                         f"{type(cause).__name__}: {cause}")
        self.node, self.op, self.cause = node, op, cause


class StreamSyncTimeoutError(AirccError):
    """A stream or model execution did not finish in time."""

    code = 507046


class DeviceError(AirccError):
    """The virtual device was used in a way it does not allow (closed, bad handle)."""

    code = 507000


class RunTimeoutError(StreamSyncTimeoutError):
    """A run passed its deadline; the message names the stream and the task it is stuck on."""

    code = 507047

    def __init__(self, message: str, stream: int | None = None, task: str = ""):
        super().__init__(message)
        self.stream, self.task = stream, task


class ModelClosedError(AirccError):
    """A model was used after ``close()`` (or while it closes)."""

    code = 507901


class DeviceLostError(DeviceError):
    """The device stopped answering; its memory contents are gone.  A recovery policy may
    reset it and reload the model, or fail over to another device."""

    code = 507033


class BatchFailedError(AirccError):
    """A batch of a dataset run (:mod:`aircc.distributed`) failed; the message names the
    batch (its first and last row) and the aircc error it raised."""

    code = 507902

    def __init__(self, message: str, batch: str = "", cause_code: int | None = None):
        super().__init__(message)
        self.batch, self.cause_code = batch, cause_code

    def __reduce__(self):
        return type(self), (self.message, self.batch, self.cause_code)

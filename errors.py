"""Every error aircc raises, in one place, each with a stable code.

Codes follow the runtime's habit of numeric error codes (the device
out-of-memory code is the one ACL users know, 207018).  Each message names
the thing the user must fix.
"""
from __future__ import annotations


class AirccError(Exception):
    """Base class of all aircc errors."""

    code: int = 100000

    def __init__(self, message: str):
        super().__init__(f"[{self.code}] {message}")
        self.message = message


# ---------------------------------------------------------------- compiler
class ModelImportError(AirccError):
    """The ONNX model could not be read or failed the onnx checker."""

    code = 145000


class UnsupportedOpError(AirccError):
    """A node uses an op (or an op version) that aircc has no kernel for."""

    code = 145001

    def __init__(self, op: str, domain: str = "", version: int | None = None,
                 node: str = "", known: list[str] | None = None, reason: str = ""):
        where = f"node '{node}': " if node else ""
        dom = domain or "ai.onnx"
        ver = f", opset {version}" if version is not None else ""
        msg = f"{where}op '{op}' (domain {dom}{ver}) is not supported"
        if reason:
            msg += f": {reason}"
        if known:
            msg += f". Supported ops: {', '.join(sorted(known))}"
        super().__init__(msg)
        self.op, self.domain, self.version, self.node = op, dom, version, node


class ShapeInferenceError(AirccError):
    """Shapes or types of a node's inputs do not fit the op."""

    code = 145002


class UnsupportedVariantError(ShapeInferenceError):
    """A native kernel does not cover this use of its op (an attribute value, an
    optional output); the op's fallback kernel may."""

    code = 145007


class VerificationError(AirccError):
    """The IR broke one of its invariants (SSA, types, ordering)."""

    code = 145003


class PassError(AirccError):
    """A pass name is unknown or a pass failed."""

    code = 145004


class CompileOptionError(AirccError):
    """A compile option has a value the compiler cannot use."""

    code = 145005


class IRParseError(AirccError):
    """The IR text could not be parsed."""

    code = 145006


# ---------------------------------------------------------------- format
class ModelFormatError(AirccError):
    """The .om file is not a valid aircc model (magic, version, size, checksum, schema)."""

    code = 145100


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

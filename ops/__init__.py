"""What an op is: tensor types, the op registry, traits, the device's own ops, and the
kernel-backend interface.  Both :mod:`aircc.compiler` and :mod:`aircc.executor`
stand on this package; neither imports the other.
"""
from __future__ import annotations

from .backend import (KernelBackend, KernelImpl, available_backends, kernel_backend,  # noqa: F401
                      register_backend)
from .registry import (InferContext, OpDef, all_definitions, define, definitions,  # noqa: F401
                       has_trait, native_ops, node_def, op_def, ops_with, register_op)
from .targets import Target, check_target, resolve_target  # noqa: F401
from .traits import Trait  # noqa: F401
from .types import Dim, TensorType, is_host_only, types_of  # noqa: F401

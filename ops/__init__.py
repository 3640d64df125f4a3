"""What an op is: tensor types, the op registry, traits, the device's own ops, and the
kernel-backend interface.  Both :mod:`aircc.compiler` and :mod:`aircc.executor`
stand on this package; neither imports the other.
"""
from __future__ import annotations

from .backend import (KernelBackend, KernelImpl, available_backends, kernel_backend,  # noqa: F401
                      register_backend)
from .lookup import node_def, op_def  # noqa: F401
from .registry import (InferContext, OpDef, all_definitions, define, definitions,  # noqa: F401
                       has_trait, native_ops, ops_with, register_op)
from .machine import check_precision, check_target, resolve_target  # noqa: F401
from .targets import Target  # noqa: F401
from .traits import Trait  # noqa: F401
from .types import Dim, TensorType, is_host_only, types_of, value_kind  # noqa: F401

"""Optional, OptionalHasElement, OptionalGetElement: their definitions' own host run
(``aircc.ops.defs.optional``) as the kernel; an array result is copied into its output.
The dynamic runtime calls the definitions' run on the host (optionals live there)."""
from __future__ import annotations

import numpy as np

from aircc.ops import op_def
from aircc.ops.backend import KernelImpl

from .numpy_backend import NUMPY


def _kernel_of(op: str, since: int):
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        results = op_def(op, since).run(list(ins), attrs, len(outs))
        for dst, r in zip(outs, results):
            if isinstance(dst, np.ndarray) and isinstance(r, np.ndarray):
                np.copyto(dst, r, casting="unsafe")
    return kernel


for _op, _since in (("Optional", 15), ("OptionalHasElement", 15), ("OptionalHasElement", 18),
                    ("OptionalGetElement", 15), ("OptionalGetElement", 18)):
    NUMPY.register(KernelImpl(_op, _since, "", _kernel_of(_op, _since)))

"""The fallback kernel: onnx's reference implementation of an op, in the device path.

For an op (or a use of an op) that has no native kernel, the kernel runs the
onnx reference op (:func:`aircc.ops.fallback.fallback_def`'s ``run``) on inputs
read from device memory, and copies its results into the output buffers planned
for it, like any kernel.  ``aircc ops`` lists these as ``fallback``.
"""
from __future__ import annotations

import functools

import numpy as np

from aircc.ops.backend import KernelImpl
from aircc.ops.fallback import fallback_def


@functools.lru_cache(maxsize=None)
def fallback_impl(op: str, version: int | None, domain: str = "") -> KernelImpl | None:
    """The reference implementation of ``op`` as a kernel, or None if onnx has none."""
    definition = fallback_def(op, version, domain)
    if definition is None:
        return None
    run = definition.run

    def kernel(ins, outs, attrs, tiling, ws) -> None:
        results = run(ins, attrs, len(outs))
        for k, (dst, r) in enumerate(zip(outs, results)):
            if dst is None:
                continue
            r = np.asarray(r)
            if r.shape != dst.shape:
                raise ValueError(f"fallback output {k} has shape {list(r.shape)}, "
                                 f"planned {list(dst.shape)}")
            np.copyto(dst, r, casting="unsafe")

    return KernelImpl(op, definition.since, domain, kernel, native=False)

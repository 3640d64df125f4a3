"""Passes by name, and the pipeline that runs them (verifying after each).

A pipeline is a list of pass names, e.g.
``["infer-shapes", "fold-constants", "remove-identity", "dce"]``.
"""
from __future__ import annotations

import time
from typing import Callable

from aircc.errors import PassError

from ..ir.graph import Graph
from ..ir.verifier import verify
from .eliminate_dead_code import eliminate_dead_code
from .fold_batchnorm import fold_batchnorm
from .fuse_add_layernorm import fuse_add_layernorm
from .fuse_add_softmax import fuse_add_softmax
from .push_bn_scale import push_bn_scale
from .push_matmul_scale import push_matmul_scale
from .fold_constants import fold_constants
from .fuse_attention import fuse_attention
from .fuse_elementwise import fuse_elementwise
from .fuse_epilogues import fuse_epilogues
from .fuse_gelu import fuse_gelu
from .fuse_matmul_transpose import fuse_matmul_transpose
from .fuse_softmax_matmul import fuse_softmax_matmul
from .infer_shapes import infer_shapes
from .pack_weights import pack_weights
from .remove_identity import remove_identity
from .reorder_pool_conv import reorder_pool_conv
from .sink_expand import sink_expand

PASSES: dict[str, Callable[[Graph], Graph]] = {
    "infer-shapes": infer_shapes,
    "fold-constants": fold_constants,
    "remove-identity": remove_identity,
    "dce": eliminate_dead_code,
    "fold-batchnorm": fold_batchnorm,
    "fuse-epilogues": fuse_epilogues,
    "fuse-elementwise": fuse_elementwise,
    "fuse-add-layernorm": fuse_add_layernorm,
    "fuse-add-softmax": fuse_add_softmax,
    "fuse-gelu": fuse_gelu,
    "fuse-matmul-transpose": fuse_matmul_transpose,
    "fuse-softmax-matmul": fuse_softmax_matmul,
    "fuse-attention": fuse_attention,
    "sink-expand": sink_expand,
    "push-bn-scale": push_bn_scale,
    "reorder-pool-conv": reorder_pool_conv,
    "push-matmul-scale": push_matmul_scale,
    "pack-weights": pack_weights,
}

DEFAULT_PIPELINE = ["fold-constants", "infer-shapes", "fold-constants", "remove-identity", "dce",
                    "infer-shapes", "fold-batchnorm", "fuse-add-softmax", "fuse-epilogues", "push-matmul-scale",
                    "fuse-matmul-transpose", "fuse-softmax-matmul", "fuse-attention", "sink-expand", "push-bn-scale",
                    "reorder-pool-conv", "fuse-add-layernorm", "fuse-gelu", "fuse-elementwise", "pack-weights", "dce", "infer-shapes"]


def get_pass(name: str) -> Callable[[Graph], Graph]:
    try:
        return PASSES[name]
    except KeyError:
        raise PassError(f"unknown pass '{name}'; known passes: {', '.join(sorted(PASSES))}") from None


def run_pipeline(graph: Graph, names: list[str] | None = None, *, verify_each: bool = True) -> Graph:
    """Run passes in order; with ``verify_each`` the verifier checks the IR after each one."""
    timings = graph.meta.setdefault("pass_seconds", {})
    for name in DEFAULT_PIPELINE if names is None else names:
        fn = get_pass(name)
        t0 = time.perf_counter()
        graph = fn(graph)
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
        if verify_each:   # a freshly imported graph is untyped until infer-shapes has run
            verify(graph, require_types=graph.meta.get("typed", False))
    return graph

"""The optimisation pipeline: passes by name, run in order, the IR verified after each.

A pipeline is a list of pass names, e.g.
``["infer-shapes", "fold-constants", "remove-identity", "dce"]``; every pass is
declared where it is written (:func:`~.base.compile_pass`), and importing this
module registers them all.
"""
from __future__ import annotations

from typing import Sequence

from aircc.errors import PassError

from ..context import CompileContext
from ..ir.graph import Graph
from ..ir.verifier import verify
from . import (eliminate_dead_code, fold_batchnorm, fold_constants, fuse_add_layernorm,  # noqa: F401
               fuse_add_softmax, fuse_attention, fuse_channel_shuffle, fuse_elementwise, fuse_epilogues, fuse_gelu,
               fuse_matmul_transpose, fuse_softmax_matmul, infer_shapes, mask_fill_to_add, mix_precision, pack_weights,
               precision_mode,
               plan_layouts, pull_matmul_scales, push_bn_scale, push_matmul_scale, remove_identity,
               reorder_pool_conv, resolve_shape_values, sink_expand)
from . import lower_contrib  # noqa: F401
from .base import PASSES, PassInfo

DEFAULT_PIPELINE = ["fold-constants", "infer-shapes", "precision-mode", "lower-contrib", "fold-constants", "remove-identity", "dce",
                    "infer-shapes", "resolve-shape-values", "fold-constants", "fold-batchnorm",
                    "pull-matmul-scales", "mask-fill-to-add", "fuse-add-softmax", "fuse-gelu", "fuse-epilogues", "push-matmul-scale",
                    "fuse-matmul-transpose", "fuse-softmax-matmul", "fuse-attention", "sink-expand", "push-bn-scale",
                    "reorder-pool-conv", "fuse-add-layernorm", "fuse-elementwise", "fuse-channel-shuffle", "mix-precision", "pack-weights", "plan-layouts", "dce", "infer-shapes"]


def get_pass(name: str) -> PassInfo:
    """The pass registered as ``name``; PassError listing the known ones otherwise."""
    try:
        return PASSES[name]
    except KeyError:
        raise PassError(f"unknown pass '{name}'; known passes: {', '.join(sorted(PASSES))}") from None


def run_pipeline(graph: Graph, names: Sequence[str] | None = None, ctx: CompileContext | None = None,
                 *, verify_each: bool = True) -> Graph:
    """Run passes in order (the default pipeline when ``names`` is None); with
    ``verify_each`` the verifier checks the IR after each one."""
    ctx = ctx if ctx is not None else CompileContext()
    for name in DEFAULT_PIPELINE if names is None else names:
        info = get_pass(name)
        with ctx.timed(f"pass {name}"):
            graph = info.run(graph, ctx)
        if verify_each:   # a freshly imported graph is untyped until infer-shapes has run
            verify(graph, require_types=graph.meta.get("typed", False))
    return graph

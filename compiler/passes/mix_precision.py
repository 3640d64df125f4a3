"""Pass ``mix-precision``: the ops that compute in bfloat16 under ``--precision_mode``
``allow_mix_precision_bf16`` or ``force_bf16``.

The offline compiler's lists, by op type: a white list of ops that run in the reduced
type, a black list that stays float32, a gray list that follows its inputs.  Here the
white list is the ops with a bfloat16 kernel (:data:`~aircc.ops.precision.BF16_OPS`:
convolutions and matrix products); every other op is on the black list (softmax, normalisations,
reductions, exp/log/pow and the rest keep float32).  ``--modify_mixlist FILE.json`` in
the offline compiler's format moves op types between them::

    {"black-list": {"to-add": ["Conv"]}, "white-list": {"to-remove": []}}

``allow_mix_precision_bf16`` applies it; ``force_bf16`` takes every op that has a
bfloat16 kernel whatever the list says.  A node on the white list whose output is
float32 and whose weights are constants gets ``compute_dtype = "bfloat16"``
(:mod:`aircc.ops.precision`): its kernel reads its activation and weights in bfloat16
and writes float32.

Chains: a marked convolution whose every reader is a marked convolution (as its
activation, or as the residual its epilogue adds) writes bfloat16 (``output_dtype``), and its readers take it
as it is: no conversion between them, half the bytes.  The value's type becomes
bfloat16; the model's inputs and outputs, and every value another op reads, stay
float32.  Counts ``bf16_ops`` and ``bf16_values`` (values held in bfloat16).
"""
from __future__ import annotations

from collections.abc import Mapping

from aircc.errors import CompileOptionError
from aircc.formats.kinds import PrecisionMode
from aircc.ops.precision import BF16_OPS, COMPUTE_DTYPE

from aircc.ops import TensorType
from aircc.ops.precision import OUTPUT_DTYPE

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass

#: The offline compiler's list names and the changes a mixlist may make to each.
LISTS = ("black-list", "white-list", "gray-list")
CHANGES = ("to-add", "to-remove")
BF16_MODES = (PrecisionMode.ALLOW_MIX_PRECISION_BF16, PrecisionMode.FORCE_BF16)


def white_list(mixlist: Mapping, mode: PrecisionMode) -> frozenset[str]:
    """The op types that compute in bfloat16 under ``mode`` and ``mixlist`` (the parsed
    ``--modify_mixlist`` file); CompileOptionError naming what is wrong with it."""
    if not isinstance(mixlist, Mapping):
        raise CompileOptionError(f"--modify_mixlist: expected a JSON object with "
                                 f"{', '.join(LISTS)}, got {type(mixlist).__name__}")
    ops = set(BF16_OPS)
    for name, changes in mixlist.items():
        if name not in LISTS:
            raise CompileOptionError(f"--modify_mixlist: unknown list {name!r}; the lists are "
                                     f"{', '.join(LISTS)}")
        if not isinstance(changes, Mapping) or not set(changes) <= set(CHANGES) or not all(
                isinstance(v, list) and all(isinstance(o, str) for o in v)
                for v in changes.values()):
            raise CompileOptionError(f"--modify_mixlist: {name} must map {' and '.join(CHANGES)} "
                                     f"to lists of op types, got {changes!r}")
        for change, types in changes.items():
            adds_white = (name, change) == ("white-list", "to-add")
            unknown = [t for t in types if adds_white and t not in BF16_OPS]
            if unknown:
                raise CompileOptionError(f"--modify_mixlist: {unknown} have no bfloat16 kernel; "
                                         f"the ops that do: {', '.join(BF16_OPS)}")
            if (name, change) in (("black-list", "to-add"), ("white-list", "to-remove")):
                ops -= set(types)
    return frozenset(BF16_OPS if mode is PrecisionMode.FORCE_BF16 else ops)


#: The inputs of a marked convolution that may be bfloat16: its activation, its residual.
BF16_READS = (0, 3)
#: The ops whose bfloat16 kernels read and write bfloat16 values (chains).
CHAIN_OPS = ("Conv",)


@compile_pass("mix-precision", stats=("bf16_ops", "bf16_values"))
def mix_precision(graph: Graph, ctx: CompileContext) -> Graph:
    mode = PrecisionMode(ctx.options.precision_mode)
    ctx.count("bf16_ops", 0)
    ctx.count("bf16_values", 0)
    if mode not in BF16_MODES:
        return graph
    if ctx.target.backend != "dnnl":
        raise CompileOptionError(f"--precision_mode {mode.value} needs the oneDNN kernels "
                                 f"(target native or dnnl-*), not target {ctx.target.name}")
    allowed = white_list(ctx.options.modify_mixlist, mode)
    ctx.count("bf16_ops", _mark(graph, allowed))
    ctx.count("bf16_values", _chain(graph))
    return graph


def _chain(graph: Graph) -> int:
    """Hold in bfloat16 every output of a marked node that only marked nodes read, at
    inputs they take bfloat16 (:data:`BF16_READS`); how many values (each region apart:
    a body's values are read by its own nodes)."""
    n = sum(_chain(r) for node in graph.nodes for r in node.regions)
    readers: dict[str, list[tuple[Node, int]]] = {}
    for node in graph.nodes:
        for k, name in enumerate(node.inputs):
            readers.setdefault(name, []).append((node, k))
    captured = {i for node in graph.nodes for r in node.regions for i in _reads(r)}
    for node in graph.nodes:
        if not _chained(node) or node.attrs.get("fused_activation"):
            continue                     # an epilogue numpy runs after it reads float32
        out = node.outputs[0]
        uses = readers.get(out, [])
        if not uses or out in graph.outputs or out in captured or not all(
                _chained(r) and k in BF16_READS for r, k in uses):
            continue
        node.attrs[OUTPUT_DTYPE] = "bfloat16"
        graph.types[out] = TensorType("bfloat16", graph.types[out].shape)
        n += 1
    return n


def _chained(node: Node) -> bool:
    """A marked node whose kernel reads and writes bfloat16 values."""
    return node.op in CHAIN_OPS and node.attrs.get(COMPUTE_DTYPE) == "bfloat16"


def _reads(graph: Graph) -> set[str]:
    """Every value a body's nodes (nested ones too) read."""
    return {i for node in graph.nodes for i in node.inputs} | {
        i for node in graph.nodes for r in node.regions for i in _reads(r)}


def _mark(graph: Graph, allowed: frozenset[str]) -> int:
    """Mark the white-listed float32 nodes whose weights are constants; how many."""
    n = 0
    for node in graph.nodes:
        for region in node.regions:
            n += _mark(region, allowed)
        if node.op not in allowed or node.domain or len(node.inputs) < 2:
            continue
        out = graph.types.get(node.outputs[0])
        if out is None or out.dtype != "float32" or node.inputs[1] not in graph.constants:
            continue
        node.attrs[COMPUTE_DTYPE] = "bfloat16"
        n += 1
    return n

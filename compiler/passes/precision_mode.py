"""Pass ``precision-mode``: the types the model computes in, as ``--precision_mode`` says.

``must_keep_origin_dtype`` (the default) leaves the graph alone.  ``force_fp32`` moves
every float16 and bfloat16 value to float32: constants are converted once, attributes
that name a type (Cast's ``to``, ``dtype``) or hold a tensor (ConstantOfShape's
``value``) follow, bodies of control flow too, and the model's inputs and outputs keep
their declared types through one Cast each at the boundary.  A float16 model then runs
on the float32 kernels (oneDNN's, onnxruntime's MLAS on a CPU does the same), instead
of numpy's float16 loops.  Counts ``precision_casts`` (boundary casts inserted) and
``precision_values`` (values moved to float32).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from aircc.formats.kinds import PrecisionMode
from aircc.ops import TensorType

from ..context import CompileContext
from ..ir.graph import Graph, Node
from .base import compile_pass

#: The reduced float types ``force_fp32`` widens, by IR dtype name and ONNX type number.
REDUCED = ("float16", "bfloat16")
REDUCED_ELEM = (TensorProto.FLOAT16, TensorProto.BFLOAT16)
#: Attributes that name an element type.
TYPE_ATTRS = ("to", "dtype")


@compile_pass("precision-mode", stats=("precision_casts", "precision_values"))
def precision_mode(graph: Graph, ctx: CompileContext) -> Graph:
    ctx.count("precision_casts", 0)
    ctx.count("precision_values", 0)
    if PrecisionMode(ctx.options.precision_mode) is not PrecisionMode.FORCE_FP32:
        return graph                    # the bfloat16 modes: ``mix-precision``
    declared = {n: graph.types[n].dtype for n in (*graph.inputs, *graph.outputs)
                if n in graph.types and graph.types[n].dtype in REDUCED}
    ctx.count("precision_values", _widen(graph))
    version = graph.opsets.get("") or max((n.version for n in graph.nodes if not n.domain),
                                          default=13)
    first, last = [], []
    for name in graph.inputs:
        if name in declared:                 # the model reads it as declared, then widens it
            inner = _fresh(graph, f"{name}__fp32")
            _rename_reads(graph, name, inner)
            graph.types[inner] = TensorType("float32", graph.types[name].shape)
            graph.types[name] = TensorType(declared[name], graph.types[name].shape)
            first.append(Node("Cast", [name], [inner], {"to": TensorProto.FLOAT},
                              name=_fresh_node(graph, f"{name}__to_fp32"), version=version))
    for name in dict.fromkeys(graph.outputs):
        if name not in declared or name in graph.inputs:   # an input given back: as it came
            continue
        inner = _fresh(graph, f"{name}__fp32")
        for node in graph.nodes:             # made as float32 under another name ...
            node.outputs = [inner if o == name else o for o in node.outputs]
        if name in graph.constants:
            graph.constants[inner] = graph.constants.pop(name)
        _rename_reads(graph, name, inner)
        graph.types[inner] = TensorType("float32", graph.types[name].shape)
        graph.types[name] = TensorType(declared[name], graph.types[name].shape)
        to = REDUCED_ELEM[REDUCED.index(declared[name])]      # ... and narrowed as the output
        last.append(Node("Cast", [inner], [name], {"to": to},
                         name=_fresh_node(graph, f"{name}__from_fp32"), version=version))
    graph.nodes = first + graph.nodes + last
    ctx.count("precision_casts", len(first) + len(last))
    return graph


def _widen(graph: Graph) -> int:
    """Every reduced-float value, constant and type-naming attribute of ``graph`` and its
    bodies in float32; the number of values widened."""
    n = 0
    for name, t in list(graph.types.items()):
        if t.dtype in REDUCED:
            graph.types[name] = TensorType("float32", t.shape)
            n += 1
    for name, value in list(graph.constants.items()):
        if isinstance(value, np.ndarray) and value.dtype.name in REDUCED:
            graph.constants[name] = value.astype(np.float32)
    for node in graph.nodes:
        for key, value in list(node.attrs.items()):
            if key in TYPE_ATTRS and value in REDUCED_ELEM:
                node.attrs[key] = TensorProto.FLOAT
            elif isinstance(value, np.ndarray) and value.dtype.name in REDUCED:
                node.attrs[key] = value.astype(np.float32)
        for region in node.regions:
            n += _widen(region)
    return n


def _fresh(graph: Graph, base: str) -> str:
    name, k = base, 1
    while name in graph.types or name in graph.constants:
        name, k = f"{base}_{k}", k + 1
    return name


def _fresh_node(graph: Graph, base: str) -> str:
    taken = {n.name for n in graph.walk()}
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _rename_reads(graph: Graph, old: str, new: str, body: bool = False) -> None:
    """Every node that reads ``old`` (bodies that capture it included, and a body that
    gives it back as its output) reads ``new``."""
    for node in graph.nodes:
        node.inputs = [new if i == old else i for i in node.inputs]
        for region in node.regions:
            _rename_reads(region, old, new, body=True)
    if body:
        graph.outputs = [new if o == old else o for o in graph.outputs]

"""Fallback definitions: ops the onnx package knows and no native definition covers.

Shapes come from onnx's own node-level shape inference, or, when every input
value is known, from running the op with onnx's reference implementation
(:func:`reference_run`, which kernel backends also use as their fallback kernel,
run in device memory).  ``aircc ops`` lists these as ``fallback``.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from .registry import InferContext, OpDef
from .types import TensorType

if TYPE_CHECKING:
    import onnx

# onnx is imported where a fallback op is first defined or run, not with this module:
# a runtime that loads an .om whose kernels are all native never needs it.


def _attribute(name: str, value):
    from onnx import helper, numpy_helper

    if isinstance(value, np.ndarray):
        return helper.make_attribute(name, numpy_helper.from_array(value))
    if isinstance(value, list) and value and isinstance(value[0], np.ndarray):
        return helper.make_attribute(name, [numpy_helper.from_array(v) for v in value])
    return helper.make_attribute(name, value)


def make_node(op: str, attrs: dict, n_in: int, n_out: int, domain: str = "") -> onnx.NodeProto:
    from onnx import helper

    node = helper.make_node(op, [f"i{k}" for k in range(n_in)], [f"o{k}" for k in range(n_out)],
                            domain=domain or None)
    node.attribute.extend(_attribute(k, v) for k, v in attrs.items())
    return node


def _elem(dtype: str) -> int:
    import onnx
    from onnx import helper

    return onnx.TensorProto.STRING if dtype == "object" else helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _tensor_type(t: TensorType | None) -> onnx.TypeProto | None:
    from onnx import helper

    if t is None:
        return None
    if t.dtype.startswith("sequence:"):
        return helper.make_sequence_type_proto(helper.make_tensor_type_proto(_elem(t.dtype[9:]), None))
    elem = _elem(t.dtype)
    shape = None if t.shape is None else [d if isinstance(d, int) else str(d) for d in t.shape]
    return helper.make_tensor_type_proto(elem, shape)


def _dtype(elem_type: int) -> str:
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name


def _from_type_proto(tp: onnx.TypeProto, ctx: InferContext, k: int) -> TensorType:
    from onnx import helper

    if tp.HasField("sequence_type"):
        return TensorType(f"sequence:{_dtype(tp.sequence_type.elem_type.tensor_type.elem_type)}", None)
    tt = tp.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)).name
    if not tt.HasField("shape"):
        return TensorType(dtype, None)
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or ctx.sym(f"{k}_{j}"))
            for j, d in enumerate(tt.shape.dim)]
    return TensorType(dtype, tuple(dims))


def _value_info(name: str, x) -> onnx.ValueInfoProto:
    import onnx
    from onnx import helper

    if isinstance(x, list):
        elem = _elem(np.asarray(x[0]).dtype.name) if x else onnx.TensorProto.FLOAT
        return helper.make_value_info(name, helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(elem, None)))
    return helper.make_tensor_value_info(name, _elem(x.dtype.name), [None] * x.ndim)


class _Evaluators:
    """One onnx ReferenceEvaluator per node and input signature: it runs the op (and
    expands ops defined as functions, context-dependent ones included)."""

    def __init__(self):
        self._cache: dict[tuple, tuple[dict, object]] = {}

    def get(self, op: str, domain: str, version: int, attrs: dict, ins: list, n_out: int):
        key = (id(attrs), tuple(None if x is None else ("seq", len(x)) if isinstance(x, list)
                                else (x.dtype.str, x.ndim) for x in ins))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is attrs:
            return hit[1]
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        node = make_node(op, attrs, len(ins), n_out, domain)
        node.input[:] = [f"i{k}" if x is not None else "" for k, x in enumerate(ins)]
        inputs = [_value_info(f"i{k}", x) for k, x in enumerate(ins) if x is not None]
        outputs = [helper.make_empty_tensor_value_info(f"o{k}") for k in range(n_out)]
        graph = helper.make_graph([node], "fallback", inputs, outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, version)])
        ev = ReferenceEvaluator(model)
        self._cache[key] = (attrs, ev)
        return ev


_EVALUATORS = _Evaluators()


#: The domains whose ops the fallback runs: onnx's reference implementation has them.
FALLBACK_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview.training")


def _load_op(domain: str, name: str, version: int):
    """onnx's reference op class (each domain has its own list); raises when it has none."""
    if domain == "ai.onnx.ml":
        from onnx.reference.ops.aionnxml import load_op
    elif domain == "ai.onnx.preview.training":
        from onnx.reference.ops.aionnx_preview_training import load_op
    else:
        from onnx.reference.ops import load_op
    return load_op(domain, name, version)


def _supported(name: str, version: int, domain: str, schema) -> bool:
    if domain not in FALLBACK_DOMAINS:
        return False
    if schema.has_function or schema.has_context_dependent_function:
        return True
    try:
        _load_op(domain, name, version)
        return True
    except Exception:
        return False


@functools.lru_cache(maxsize=None)
def fallback_def(name: str, version: int | None, domain: str = "") -> OpDef | None:
    """The definition of an op by onnx's schema (shape inference) and reference
    implementation, or None if onnx cannot run such an op."""
    import onnx
    from onnx import helper, numpy_helper

    try:
        schema = onnx.defs.get_schema(name, version or onnx.defs.onnx_opset_version(), domain)
    except Exception:
        return None
    opset = version or schema.since_version
    if schema.deprecated or not _supported(name, opset, domain, schema):
        return None

    def run(ins, attrs, n_out):
        """Evaluate the op on host values (arrays, sequences as lists, strings)."""
        args = [None if x is None or isinstance(x, list) else np.asarray(x) for x in ins]
        args = [x if a is None else a for x, a in zip(ins, args)]
        ev = _EVALUATORS.get(name, domain, opset, attrs, args, n_out)
        feeds = {f"i{k}": x for k, x in enumerate(args) if x is not None}
        return [o.astype(object) if isinstance(o, np.ndarray) and o.dtype.kind in "US" else o
                for o in ev.run(None, feeds)]      # ONNX strings are numpy object arrays

    def infer(ctx: InferContext) -> list[TensorType]:
        if all(v is not None for v, t in zip(ctx.values, ctx.types) if t is not None):
            return [value_type(o) for o in run(ctx.values, ctx.attrs, ctx.num_outputs)]
        node = make_node(name, ctx.attrs, len(ctx.types), ctx.num_outputs, domain)
        node.input[:] = [f"i{k}" if t is not None else "" for k, t in enumerate(ctx.types)]
        types = {f"i{k}": _tensor_type(t) for k, t in enumerate(ctx.types) if t is not None}
        data = {f"i{k}": numpy_helper.from_array(np.asarray(v)) for k, v in enumerate(ctx.values)
                if v is not None}
        try:
            result = onnx.shape_inference.infer_node_outputs(
                schema, node, types, data,
                opset_imports=[helper.make_opsetid(domain, version or schema.since_version)])
        except Exception as e:  # onnx's inference names the problem
            ctx.fail(f"shape inference of the fallback kernel failed: {e}")
        return [_from_type_proto(result[f"o{k}"], ctx, k) if f"o{k}" in result
                else TensorType("float32", None) for k in range(ctx.num_outputs)]

    return OpDef(name=name, since=schema.since_version, domain=domain, infer=infer,
                 value_inputs=tuple(range(len(schema.inputs) + 8)), native=False,
                 doc=f"onnx reference implementation of {name}", run=run)


def value_type(value) -> TensorType:
    """The type of a run-time value: an array, or a sequence (list) of arrays."""
    if isinstance(value, list):
        elem = np.asarray(value[0]).dtype.name if value else "float32"
        return TensorType(f"sequence:{elem}", None)
    return TensorType.of(np.asarray(value))


def fallback_ops() -> list[tuple[str, str, int]]:
    """(domain, op, since) of every op of :data:`FALLBACK_DOMAINS` the reference
    implementation can run."""
    import onnx

    out = []
    for schema in onnx.defs.get_all_schemas_with_history():
        domain = "" if schema.domain == "ai.onnx" else schema.domain
        if domain not in FALLBACK_DOMAINS or schema.deprecated:
            continue
        if _supported(schema.name, schema.since_version, domain, schema):
            out.append((domain, schema.name, schema.since_version))
    return sorted(set(out))

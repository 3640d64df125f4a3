"""ONNX -> AIR IR.

The model is checked with the onnx checker first.  Initializers become
constants (also when an old model lists them as graph inputs too: they are
weights, not feeds).  Attributes become plain Python values, subgraph
attributes become nested regions.  Types come from the graph's declared
inputs; everything else is typed by the ``infer-shapes`` pass.
"""
from __future__ import annotations

import contextlib
import os
from typing import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from aircc.errors import CompileOptionError, ModelImportError, UnsupportedOpError
from aircc.ops.catalog import domain_opsets, supported_opsets
from aircc.ops.registry import canonical_domain

from ..ir.graph import Dim, Graph, Node, TensorType
from .functions import expand_nodes, has_expanded_ops, known_types
from .model_metadata import model_metadata

#: Deprecated ops and the op with the same semantics that replaced them: (op, since).
RENAMED_OPS = {"Scatter": ("ScatterElements", 11)}


def load_onnx(source: str | os.PathLike | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """Read a model from a path, bytes or a ModelProto, and run the onnx checker on it."""
    try:
        if isinstance(source, onnx.ModelProto):
            model = source
        elif isinstance(source, (bytes, bytearray)):
            model = onnx.load_from_string(bytes(source))
        else:
            model = onnx.load(os.fspath(source))
    except FileNotFoundError:
        raise ModelImportError(f"ONNX model file not found: {source}") from None
    except Exception as e:  # protobuf decode errors have no common base
        raise ModelImportError(f"cannot read ONNX model {source!r}: {e}") from e
    try:
        with _shapes_declared(model), _ort_default_domain_ops_aside(model):
            onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0]
        raise ModelImportError(f"the onnx checker rejects the model: {first}") from e
    return model


@contextlib.contextmanager
def _shapes_declared(model: onnx.ModelProto):
    """The onnx checker wants every graph input and output to declare a shape; exporters
    often declare none for an output (unknown rank), which onnxruntime accepts and so does
    aircc (the shape is inferred).  Such values get an empty shape while the checker runs."""
    bare = [v.type.tensor_type for v in (*model.graph.input, *model.graph.output)
            if v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape")]
    for t in bare:
        t.shape.SetInParent()
    try:
        yield
    finally:
        for t in bare:
            t.ClearField("shape")


#: onnxruntime's contrib ops in the default domain that the onnx checker refuses (it
#: registered them there before ONNX had them; its transformer optimizer writes the first
#: two): op -> the last opset of the default domain at which the op is onnxruntime's (None:
#: every one, ONNX has no such op).  Its others there are ONNX's old experimental ops,
#: which the checker still knows.  aircc defines all but MeanVarianceNormalization
#: (``ops/defs/contrib_norm.py``, ``contrib_activation.py``).
ORT_DEFAULT_DOMAIN_OPS = {"LayerNormalization": 16, "SimplifiedLayerNormalization": None, "ThresholdedRelu": 9,
                          "MeanVarianceNormalization": 8}
#: The domain the checker sees those nodes in while it runs: onnxruntime's own, whose ops it
#: does not check.
ORT_CONTRIB_DOMAIN = "com.microsoft"


def _graphs(graph: onnx.GraphProto):
    """``graph`` and every graph nested in its nodes' attributes."""
    yield graph
    for node in graph.node:
        for a in node.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs):
                yield from _graphs(sub)


@contextlib.contextmanager
def _ort_default_domain_ops_aside(model: onnx.ModelProto):
    """While the checker runs, the nodes of onnxruntime's default-domain contrib ops
    (:data:`ORT_DEFAULT_DOMAIN_OPS`, at the opsets where they are its) sit in its contrib
    domain, which the checker leaves to onnxruntime; every other node is checked as it is."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    last = ORT_DEFAULT_DOMAIN_OPS
    nodes = [n for g in _graphs(model.graph) for n in g.node
             if n.domain in ("", "ai.onnx") and n.op_type in last
             and (last[n.op_type] is None or (opset is not None and opset <= last[n.op_type]))]
    added = bool(nodes) and not any(o.domain == ORT_CONTRIB_DOMAIN for o in model.opset_import)
    if added:
        model.opset_import.append(helper.make_opsetid(ORT_CONTRIB_DOMAIN, 1))
    domains = [n.domain if n.HasField("domain") else None for n in nodes]
    for n in nodes:
        n.domain = ORT_CONTRIB_DOMAIN
    try:
        yield
    finally:
        for n, domain in zip(nodes, domains):
            if domain is None:
                n.ClearField("domain")
            else:
                n.domain = domain
        if added:
            del model.opset_import[-1]


def onnx_dtype(elem_type: int) -> str:
    """numpy dtype name for an ONNX TensorProto element type."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception as e:
        raise ModelImportError(f"unsupported tensor element type {elem_type} "
                               f"({onnx.TensorProto.DataType.Name(elem_type)})") from e


def value_dtype_of(tp: onnx.TypeProto, name: str) -> str:
    """The IR dtype of a TypeProto: ``float32``, ``sequence:float32``, ``optional:float32``,
    ``optional:sequence:float32`` (sequences and optionals of tensors)."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return onnx_dtype(tp.tensor_type.elem_type)
    if kind == "sequence_type" and tp.sequence_type.elem_type.HasField("tensor_type"):
        return "sequence:" + onnx_dtype(tp.sequence_type.elem_type.tensor_type.elem_type)
    if kind == "optional_type" and tp.optional_type.elem_type.WhichOneof("value") in (
            "tensor_type", "sequence_type"):
        return "optional:" + value_dtype_of(tp.optional_type.elem_type, name)
    raise ModelImportError(f"value '{name}' has type '{kind}': aircc supports tensors, "
                           f"sequences of tensors and optionals of either")


def is_unknown_dim(dim: object) -> bool:
    """A dim an exporter wrote to say "unknown", not to name a dim other dims share:
    a negative ``dim_value`` (``-1``), an empty ``dim_param``, or one with no letter in
    it (``'?'``, ``'-1'``, ``'*'``): each such dim is its own symbol."""
    if isinstance(dim, int):
        return dim < 0
    return isinstance(dim, str) and not any(ch.isalpha() for ch in dim)


def _type_from_proto(vi: onnx.ValueInfoProto, fresh) -> TensorType:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        return TensorType(value_dtype_of(vi.type, vi.name), None)
    if not tt.HasField("shape"):
        return TensorType(onnx_dtype(tt.elem_type), None)
    dims: list[Dim] = []
    for k, d in enumerate(tt.shape.dim):
        given = d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else ""
        dims.append(fresh(f"{vi.name}_d{k}") if is_unknown_dim(given) else given)
    return TensorType(onnx_dtype(tt.elem_type), tuple(dims))


def convert_attribute(attr: onnx.AttributeProto, import_region):
    """An ONNX attribute as a plain Python value (graphs via ``import_region``)."""
    A = onnx.AttributeProto
    if attr.type == A.GRAPH:
        return import_region(attr.g)
    if attr.type == A.GRAPHS:
        return [import_region(g) for g in attr.graphs]
    if attr.type == A.TYPE_PROTO:          # Optional's ``type``: kept as its IR dtype name
        return value_dtype_of(attr.tp, f"{attr.name} attribute")
    if attr.type in (A.SPARSE_TENSOR, A.SPARSE_TENSORS, A.TYPE_PROTOS):
        raise ModelImportError(f"attribute '{attr.name}' of type "
                               f"{A.AttributeType.Name(attr.type)} is not supported")
    value = helper.get_attribute_value(attr)
    if attr.type == A.TENSOR:
        return numpy_helper.to_array(value)
    if attr.type == A.TENSORS:
        return [numpy_helper.to_array(t) for t in value]
    if attr.type == A.STRING:
        return value.decode("utf-8")
    if attr.type == A.STRINGS:
        return [v.decode("utf-8") for v in value]
    if attr.type == A.INTS:
        return [int(v) for v in value]
    if attr.type == A.FLOATS:
        return [float(v) for v in value]
    return value


def refuse_non_tensor_io(proto: onnx.NodeProto, domain: str, version: int, node: str) -> None:
    """UnsupportedOpError for an op whose input or output is a map or a sequence of maps
    (ZipMap, DictVectorizer, CastMap): aircc's values are tensors and sequences of them."""
    try:
        schema = onnx.defs.get_schema(proto.op_type, version or onnx.defs.onnx_opset_version(),
                                      domain)
    except Exception:
        return          # an op onnx does not know: the op lookup names it
    allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    for kind, formals in (("input", schema.inputs), ("output", schema.outputs)):
        for f in formals:
            types = allowed.get(f.type_str, [f.type_str])
            if types and all("map(" in t for t in types):
                raise UnsupportedOpError(proto.op_type, domain, version, node, reason=(
                    f"its {kind} '{f.name}' is {' or '.join(types)}: aircc supports tensor "
                    f"values only (ZipMap's maps: convert with zipmap=False, say)"))


def string_tensor_attributes(attrs: dict) -> dict:
    """A LabelEncoder's string ``keys_tensor`` / ``values_tensor`` / ``default_tensor`` as
    the equivalent ``keys_strings`` / ``values_strings`` / ``default_string`` (opset 4
    takes either; an .om keeps no string tensors)."""
    out = dict(attrs)
    for name, plain in (("keys", "keys_strings"), ("values", "values_strings"),
                        ("default", "default_string")):
        t = attrs.get(f"{name}_tensor")
        if isinstance(t, np.ndarray) and t.dtype == object:
            del out[f"{name}_tensor"]
            items = [v.decode() if isinstance(v, bytes) else str(v) for v in t.reshape(-1)]
            out[plain] = items[0] if name == "default" else items
    return out


class _Importer:
    def __init__(self, opsets: dict[str, int]):
        self.opsets = opsets
        self.node_names: set[str] = set()
        self.symbols: set[str] = set()
        self.types: dict | None = None    # every value's TypeProto, to expand SequenceMap

    def fresh_symbol(self, hint: str) -> str:
        """A symbol no other dim shares (``x_d2?``): not a name an exporter writes, so an
        unknown dim is never tied to a named one (torch's ``s0``, ``s1`` ...)."""
        name = f"{hint}?"
        if name in self.symbols:
            name = f"{hint}?{len(self.symbols)}"
        self.symbols.add(name)
        return name

    def node_name(self, proto: onnx.NodeProto, index: int) -> str:
        base = proto.name or f"{proto.op_type}_{index}"
        name, k = base, 1
        while name in self.node_names:
            name, k = f"{base}_{k}", k + 1
        self.node_names.add(name)
        return name

    def import_graph(self, gp: onnx.GraphProto, name: str,
                     input_shapes: Mapping[str, Sequence[Dim]] | None = None) -> Graph:
        g = Graph(name=name, opsets=dict(self.opsets))
        for init in gp.initializer:
            arr = numpy_helper.to_array(init)
            g.constants[init.name] = arr
            g.types[init.name] = TensorType.of(arr)
        if len(gp.sparse_initializer):
            raise ModelImportError("sparse initializers are not supported")
        shapes = dict(input_shapes or {})
        for vi in gp.input:
            if vi.name in g.constants:
                continue  # an old-style model that also lists weights as inputs
            if name != "main" and not vi.type.HasField("tensor_type"):
                g.inputs.append(vi.name)   # a body input typed by its op (infer-shapes)
                continue
            t = _type_from_proto(vi, self.fresh_symbol)
            if vi.name in shapes:
                fixed = tuple(self.fresh_symbol(f"{vi.name}_d{k}") if is_unknown_dim(d) else d
                              for k, d in enumerate(shapes.pop(vi.name)))
                if t.shape is not None and len(t.shape) != len(fixed):
                    raise CompileOptionError(f"--input-shape for '{vi.name}' has rank "
                                             f"{len(fixed)}, the model says rank {len(t.shape)}")
                t = TensorType(t.dtype, fixed)
            g.inputs.append(vi.name)
            g.types[vi.name] = t
        if shapes and name == "main":
            raise CompileOptionError(f"--input-shape names unknown inputs {sorted(shapes)}; "
                                     f"the model's inputs are {g.inputs}")
        nodes = gp.node if self.types is None else expand_nodes(gp, self.opsets, self.types)
        for index, proto in enumerate(nodes):
            attrs, regions = {}, []

            def import_region(sub: onnx.GraphProto, _attr_name=[None]) -> Graph:
                region = self.import_graph(sub, sub.name or f"{proto.op_type}_body")
                regions.append(region)
                return region

            for a in proto.attribute:
                value = convert_attribute(a, import_region)
                if isinstance(value, Graph):
                    value.meta["attribute"] = a.name
                attrs[a.name] = value
            domain = canonical_domain(proto.domain)    # its version: its own domain's import
            op_type, version = proto.op_type, self.opsets.get(domain, 0)
            node_name = self.node_name(proto, index)
            refuse_non_tensor_io(proto, domain, version, node_name)
            if domain == "ai.onnx.ml" and op_type == "LabelEncoder":
                attrs = string_tensor_attributes(attrs)
            if not domain and op_type in RENAMED_OPS:
                op_type, since = RENAMED_OPS[op_type]
                version = max(version, since)
            node = Node(op=op_type, inputs=list(proto.input), outputs=list(proto.output),
                        attrs={k: v for k, v in attrs.items() if not isinstance(v, Graph)},
                        name=node_name, domain=domain,
                        version=version, regions=regions)
            g.nodes.append(node)
        g.outputs = [o.name for o in gp.output]
        return g


def check_opset(version: int, domain: str = "") -> None:
    """ModelImportError unless ``version`` of ``domain`` is one aircc supports: the default
    domain's from :func:`supported_opsets`, another domain's those the installed onnx
    defines (``ai.onnx.ml`` 1 to 5, ``ai.onnx.preview.training`` 1, ...)."""
    if canonical_domain(domain):
        first, last = domain_opsets(domain)
        if last is not None and not first <= version <= last:
            raise ModelImportError(f"the model uses opset {version} of domain {domain}; aircc "
                                   f"supports opsets {first} to {last} (those of onnx "
                                   f"{onnx.__version__})")
        return
    first, last = supported_opsets()
    if version > last:
        raise ModelImportError(f"opset {version} of the default domain is newer than aircc "
                               f"supports ({first} to {last}, those of onnx {onnx.__version__})")
    if version < first:
        raise ModelImportError(f"the model uses opset {version} of the default domain; aircc "
                               f"supports opsets {first} to {last}")


def import_onnx(source, input_shapes: Mapping[str, Sequence[Dim]] | None = None,
                name: str | None = None) -> Graph:
    """Import an ONNX model (path, bytes or ModelProto) into an AIR IR graph."""
    model = load_onnx(source)
    opsets = {canonical_domain(o.domain): int(o.version) for o in model.opset_import}
    for domain, version in opsets.items():     # a model may import only ai.onnx.ml, say
        check_opset(version, domain)
    if not model.graph.output:
        raise ModelImportError("the model's graph has no outputs: there is nothing to compute")
    importer = _Importer(opsets)
    if has_expanded_ops(model):
        importer.types = known_types(model)
    graph = importer.import_graph(model.graph, "main", input_shapes)
    graph.meta["model_name"] = name or model.graph.name or "model"
    graph.meta["producer"] = f"{model.producer_name} {model.producer_version}".strip()
    graph.meta["onnx"] = model_metadata(model)      # the .om's model.onnx (its own metadata)
    return graph

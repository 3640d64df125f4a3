"""What an ONNX model says of itself, kept for the .om's ``model`` section (field ``onnx``).

onnxruntime shows users the model's metadata (``get_modelmeta()``) and the shapes its
graph declares for its inputs and outputs (``get_inputs()``, ``get_outputs()``, with
symbolic dims as their names and unnamed ones as None).  The compiler keeps both so that
an .om alone answers the same questions: the shapes the compile infers name their
symbols its own way, and an .om never holds the ONNX file.
"""
from __future__ import annotations

import onnx

Dim = int | str | None


def declared_shape(value: onnx.ValueInfoProto) -> list[Dim] | None:
    """The shape ``value`` declares: per dim its size, its name, or None (unnamed, or a
    negative size, which some exporters write for "unknown"); None when it declares no
    shape (or is not a tensor)."""
    t = value.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims: list[Dim] = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value) if d.dim_value >= 0 else None)
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def model_metadata(model: onnx.ModelProto) -> dict:
    """The model's metadata and its graph's declared input and output shapes (by name; the
    inputs without the initializers an old model lists among them) as the ``model``
    section's ``onnx`` field stores them (:class:`aircc.formats.model_section.OnnxRecord`)."""
    g = model.graph
    weights = {t.name for t in g.initializer}
    return {
        "producer_name": model.producer_name, "producer_version": model.producer_version,
        "domain": model.domain,
        "model_version": int(model.model_version) if model.HasField("model_version") else None,
        "doc_string": model.doc_string, "graph_name": g.name, "graph_doc_string": g.doc_string,
        "metadata_props": {p.key: p.value for p in model.metadata_props},
        "input_shapes": {v.name: declared_shape(v) for v in g.input if v.name not in weights},
        "output_shapes": {v.name: declared_shape(v) for v in g.output},
    }

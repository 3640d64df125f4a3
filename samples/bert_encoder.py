"""A small BERT-style encoder with dynamic batch and sequence, written the way
PyTorch's ONNX exporter writes it (deterministic weights).

    python samples/bert_encoder.py        # writes samples/bert_encoder.onnx

Inputs ``input_ids`` int64 [batch, seq] and ``attention_mask`` int64 [batch, seq]
(1 = keep, 0 = pad); outputs ``last_hidden_state`` float32 [batch, seq, hidden] and
``pooled`` float32 [batch, hidden].

The graph keeps the exporter's run-time shape computations so that a compiler has
to resolve them: position ids from ``Shape -> Gather -> Range -> Unsqueeze``; the
extended attention mask both as ``Unsqueeze -> Cast -> Sub -> Mul`` and as
``Expand`` (target shape from ``Shape/Gather/Unsqueeze/Concat``) ``-> Equal -> Where``
with a ``ConstantOfShape`` else-branch; per-layer head split/merge with
``Reshape`` targets built from ``Shape/Gather/Unsqueeze/Concat``; GELU with ``Erf``.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MASK_VALUE = -10000.0


class _Builder:
    """Accumulates nodes, initializers and unique names."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._count: dict[str, int] = {}

    def name(self, op: str) -> str:
        k = self._count.get(op, 0)
        self._count[op] = k + 1
        return f"/{op}_{k}"

    def node(self, op: str, inputs: list[str], n_out: int = 1, name: str | None = None,
             **attrs) -> str | list[str]:
        name = name or self.name(op)
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype) -> str:
        """A ``Constant`` node (as the exporter writes shape/scalar constants)."""
        arr = np.asarray(value, dtype=dtype)
        name = self.name("Constant")
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=name,
                                           value=numpy_helper.from_array(arr, out)))
        return out

    def weight(self, name: str, shape, scale: float, offset: float = 0.0) -> str:
        arr = (self.rng.standard_normal(shape) * scale + offset).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    # --- exporter-style pieces -------------------------------------------------
    def dim(self, x: str, axis: int) -> str:
        """``Shape(x) -> Gather(axis)`` then ``Unsqueeze(0)``: a 1-D int64 [1] tensor."""
        shape = self.node("Shape", [x])
        d = self.node("Gather", [shape, self.const(axis, np.int64)], axis=0)
        return self.node("Unsqueeze", [d, self.const([0], np.int64)])

    def linear(self, x: str, prefix: str, fan_in: int, fan_out: int) -> str:
        w = self.weight(f"{prefix}.weight", (fan_in, fan_out), 0.05)
        b = self.weight(f"{prefix}.bias", (fan_out,), 0.02)
        return self.node("Add", [self.node("MatMul", [x, w]), b])

    def layer_norm(self, x: str, prefix: str, hidden: int) -> str:
        g = self.weight(f"{prefix}.weight", (hidden,), 0.05, 1.0)
        b = self.weight(f"{prefix}.bias", (hidden,), 0.02)
        return self.node("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-12)

    def gelu(self, x: str) -> str:
        d = self.node("Div", [x, self.const(1.4142135381698608, np.float32)])
        e = self.node("Erf", [d])
        a = self.node("Add", [e, self.const(1.0, np.float32)])
        m = self.node("Mul", [x, a])
        return self.node("Mul", [m, self.const(0.5, np.float32)])


def _embeddings(g: _Builder, vocab: int, max_pos: int, hidden: int) -> str:
    word_emb = g.weight("embeddings.word_embeddings.weight", (vocab, hidden), 0.1)
    pos_emb = g.weight("embeddings.position_embeddings.weight", (max_pos, hidden), 0.1)
    tt_row = g.weight("embeddings.token_type_embeddings.row0", (hidden,), 0.1)
    words = g.node("Gather", [word_emb, "input_ids"], axis=0)
    # position ids: Range(0, seq, 1) with seq = Shape(input_ids)[1]
    shape = g.node("Shape", ["input_ids"])
    seq = g.node("Gather", [shape, g.const(1, np.int64)], axis=0)
    pos = g.node("Range", [g.const(0, np.int64), seq, g.const(1, np.int64)])
    pos_ids = g.node("Unsqueeze", [pos, g.const([0], np.int64)])
    positions = g.node("Gather", [pos_emb, pos_ids], axis=0)
    x = g.node("Add", [words, tt_row])
    x = g.node("Add", [x, positions])
    return g.layer_norm(x, "embeddings.LayerNorm", hidden)


def _extended_mask(g: _Builder) -> str:
    """Additive mask [batch, 1, seq, seq]: 0 where kept, 2 * MASK_VALUE where padded."""
    m4 = g.node("Unsqueeze", ["attention_mask", g.const([1, 2], np.int64)])
    mf = g.node("Cast", [m4], to=TensorProto.FLOAT)
    inv = g.node("Sub", [g.const(1.0, np.float32), mf])
    ext1 = g.node("Mul", [inv, g.const(MASK_VALUE, np.float32)])          # [b, 1, 1, s]
    # expand to [b, 1, s, s] with the target shape built at run time
    b = g.dim("attention_mask", 0)
    s = g.dim("attention_mask", 1)
    target = g.node("Concat", [b, g.const([1], np.int64), s, s], axis=0)
    expanded = g.node("Expand", [mf, target])
    cond = g.node("Equal", [expanded, g.const(0.0, np.float32)])
    zeros = g.node("ConstantOfShape", [target],
                   value=numpy_helper.from_array(np.zeros(1, np.float32), "value"))
    ext2 = g.node("Where", [cond, g.const(MASK_VALUE, np.float32), zeros])  # [b, 1, s, s]
    return g.node("Add", [ext2, ext1])


def _layer(g: _Builder, x: str, mask: str, k: int, hidden: int, heads: int, ffn: int) -> str:
    p = f"encoder.layer.{k}"
    hd = hidden // heads

    def split_heads(t: str, perm: list[int]) -> str:
        shape = g.node("Concat", [g.dim(t, 0), g.dim(t, 1),
                                  g.const([heads], np.int64), g.const([hd], np.int64)], axis=0)
        return g.node("Transpose", [g.node("Reshape", [t, shape])], perm=perm)

    q = split_heads(g.linear(x, f"{p}.attention.self.query", hidden, hidden), [0, 2, 1, 3])
    kt = split_heads(g.linear(x, f"{p}.attention.self.key", hidden, hidden), [0, 2, 3, 1])
    v = split_heads(g.linear(x, f"{p}.attention.self.value", hidden, hidden), [0, 2, 1, 3])
    scores = g.node("MatMul", [q, kt])
    scores = g.node("Div", [scores, g.const(np.sqrt(hd), np.float32)])
    scores = g.node("Add", [scores, mask])
    probs = g.node("Softmax", [scores], axis=-1)
    ctx = g.node("MatMul", [probs, v])                                    # [b, h, s, hd]
    ctx = g.node("Transpose", [ctx], perm=[0, 2, 1, 3])                   # [b, s, h, hd]
    merged = g.node("Concat", [g.dim(ctx, 0), g.dim(ctx, 1), g.const([hidden], np.int64)],
                    axis=0)
    ctx = g.node("Reshape", [ctx, merged])
    attn = g.linear(ctx, f"{p}.attention.output.dense", hidden, hidden)
    x = g.layer_norm(g.node("Add", [attn, x]), f"{p}.attention.output.LayerNorm", hidden)
    h = g.gelu(g.linear(x, f"{p}.intermediate.dense", hidden, ffn))
    h = g.linear(h, f"{p}.output.dense", ffn, hidden)
    return g.layer_norm(g.node("Add", [h, x]), f"{p}.output.LayerNorm", hidden)


def build_bert_encoder(layers: int = 2, hidden: int = 64, heads: int = 4, ffn: int = 256,
                       vocab: int = 1000, max_pos: int = 256, seed: int = 0) -> onnx.ModelProto:
    """The encoder as an ONNX model (opset 17, IR version 8), weights from ``seed``."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    g = _Builder(np.random.default_rng(seed))
    x = _embeddings(g, vocab, max_pos, hidden)
    mask = _extended_mask(g)
    for k in range(layers):
        x = _layer(g, x, mask, k, hidden, heads, ffn)
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/output"))
    first = g.node("Gather", [x, g.const(0, np.int64)], axis=1)           # [b, hidden]
    pooled = g.linear(first, "pooler.dense", hidden, hidden)
    g.nodes.append(helper.make_node("Tanh", [pooled], ["pooled"], name="/pooler/Tanh"))
    graph = helper.make_graph(
        g.nodes, "bert_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", "seq", hidden]),
         helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="aircc-samples", ir_version=8)
    return model


def make_inputs(batch: int, seq: int, seed: int = 0, vocab: int = 1000) -> dict[str, np.ndarray]:
    """Random ids in [0, vocab); even rows are padded (trailing zeros in the mask),
    odd rows are full; every row keeps at least one token."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), np.int64)
    for i in range(0, batch, 2):
        keep = int(rng.integers(max(1, (seq + 1) // 2), seq)) if seq > 1 else 1
        mask[i, keep:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def main(out_dir: str = HERE) -> str:
    """Write ``bert_encoder.onnx`` into ``out_dir``; return its path."""
    model = build_bert_encoder()
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(out_dir, "bert_encoder.onnx")
    onnx.save(model, path)
    return path


if __name__ == "__main__":
    p = main()
    print(f"wrote {p} ({os.path.getsize(p)} bytes)")

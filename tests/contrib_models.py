"""Small models of onnxruntime's contrib ops, each with feeds and what to compare it with.

``CASES[name]()`` gives a :class:`Case`: the model (dims symbolic where a dynamic compile
keeps them so), feeds, and the reference onnxruntime runs: the model itself where its CPU
kernels have the op, else the same computation in ops they have (BiasAdd, BiasSplitGelu,
GemmFastGelu, NhwcConv, GroupNorm, SkipGroupNorm are CUDA-only in onnxruntime).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
RNG = np.random.default_rng(7)


@dataclass(frozen=True)
class Case:
    model: onnx.ModelProto
    feeds: dict
    reference: onnx.ModelProto
    lowered: int
    """How many of its nodes the ``lower-contrib`` pass rewrites."""
    stays: tuple = ()
    """Its ``com.microsoft`` ops that run on their own kernels (the rest are rewritten)."""


def model(nodes, inputs, outputs, inits=None, opset=17) -> onnx.ModelProto:
    """``inputs`` / ``outputs``: (name, element type, dims) each; ``inits``: name -> array."""
    graph = helper.make_graph(nodes, "contrib", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)],
                             ir_version=8)


def ms(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain=MS, **attrs)


def op(name, inputs, outputs, **attrs):
    return helper.make_node(name, inputs, outputs, **attrs)


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _same(nodes, inputs, outputs, inits, feeds, lowered, opset=17) -> Case:
    m = model(nodes, inputs, outputs, inits, opset)
    return Case(m, feeds, m, lowered, _kept(nodes, lowered))


def _kept(nodes, lowered: int) -> tuple:
    """The contrib ops of ``nodes`` left on their own kernels when none is rewritten."""
    return () if lowered else tuple(sorted({n.op_type for n in nodes if n.domain == MS}))


B, S, E, H = 2, 5, 16, 2
X = ("x", F, ["B", "S", E])
Y = ("y", F, ["B", "S", E])


def attention(mask: str = "1d") -> Case:
    """BERT's: packed QKV weights, a mask_index ([B] lengths as EmbedLayerNormalization makes
    them, or [B, S] with ``unidirectional``, or with an attention bias too)."""
    inits = {"w": rand(E, 3 * E, scale=0.3), "b": rand(3 * E, scale=0.1)}
    feeds = {"x": rand(B, S, E)}
    inputs = [X]
    ins = ["x", "w", "b", "m"]
    attrs = {"num_heads": H}
    if mask == "1d":
        feeds["m"] = np.array([S, S - 2], np.int32)
        inputs.append(("m", I32, ["B"]))
    else:
        feeds["m"] = np.array([[1] * S, [1] * (S - 1) + [0]], np.int32)
        inputs.append(("m", I32, ["B", "S"]))
        attrs["unidirectional"] = 1
    if mask == "bias":
        feeds["ab"] = rand(1, H, S, S)
        inputs.append(("ab", F, [1, H, "S", "S"]))
        ins += ["", "ab"]
    return _same([ms("Attention", ins, ["y"], **attrs)], inputs, [Y], inits, feeds, lowered=1)


def attention_past() -> Case:
    inits = {"w": rand(E, 3 * E, scale=0.3), "b": rand(3 * E, scale=0.1)}
    feeds = {"x": rand(B, 1, E), "past": rand(2, B, H, 3, E // H)}
    inputs = [("x", F, ["B", 1, E]), ("past", F, [2, "B", H, "P", E // H])]
    outputs = [("y", F, ["B", 1, E]), ("present", F, [2, "B", H, "T", E // H])]
    node = ms("Attention", ["x", "w", "b", "", "past"], ["y", "present"], num_heads=H, unidirectional=1)
    return _same([node], inputs, outputs, inits, feeds, lowered=0)


def multi_head_attention() -> Case:
    d = E // H
    feeds = {"q": rand(B, S, E), "k": rand(B, S, E), "v": rand(B, S, E), "pk": rand(B, H, 2, d),
             "pv": rand(B, H, 2, d), "m": np.array([[1] * (S + 2), [1] * (S + 1) + [0]], np.int32)}
    inputs = [(n, F, ["B", "S", E]) for n in "qkv"] + [("pk", F, ["B", H, "P", d]), ("pv", F, ["B", H, "P", d]),
                                                        ("m", I32, ["B", "T"])]
    outputs = [Y, ("present_k", F, ["B", H, "T", d]), ("present_v", F, ["B", H, "T", d])]
    node = ms("MultiHeadAttention", ["q", "k", "v", "b", "m", "", "pk", "pv"], ["y", "present_k", "present_v"],
              num_heads=H, unidirectional=1)
    return _same([node], inputs, outputs, {"b": rand(3 * E)}, feeds, lowered=0)


def group_query_attention(rotary: bool = True) -> Case:
    """A decoding step: one token over a cache of 6, two query heads a key-value head,
    rotary embedding from the cache's positions."""
    d, kvh, p = 16, 1, 6
    feeds = {"q": rand(B, 1, H * d), "k": rand(B, 1, kvh * d), "v": rand(B, 1, kvh * d),
             "pk": rand(B, kvh, p, d), "pv": rand(B, kvh, p, d), "seqlens": np.array([p, p - 2], np.int32)}
    inits = {"total": np.array(p + 1, np.int32), "cos": rand(16, 8), "sin": rand(16, 8)}
    inputs = [("q", F, ["B", 1, H * d]), ("k", F, ["B", 1, kvh * d]), ("v", F, ["B", 1, kvh * d]),
              ("pk", F, ["B", kvh, p, d]), ("pv", F, ["B", kvh, p, d]), ("seqlens", I32, ["B"])]
    outputs = [("y", F, ["B", 1, H * d]), ("present_k", F, ["B", kvh, p + 1, d]),
               ("present_v", F, ["B", kvh, p + 1, d])]
    node = ms("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens", "total", "cos", "sin"],
              ["y", "present_k", "present_v"], num_heads=H, kv_num_heads=kvh, do_rotary=int(rotary),
              local_window_size=4)
    return _same([node], inputs, outputs, inits, feeds, lowered=0)


def rotary_embedding() -> Case:
    feeds = {"x": rand(B, S, E), "pos": RNG.integers(0, 12, (B, S)).astype(np.int64)}
    inputs = [X, ("pos", I64, ["B", "S"])]
    node = ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], interleaved=1)
    return _same([node], inputs, [Y], {"cos": rand(12, 4), "sin": rand(12, 4)}, feeds, lowered=0)


def skip_layer_normalization() -> Case:
    """With every output, then the simplified (RMS) ones, of both domains."""
    inits = {"g": rand(E), "beta": rand(E), "bias": rand(E)}
    feeds = {"x": rand(B, S, E), "skip": rand(B, S, E)}
    nodes = [ms("SkipLayerNormalization", ["x", "skip", "g", "beta", "bias"], ["n", "mean", "inv", "sum"],
                epsilon=1e-5),
             ms("SkipSimplifiedLayerNormalization", ["n", "skip", "g"], ["r", "", "rinv"], epsilon=1e-6),
             op("SimplifiedLayerNormalization", ["r", "g"], ["y"], epsilon=1e-5)]
    stat = ["B", "S", 1]
    outputs = [Y, ("mean", F, stat), ("inv", F, stat), ("sum", F, ["B", "S", E]), ("rinv", F, stat)]
    return _same(nodes, [X, ("skip", F, ["B", "S", E])], outputs, inits, feeds, lowered=2)


def layer_normalization_14() -> Case:
    """onnxruntime's LayerNormalization in the default domain at opset 14."""
    nodes = [op("LayerNormalization", ["x", "g", "beta"], ["y"], epsilon=1e-3)]
    return _same(nodes, [X], [Y], {"g": rand(E), "beta": rand(E)}, {"x": rand(B, S, E)}, lowered=1, opset=14)


def embed_layer_normalization() -> Case:
    feeds = {"ids": RNG.integers(0, 30, (B, S)).astype(np.int32),
             "seg": RNG.integers(0, 2, (B, S)).astype(np.int32),
             "mask": np.array([[1] * S, [1] * (S - 2) + [0, 0]], np.int32)}
    inits = {"we": rand(30, E), "pe": rand(8, E), "se": rand(2, E), "g": rand(E), "beta": rand(E)}
    node = ms("EmbedLayerNormalization", ["ids", "seg", "we", "pe", "se", "g", "beta", "mask"],
              ["y", "mask_index", "sum"], epsilon=1e-5)
    inputs = [(n, I32, ["B", "S"]) for n in ("ids", "seg", "mask")]
    outputs = [Y, ("mask_index", I32, ["B"]), ("sum", F, ["B", "S", E])]
    return _same([node], inputs, outputs, inits, feeds, lowered=0)


def gelus() -> Case:
    """A feed-forward block as the optimizer leaves it: MatMul, BiasGelu; FastGelu (with and
    without a bias), Gelu, QuickGelu, FusedMatMul."""
    inits = {"w1": rand(E, 2 * E, scale=0.3), "b1": rand(2 * E), "w2": rand(E, 2 * E, scale=0.3)}
    nodes = [op("MatMul", ["x", "w1"], ["h"]), ms("BiasGelu", ["h", "b1"], ["g1"]),
             ms("FastGelu", ["g1", "b1"], ["g2"]), ms("FastGelu", ["g2"], ["g3"]), ms("Gelu", ["g3"], ["g4"]),
             ms("QuickGelu", ["g4"], ["g5"], alpha=1.702),
             ms("FusedMatMul", ["g5", "w2"], ["y"], transB=1, alpha=0.25)]
    return _same(nodes, [X], [Y], inits, {"x": rand(B, S, E)}, lowered=6)


def fused_conv() -> Case:
    feeds = {"x": rand(B, 4, 6, 6), "z": rand(B, 8, 6, 6)}
    inits = {"w": rand(8, 4, 3, 3, scale=0.3), "b": rand(8), "w2": rand(8, 8, 1, 1)}
    nodes = [ms("FusedConv", ["x", "w", "b", "z"], ["c"], activation="Relu", pads=[1, 1, 1, 1]),
             ms("FusedConv", ["c", "w2"], ["y"], activation="Clip", activation_params=[-0.5, 0.5])]
    inputs = [("x", F, ["B", 4, 6, 6]), ("z", F, ["B", 8, 6, 6])]
    return _same(nodes, inputs, [("y", F, ["B", 8, 6, 6])], inits, feeds, lowered=2)


def fused_gemm() -> Case:
    nodes = [ms("FusedGemm", ["x", "w", "c"], ["y"], activation="LeakyRelu", activation_alpha=0.1, transB=1)]
    inits = {"w": rand(8, E), "c": rand(8)}
    return _same(nodes, [("x", F, ["B", E])], [("y", F, ["B", 8])], inits, {"x": rand(B, E)}, lowered=1)


def _cuda_only(nodes, ref_nodes, inputs, outputs, inits, feeds, lowered, ref_opset=17, stays=()) -> Case:
    return Case(model(nodes, inputs, outputs, inits), feeds, model(ref_nodes, inputs, outputs, inits, ref_opset),
                lowered, stays)


def bias_ops() -> Case:
    """BiasAdd, BiasSplitGelu, GemmFastGelu (stable diffusion's and the optimizer's option)."""
    inits = {"bias": rand(E), "w": rand(E, E, scale=0.3), "c": rand(E)}
    feeds = {"x": rand(B, S, E), "skip": rand(B, S, E)}
    nodes = [ms("BiasAdd", ["x", "bias", "skip"], ["a"]), ms("BiasSplitGelu", ["a", "bias"], ["s"]),
             ms("GemmFastGelu", ["a", "w", "c"], ["y"])]
    ref = [op("Add", ["x", "bias"], ["a0"]), op("Add", ["a0", "skip"], ["a"]), op("Add", ["a", "bias"], ["t"]),
           op("Split", ["t"], ["l", "r"], axis=-1, num_outputs=2), ms("Gelu", ["r"], ["gr"]),
           op("Mul", ["l", "gr"], ["s"]), op("MatMul", ["a", "w"], ["m"]), ms("FastGelu", ["m", "c"], ["y"])]
    outputs = [Y, ("s", F, ["B", "S", E // 2])]
    return _cuda_only(nodes, ref, [X, ("skip", F, ["B", "S", E])], outputs, inits, feeds, lowered=2, ref_opset=18,
                      stays=("BiasSplitGelu",))


def nhwc_group_norm() -> Case:
    """NhwcConv, GroupNorm and SkipGroupNorm with SiLU, channels-last (stable diffusion's UNet)."""
    c = 8
    feeds = {"x": rand(B, 6, 6, c), "skip": rand(B, c)}
    inits = {"w": rand(c, 3, 3, c, scale=0.2), "b": rand(c), "g": rand(c), "beta": rand(c)}
    nodes = [ms("NhwcConv", ["x", "w", "b"], ["h"], pads=[1, 1, 1, 1]),
             ms("GroupNorm", ["h", "g", "beta"], ["n"], groups=4, activation=1),
             ms("SkipGroupNorm", ["n", "g", "beta", "skip", "b"], ["y", "sum"], groups=2, activation=0)]
    ref = [op("Transpose", ["x"], ["xf"], perm=[0, 3, 1, 2]), op("Transpose", ["w"], ["wf"], perm=[0, 3, 1, 2]),
           op("Conv", ["xf", "wf", "b"], ["hf"], pads=[1, 1, 1, 1]),
           op("GroupNormalization", ["hf", "g", "beta"], ["gn"], num_groups=4, epsilon=1e-5),
           op("Sigmoid", ["gn"], ["sg"]), op("Mul", ["gn", "sg"], ["nf"]),
           op("Unsqueeze", ["skip", "axes"], ["skip4"]), op("Add", ["nf", "skip4"], ["s0"]),
           op("Add", ["s0", "bc"], ["sf"]), op("GroupNormalization", ["sf", "g", "beta"], ["yf"], num_groups=2,
                                                epsilon=1e-5),
           op("Transpose", ["yf"], ["y"], perm=[0, 2, 3, 1]), op("Transpose", ["sf"], ["sum"], perm=[0, 2, 3, 1])]
    ref_inits = dict(inits, axes=np.array([2, 3], np.int64), bc=inits["b"].reshape(c, 1, 1))
    shape = ["B", 6, 6, c]
    inputs, outputs = [("x", F, shape), ("skip", F, ["B", c])], [("y", F, shape), ("sum", F, shape)]
    return Case(model(nodes, inputs, outputs, inits), feeds, model(ref, inputs, outputs, ref_inits, 21), 1,
                ("GroupNorm", "SkipGroupNorm"))


def decoder_masked_multi_head_attention() -> Case:
    """A beam-search step: the shared key-value buffer, the past length a run-time input."""
    b, m, d = 4, 6, E // H
    feeds = {"q": rand(b, 1, E), "k": rand(b, 1, E), "v": rand(b, 1, E), "pk": rand(b, H, m, d),
             "pv": rand(b, H, m, d), "p": np.array(3, np.int32),
             "ind": RNG.integers(0, 2, (b // 2, 2, m)).astype(np.int32)}
    inputs = [(n, F, ["B", 1, E]) for n in "qkv"] + [(n, F, ["B", H, m, d]) for n in ("pk", "pv")] + [
        ("p", I32, []), ("ind", I32, ["N", 2, m])]
    node = ms("DecoderMaskedMultiHeadAttention", ["q", "k", "v", "", "", "pk", "pv", "p", "beams", "ind", "bias"],
              ["y", "present_k", "present_v"], num_heads=H, past_present_share_buffer=1)
    outputs = [("y", F, ["B", 1, E]), ("present_k", F, ["B", H, m, d]), ("present_v", F, ["B", H, m, d])]
    return _same([node], inputs, outputs, {"beams": np.array(2, np.int32), "bias": rand(3 * E)}, feeds, lowered=0)


def t5_bias_nodes(table: str, q_len: str, k_len: str, out: str, buckets: int, max_distance: int,
                  bidirectional: bool) -> tuple[list, dict]:
    """(nodes, initializers): T5's bucketed relative position bias [1, H, q, k] of ``table``
    as its exporters write it, in default-domain ops (the reference of RelativePositionBias)."""
    half = buckets // 2 if bidirectional else buckets
    exact = half // 2
    inits = {"t5_zero": np.array(0, np.int64), "t5_one": np.array(1, np.int64), "t5_exact": np.array(exact, np.int64),
             "t5_exactf": np.array(exact, np.float32), "t5_top": np.array(half - 1, np.int64),
             "t5_logmax": np.array(np.log(max_distance / exact), np.float32),
             "t5_span": np.array(half - exact, np.float32), "t5_half": np.array(half, np.int64),
             "t5_col": np.array([1], np.int64), "t5_row": np.array([0], np.int64)}
    nodes = [op("Cast", [q_len], ["t5_q"], to=I64), op("Cast", [k_len], ["t5_k"], to=I64),
             op("Range", ["t5_zero", "t5_q", "t5_one"], ["t5_qr"]), op("Range", ["t5_zero", "t5_k", "t5_one"], ["t5_kr"]),
             op("Unsqueeze", ["t5_qr", "t5_col"], ["t5_qc"]), op("Unsqueeze", ["t5_kr", "t5_row"], ["t5_kc"]),
             op("Sub", ["t5_kc", "t5_qc"], ["t5_rel"])]
    if bidirectional:
        nodes += [op("Greater", ["t5_rel", "t5_zero"], ["t5_pos"]), op("Cast", ["t5_pos"], ["t5_posi"], to=I64),
                  op("Mul", ["t5_posi", "t5_half"], ["t5_base"]), op("Abs", ["t5_rel"], ["t5_r"])]
    else:
        nodes += [op("Min", ["t5_rel", "t5_zero"], ["t5_mn"]), op("Neg", ["t5_mn"], ["t5_r"]),
                  op("Mul", ["t5_r", "t5_zero"], ["t5_base"])]
    nodes += [op("Cast", ["t5_r"], ["t5_rf"], to=F), op("Div", ["t5_rf", "t5_exactf"], ["t5_ratio"]),
              op("Log", ["t5_ratio"], ["t5_lg"]), op("Div", ["t5_lg", "t5_logmax"], ["t5_sc"]),
              op("Mul", ["t5_sc", "t5_span"], ["t5_sp"]), op("Cast", ["t5_sp"], ["t5_spi"], to=I64),
              op("Add", ["t5_spi", "t5_exact"], ["t5_large"]), op("Min", ["t5_large", "t5_top"], ["t5_capped"]),
              op("Less", ["t5_r", "t5_exact"], ["t5_small"]), op("Where", ["t5_small", "t5_r", "t5_capped"], ["t5_b"]),
              op("Add", ["t5_b", "t5_base"], ["t5_bucket"]), op("Gather", [table, "t5_bucket"], ["t5_vals"]),
              op("Transpose", ["t5_vals"], ["t5_t"], perm=[2, 0, 1]), op("Unsqueeze", ["t5_t", "t5_row"], [out])]
    return nodes, inits


def relative_position_bias() -> Case:
    """T5's: the lengths from the input's shape (static: known at compile time)."""
    inits = {"table": rand(32, H), "one": np.array([1], np.int64)}
    shape = [op("Shape", ["x"], ["shape"]), op("Gather", ["shape", "one"], ["len1"]),
             op("Squeeze", ["len1"], ["len"])]
    nodes = shape + [ms("RelativePositionBias", ["table", "len", "len"], ["y"], max_distance=16, is_bidirectional=1)]
    ref_nodes, ref_inits = t5_bias_nodes("table", "len", "len", "y", 32, 16, True)
    outputs = [("y", F, [1, H, "S", "S"])]
    return Case(model(nodes, [X], outputs, inits), {"x": rand(B, 40, E)},
                model(shape + ref_nodes, [X], outputs, dict(inits, **ref_inits)), 0, ("RelativePositionBias",))


#: Every case, by name.
CASES: dict[str, Callable[[], Case]] = {
    "attention-1d": attention, "attention-2d-causal": lambda: attention("2d"),
    "attention-bias": lambda: attention("bias"), "attention-past": attention_past,
    "multi-head-attention": multi_head_attention, "group-query-attention": group_query_attention,
    "rotary-embedding": rotary_embedding, "skip-layer-normalization": skip_layer_normalization,
    "layer-normalization-14": layer_normalization_14, "embed-layer-normalization": embed_layer_normalization,
    "gelus": gelus, "fused-conv": fused_conv, "fused-gemm": fused_gemm, "bias-ops": bias_ops,
    "nhwc-group-norm": nhwc_group_norm, "decoder-masked-mha": decoder_masked_multi_head_attention,
    "relative-position-bias": relative_position_bias,
}

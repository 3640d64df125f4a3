"""fuse-attention: an exported self-attention block becomes one aircc.Attention kernel.

- the Reshape targets the exporter computes at run time are resolved from the types
  (shape_value), so the pass fires in dynamic mode as well as static;
- the fused encoder matches onnxruntime, with both attention layers fused and the
  head reshapes / K^T transpose / scores gone;
- a block whose Q is also read elsewhere, or whose heads differ, stays as it was;
- the kernel, bound or not, matches a float64 reference for each mask form, for each
  layout of its input and output (batch- or sequence-first), and with the NaN guard
  (a row of -inf scores gives zeros, as PyTorch's Where(IsNaN(p), 0, p) has it).
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import aircc
from aircc.compiler.frontend.onnx_import import import_onnx
from aircc.compiler.ir.graph import TensorType
from aircc.compiler.passes.pipeline import run_pipeline
from aircc.compiler.passes.shape_values import shape_value
from aircc.ops import InferContext, kernel_backend, op_def, resolve_target
from bert_encoder import build_bert_encoder, make_inputs
from graphs import const, model, tensor

#: The numpy backend's Attention kernel, tiled for one fixed target.
ATTENTION = kernel_backend("numpy").impl("Attention", 1, "aircc")
TARGET = resolve_target("cpu-avx2")


def test_shape_value_follows_the_exporters_shape_arithmetic():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
             helper.make_node("Unsqueeze", ["d0", "ax"], ["u0"]),
             helper.make_node("Gather", ["s", "i1"], ["d1"], axis=0),
             helper.make_node("Unsqueeze", ["d1", "ax"], ["u1"]),
             helper.make_node("Concat", ["u0", "u1", "heads"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"]),
             helper.make_node("Add", ["target", "target"], ["doubled"])]
    m = model(nodes, [tensor("x", ["B", "S", 8])],
              [tensor("y", ["B", "S", 2, 4]), tensor("doubled", [4], TensorProto.INT64)],
              [const("i0", np.array(0, np.int64)), const("i1", np.array(1, np.int64)),
               const("ax", np.array([0], np.int64)), const("heads", np.array([2, 4], np.int64))])
    g = run_pipeline(import_onnx(m), ["infer-shapes"])
    assert shape_value(g, "target") == ["B", "S", 2, 4]
    assert shape_value(g, "d1") == ["S"]
    assert shape_value(g, "doubled") is None            # arithmetic is not followed
    assert shape_value(g, "x") is None                  # not an integer shape value


@pytest.fixture(scope="module")
def encoder():
    return build_bert_encoder()


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_encoder_attention_fuses_and_matches_onnxruntime(encoder, mode, device):
    feeds = make_inputs(2, 24)
    shapes = {k: list(v.shape) for k, v in feeds.items()} if mode == "static" else None
    compiled = aircc.compile(encoder, mode=mode, input_shapes=shapes)
    assert compiled.report.stats["fused_attention"] == 2
    ops = [n.op for n in compiled.graph.nodes]
    assert ops.count("Attention") == 2
    assert "SoftmaxMatMul" not in ops and "Transpose" not in ops
    for n in compiled.graph.nodes:
        if n.op == "Attention":
            assert n.attrs == {"heads": 4, "base2": 1} and len(n.inputs) == 4      # x, W, b, mask
            assert compiled.graph.types[n.inputs[1]].shape == (64, 192)
    sess = ort.InferenceSession(encoder.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    m = aircc.load(compiled, device=device)
    for _ in range(2):                        # the second run of a dynamic model is a replay
        got = m.run(feeds)
        for name, r in ref.items():
            np.testing.assert_allclose(got[name], r, rtol=1e-4, atol=2e-5, err_msg=name)
    m.close()


def _attention_block(q_also_output: bool = False, v_source: str = "x"):
    """x [B, S, 8] -> exporter-style self-attention with 2 heads of 4, optionally with Q's
    linear output also a graph output, or V made from another input (``v_source``)."""
    rng = np.random.default_rng(3)
    inits = [const(f"W{c}", rng.standard_normal((8, 8)).astype(np.float32) * 0.3) for c in "qkv"]
    inits += [const(f"b{c}", rng.standard_normal(8).astype(np.float32) * 0.1) for c in "qkv"]
    inits += [const("shape", np.array([0, 0, 2, 4], np.int64)),
              const("merge", np.array([0, 0, 8], np.int64))]
    nodes = []
    for c in "qkv":
        nodes += [helper.make_node("MatMul", [v_source if c == "v" else "x", f"W{c}"], [f"{c}m"]),
                  helper.make_node("Add", [f"{c}m", f"b{c}"], [f"{c}l"]),
                  helper.make_node("Reshape", [f"{c}l", "shape"], [f"{c}r"])]
    nodes += [helper.make_node("Transpose", ["qr"], ["qt"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
              helper.make_node("Transpose", ["vr"], ["vt"], perm=[0, 2, 1, 3]),
              helper.make_node("MatMul", ["qt", "kt"], ["s"]),
              helper.make_node("Add", ["s", "mask"], ["sm"]),
              helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vt"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "merge"], ["y"])]
    outputs = [tensor("y", ["B", "S", 8])]
    if q_also_output:
        outputs.append(tensor("ql", ["B", "S", 8]))
    inputs = [tensor("x", ["B", "S", 8]), tensor("mask", ["B", 1, 1, "S"])]
    if v_source != "x":
        inputs.append(tensor(v_source, ["B", "S", 8]))
    return model(nodes, inputs, outputs, inits)


@pytest.mark.parametrize("variant, fused", [({}, 1), ({"q_also_output": True}, 0), ({"v_source": "z"}, 0)])
def test_attention_fuses_only_a_whole_block(variant, fused, device):
    m = _attention_block(**variant)
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((3, 5, 8)).astype(np.float32),
             "mask": np.where(rng.random((3, 1, 1, 5)) < 0.3, -1e4, 0).astype(np.float32)}
    feeds.update({i.name: rng.standard_normal((3, 5, 8)).astype(np.float32)
                  for i in m.graph.input if i.name not in feeds})
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, feeds)
    compiled = aircc.compile(m, mode="dynamic")
    assert compiled.report.stats["fused_attention"] == fused
    assert [n.op for n in compiled.graph.nodes].count("Attention") == fused
    got = aircc.load(compiled, device=device).run(feeds)
    for o, r in zip(m.graph.output, ref):
        np.testing.assert_allclose(got[o.name], r, rtol=1e-5, atol=1e-6, err_msg=o.name)


def _reference(x, w, b, mask, heads, nan_guard=False):
    """The context [B, S, H, D] in float64 (x [B, S, E]); ``nan_guard``: NaN probabilities
    (rows of -inf scores) count as 0."""
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    bs, s, e = x.shape
    d = w.shape[1] // 3 // heads
    qkv = (x @ w + b).reshape(bs, s, 3, heads, d)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    scores = q @ k.swapaxes(-1, -2)
    if mask is not None:       # added in float32, as every engine does (-1e4 + s rounds s)
        scores = (scores.astype(np.float32) + mask).astype(np.float64)
    with np.errstate(invalid="ignore"):
        p = np.exp(scores - scores.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
    if nan_guard:
        p[np.isnan(p)] = 0
    return (p @ v).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("bs, s, mask_kind", [(1, 6, "key"), (2, 40, "key"), (2, 40, "expanded"),
                                               (2, 40, "full"), (2, 40, None), (3, 5, "full"),
                                               (2, 70, "key"), (2, 70, "expanded"), (2, 70, "full"),
                                               (2, 70, None), (2, 70, "all_masked"), (2, 70, "overflow")])
@pytest.mark.parametrize("bound", [False, True])
@pytest.mark.parametrize("base2", [False, True])
def test_attention_kernel_matches_a_float64_reference(bs, s, mask_kind, bound, base2):
    """Small (Softmax's short path) and large scores; a mask per key [B, 1, 1, S], the same
    expanded over the queries [B, 1, S, S], a causal mask per head [B, H, S, S], none;
    the kernel as called directly and as bound once and run twice; with Q in natural
    units and, as fuse-attention makes it, in units of log2 (``base2``)."""
    rng = np.random.default_rng(bs * 100 + s)
    heads, e = 2, 12
    x = rng.standard_normal((bs, s, e)).astype(np.float32)
    if mask_kind == "overflow":                 # scores past exp's range: shifted, once
        x *= 12
    w = (rng.standard_normal((e, 3 * e)) * 0.4).astype(np.float32)
    b = (rng.standard_normal(3 * e) * 0.1).astype(np.float32)
    keys = np.where(rng.random((bs, 1, 1, s)) < 0.3, -1e4, 0).astype(np.float32)
    if mask_kind == "all_masked":               # every key of sample 1: its sums underflow
        keys[1] = -1e4
    mask = {"key": keys, "all_masked": keys, "overflow": keys, "expanded": np.ascontiguousarray(np.broadcast_to(keys, (bs, 1, s, s))),
            "full": np.broadcast_to(np.triu(np.full((s, s), -1e9, np.float32), 1),
                                    (bs, heads, s, s)).copy(),
            None: None}[mask_kind]
    wk, bk = w.copy(), b.copy()
    if base2:                                   # Q's third of the weights in log2 units
        wk[:, :e] = (w[:, :e].astype(np.float64) * np.log2(np.e)).astype(np.float32)
        bk[:e] = (b[:e].astype(np.float64) * np.log2(np.e)).astype(np.float32)
    ins = [x, wk, bk] + ([mask] if mask is not None else [])
    attrs = {"heads": heads, "base2": 1} if base2 else {"heads": heads}
    tiling = ATTENTION.tile([TensorType.of(a) for a in ins], attrs, TARGET)
    ws = np.empty(tiling["workspace"], np.uint8)
    y = np.full((bs, s, heads, e // heads), np.nan, np.float32)
    if bound:
        run = ATTENTION.prepare(ins, [y], attrs, tiling, ws, [False, True, True, False])
        assert run is not None
        run()
        y[...] = np.nan
        run()
    else:
        ATTENTION.kernel(ins, [y], attrs, tiling, ws)
    # scores of +-400 (overflow) are rounded by float32 to 3e-5, which moves the softmax
    tol = 2e-4 if mask_kind == "overflow" else 2e-6
    np.testing.assert_allclose(y, _reference(x, w, b, mask, heads), rtol=2e-5, atol=tol)


def _masks(kind: str, bs: int, heads: int, s: int, rng) -> np.ndarray:
    """Masks as the exporters build them: causal [S, S] with -inf (torch.nn's
    generate_square_subsequent_mask), per head [B, H, S, S] (MultiheadAttention's merged
    masks), a key padding row of finfo.min with one sample's keys all -inf."""
    if kind == "causal":
        return np.triu(np.full((s, s), -np.inf, np.float32), 1)
    if kind == "heads":
        return (rng.standard_normal((bs, heads, s, s)) * 3).astype(np.float32)
    keys = np.where(rng.random((bs, 1, 1, s)) < 0.3, np.finfo(np.float32).min, 0).astype(np.float32)
    keys[-1] = -np.inf                  # every key of the last sample masked: NaN rows
    return keys


@pytest.mark.parametrize("seq_first_in, seq_first_out", [(0, 0), (1, 1), (0, 1), (1, 0)])
@pytest.mark.parametrize("bs, s, mask_kind", [(2, 5, "causal"), (2, 70, "causal"), (3, 40, "heads"),
                                               (2, 70, "padded")])
@pytest.mark.parametrize("bound", [False, True])
def test_attention_kernel_layouts_masks_and_nan_guard_match_a_float64_reference(
        seq_first_in, seq_first_out, bs, s, mask_kind, bound):
    """X [B, S, E] or [S, B, E], the context [B, S, H, D] or [S, B, H, D], as
    torch.nn.MultiheadAttention's exports read and write them; with the NaN guard a
    sample whose keys are all -inf gets a zero context."""
    rng = np.random.default_rng(bs * 1000 + s)
    heads, e = 3, 12
    x = rng.standard_normal((bs, s, e)).astype(np.float32)
    w = (rng.standard_normal((e, 3 * e)) * 0.4).astype(np.float32)
    b = (rng.standard_normal(3 * e) * 0.1).astype(np.float32)
    mask = _masks(mask_kind, bs, heads, s, rng)
    guard = mask_kind == "padded"
    attrs = {"heads": heads, "seq_first_in": seq_first_in, "seq_first_out": seq_first_out,
             **({"nan_guard": 1} if guard else {})}
    ins = [np.ascontiguousarray(x.transpose(1, 0, 2)) if seq_first_in else x, w, b, mask]
    tiling = ATTENTION.tile([TensorType.of(a) for a in ins], attrs, TARGET)
    ws = np.empty(tiling["workspace"], np.uint8)
    y = np.full((s, bs, heads, e // heads) if seq_first_out else (bs, s, heads, e // heads), np.nan, np.float32)
    if bound:
        run = ATTENTION.prepare(ins, [y], attrs, tiling, ws, [False, True, True, False])
        run()
        y[...] = np.nan
        run()
    else:
        ATTENTION.kernel(ins, [y], attrs, tiling, ws)
    want = _reference(x, w, b, mask, heads, nan_guard=guard)
    got = y.transpose(1, 0, 2, 3) if seq_first_out else y
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    if guard:
        assert not np.isnan(got).any() and np.all(got[-1] == 0)


def test_attention_shape_rule_rejects_what_it_cannot_run():
    from aircc.errors import ShapeInferenceError

    def infer(shapes, heads):
        types = [TensorType("float32", s) for s in shapes]
        return op_def("Attention", 1, "aircc").infer(InferContext(types, {"heads": heads}, [None] * len(types), "n", "Attention"))

    assert infer([("B", "S", 8), (8, 24), (24,)], 2)[0].shape == ("B", "S", 2, 4)
    with pytest.raises(ShapeInferenceError, match="3 x 5 heads"):
        infer([("B", "S", 8), (8, 24), (24,)], 5)
    with pytest.raises(ShapeInferenceError, match="features"):
        infer([("B", "S", 7), (8, 24), (24,)], 2)
    with pytest.raises(ShapeInferenceError, match="cannot be broadcast"):
        infer([(2, 3, 8), (8, 24), (24,), (2, 1, 1, 4)], 2)
    seq_first = InferContext([TensorType("float32", s) for s in [("S", "B", 8), (8, 24), (24,), ("S", "S")]],
                             {"heads": 2, "seq_first_in": 1, "seq_first_out": 1}, [None] * 4, "n", "Attention")
    assert op_def("Attention", 1, "aircc").infer(seq_first)[0].shape == ("S", "B", 2, 4)


@pytest.mark.parametrize("offset", [0.0, 80.0])
@pytest.mark.parametrize("mask_shape", [None, (2, 1, 1, 70), (2, 3, 70, 70), (1, 1, 4, 70)])
def test_softmax_matmul_in_log2_units_equals_natural_units(offset, mask_shape):
    """Scores in units of log2 (base2) give the softmax of the same scores in natural
    units: on the main path, when the sums overflow (the shift, offset 80: e^80 * 70
    keys is past the overflow guard), and when the mask is added first (per query and
    key) or the tensor is small (both converted back to natural units)."""
    from aircc.executor.kernels.fused import softmax_matmul

    rng = np.random.default_rng(9)
    q = 4 if mask_shape == (1, 1, 4, 70) else 70
    s = (rng.standard_normal((2, 3, q, 70)) * 2 + offset).astype(np.float32)
    v = rng.standard_normal((2, 3, 70, 5)).astype(np.float32)
    m = None if mask_shape is None else np.where(rng.random(mask_shape) < 0.3, -1e4, 0).astype(np.float32)
    shape = s.shape if m is None else np.broadcast_shapes(s.shape, m.shape)
    natural, log2 = np.empty((2, 3, q, 5), np.float32), np.empty((2, 3, q, 5), np.float32)
    softmax_matmul(s.copy(), m, v, natural, np.empty(shape, np.float32))
    s2 = (s.astype(np.float64) * np.log2(np.e)).astype(np.float32)
    softmax_matmul(s2, m, v, log2, np.empty(shape, np.float32), base2=True)
    np.testing.assert_allclose(log2, natural, rtol=2e-5, atol=2e-5 if offset else 2e-6)
    z = s.astype(np.float64) + (0 if m is None else m)
    p = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(natural, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-4, atol=5e-5)

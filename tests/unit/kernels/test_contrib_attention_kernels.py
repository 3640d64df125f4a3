"""Kernel tests, onnxruntime's attention contrib ops (Attention, MultiHeadAttention,
GroupQueryAttention): our shape rule, tiling and kernel against onnxruntime, for each
mask form, past and present, attention bias, rotary embedding and the packed layouts
(those only its CUDA kernels take: against the unpacked op on its CPU kernel)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from aircc.errors import ShapeInferenceError
from contrib_reference import MS, close, infer_ms, node, ort_run, ours
from kernel_harness import T, check, rand

ORT = dict(engine="ort", domain=MS, opset=17, rtol=1e-4, atol=1e-5)
B, S, H, D = 2, 4, 2, 8


def _mask(form: str, s: int = S, t: int = S):
    """A mask of ``form`` over t keys: 1-D key ends, [2 B] ends and starts, [B, T], [B, S, T]."""
    rng = np.random.default_rng(3)
    if form == "1d":
        return np.array([t - 1, t], np.int32)
    if form == "2b":
        return np.array([t, t - 1, 1, 0], np.int32)
    if form == "2d":
        m = (rng.random((B, t)) > 0.3).astype(np.int32)
        m[:, 0] = 1
        return m
    if form == "3d":
        return (rng.random((B, s, t)) > 0.3).astype(np.int32)
    return None


@pytest.mark.parametrize("mask", [None, "1d", "2b", "2d", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_masks(mask, unidirectional):
    x, w, bias = rand(B, S, 12), rand(12, 3 * H * D), rand(3 * H * D)
    check("Attention", [x, w, bias, _mask(mask)], {"num_heads": H, "unidirectional": unidirectional}, **ORT)


def test_attention_past_bias_scale_and_widths():
    x, w, bias = rand(B, S, 12), rand(12, 3 * H * D), rand(3 * H * D)
    past = rand(2, B, H, 3, D)
    attrs = {"num_heads": H, "unidirectional": 1, "scale": 0.3, "mask_filter_value": -500.0}
    check("Attention", [x, w, bias, _mask("2d", t=3 + S), past], attrs, n_out=2, **ORT)
    check("Attention", [x, w, bias, _mask("1d"), None, rand(B, 1, S, S)], attrs, **ORT)
    check("Attention", [x, w, None], {"num_heads": H}, **ORT)
    sizes = [H * D, H * D, H * 4]           # V narrower than Q and K
    check("Attention", [x, rand(12, sum(sizes)), rand(sum(sizes)), _mask("3d")],
          {"num_heads": H, "qkv_hidden_sizes": sizes}, **ORT)
    types = [T((B, S, 12)), T((12, 48)), T((48,))]
    with pytest.raises(ShapeInferenceError, match="4-D"):
        infer_ms("Attention", types + [T((B, 1, S, S), "int32")], {"num_heads": H})
    with pytest.raises(ShapeInferenceError, match="do_rotary"):       # onnxruntime's CPU kernel refuses it
        infer_ms("Attention", types, {"num_heads": H, "do_rotary": 1})


@pytest.mark.parametrize("mask", [None, "1d", "2d", "3d"])
@pytest.mark.parametrize("past", [False, True])
def test_multi_head_attention(mask, past):
    p = 3 if past else 0
    q, k, v, bias = rand(B, S, H * D), rand(B, S, H * D), rand(B, S, H * D), rand(3 * H * D)
    pk, pv = (rand(B, H, p, D), rand(B, H, p, D)) if past else (None, None)
    attrs = {"num_heads": H, "unidirectional": int(past)}
    inputs = [q, k, v, bias, _mask(mask, t=p + S), rand(B, 1, S, p + S), pk, pv]
    check("MultiHeadAttention", inputs, attrs, n_out=3 if past else 1, **ORT)


def test_multi_head_attention_cross_layouts_and_scores():
    q, k, v, bias = rand(B, S, H * D), rand(B, 5, H * D), rand(B, 5, H * D), rand(3 * H * D)
    attrs = {"num_heads": H, "scale": 0.5}
    for extra in ({}, {"unidirectional": 1}):       # the scores output: hidden keys the lowest float
        want = ort_run([node("MultiHeadAttention", ["x0", "x1", "x2", "x3", "x4"], ["y0", "", "", "y1"], MS,
                             **attrs, **extra)], [q, k, v, bias, _mask("2d", t=5)], n_out=2,
                       out_types={1: onnx.TensorProto.FLOAT})
        close(ours("MultiHeadAttention", [q, k, v, bias, _mask("2d", t=5)], dict(attrs, **extra), n_out=4)[::3],
              want)
    kh, vh = (np.ascontiguousarray(a.reshape(B, 5, H, D).transpose(0, 2, 1, 3)) for a in (k, v))
    check("MultiHeadAttention", [q, kh, vh, bias], attrs, **ORT)          # keys per head: no K, V bias
    packed_kv = np.ascontiguousarray(np.stack([kh, vh], 3).transpose(0, 2, 1, 3, 4))  # [B, L, H, 2, D]
    close(ours("MultiHeadAttention", [q, packed_kv], attrs),
          ort_run([node("MultiHeadAttention", ["x0", "x1", "x2"], ["y0"], MS, **attrs)], [q, k, v]))
    qkv = [rand(B, S, H, D) for _ in range(3)]
    packed = np.ascontiguousarray(np.stack(qkv, 3))                      # [B, S, H, 3, D]
    close(ours("MultiHeadAttention", [packed, None, None, bias], attrs),
          ort_run([node("MultiHeadAttention", ["x0", "x1", "x2", "x3"], ["y0"], MS, **attrs)],
                  [a.reshape(B, S, H * D) for a in qkv] + [bias]))


KVH = 1
GQA_D = 16


def _gqa_inputs(s, p, seqlens, total, packed=False, rotary=False, position_ids=None, bias=False, sink=False):
    q = rand(B, s, (H + 2 * KVH) * GQA_D if packed else H * GQA_D)
    k, v = (None, None) if packed else (rand(B, s, KVH * GQA_D), rand(B, s, KVH * GQA_D))
    past = [rand(B, KVH, p, GQA_D), rand(B, KVH, p, GQA_D)] if p is not None else [None, None]
    cos, sin = (rand(16, 8), rand(16, 8)) if rotary else (None, None)
    return [q, k, v, *past, np.array(seqlens, np.int32), np.array(total, np.int32), cos, sin, position_ids,
            rand(1, H, s, total) if bias else None, rand(H) if sink else None]


@pytest.mark.parametrize("case", [
    dict(s=S, p=None, seqlens=[S - 1, S - 1], total=S),
    dict(s=1, p=5, seqlens=[5, 3], total=6),
    dict(s=1, p=5, seqlens=[5, 5], total=6, attrs={"local_window_size": 2, "softcap": 1.5, "scale": 0.4}),
    dict(s=1, p=5, seqlens=[5, 2], total=6, rotary=True, attrs={"do_rotary": 1}),
    dict(s=1, p=5, seqlens=[4, 5], total=6, rotary=True, attrs={"do_rotary": 1, "rotary_interleaved": 1},
         position_ids=np.array([[9], [2]], np.int64)),
    dict(s=S, p=0, seqlens=[S - 1, S - 1], total=S, rotary=True, attrs={"do_rotary": 1},
         position_ids=np.array([[3, 4, 5, 6]] * B, np.int64)),
    dict(s=1, p=5, seqlens=[5, 5], total=6, bias=True, sink=True),
    dict(s=1, p=5, seqlens=[5, 4], total=6, attrs={"smooth_softmax": 1}),
    dict(s=S, p=None, seqlens=[S - 1, S - 1], total=S, attrs={"causal": 0}),
    dict(s=S, p=None, seqlens=[S - 1, S - 1], total=S, packed=True),
])
def test_group_query_attention(case):
    case = dict(case)
    attrs = {"num_heads": H, "kv_num_heads": KVH, **case.pop("attrs", {})}
    inputs = _gqa_inputs(**case)
    check("GroupQueryAttention", inputs, attrs, n_out=3, **ORT)


def test_group_query_attention_padded_prompt():
    """Right-padded rows of a first prompt: the valid rows match, and the cache (which holds
    the padding rows too, as onnxruntime's does)."""
    inputs = _gqa_inputs(S, None, [S - 1, 1], S)
    attrs = {"num_heads": H, "kv_num_heads": KVH}
    got = ours("GroupQueryAttention", inputs, attrs, n_out=3)
    want = ort_run([node("GroupQueryAttention", [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)],
                         ["y0", "y1", "y2"], MS, **attrs)], inputs, n_out=3)
    close([got[0][0], got[0][1, :2]], [want[0][0], want[0][1, :2]])
    close(got[1:], want[1:])
    (out, present, _) = infer_ms("GroupQueryAttention", [T(a.shape, a.dtype.name) if a is not None else None
                                                         for a in inputs], attrs, n_out=3)
    assert out.shape == (B, S, H * GQA_D) and present.shape[2] != S     # the length is a run-time value's


def _decoding_inputs(beams: int = 1, packed: bool = False):
    b, m, p = 4, 6, 3
    q = rand(b, 1, 3 * H * D if packed else H * D)
    k, v = (None, None) if packed else (rand(b, 1, H * D), rand(b, 1, H * D))
    mask = np.ones((b, p + 1), np.int32)
    mask[1, 0] = 0
    indirection = np.random.default_rng(5).integers(0, beams, (b // beams, beams, m)).astype(np.int32)
    return [q, k, v, mask, rand(b, H, 1, p + 1), rand(b, H, m, D), rand(b, H, m, D), np.array(p, np.int32),
            np.array(beams, np.int32) if beams > 1 else None, indirection if beams > 1 else None, rand(3 * H * D)]


@pytest.mark.parametrize("beams", [1, 2])
def test_decoder_masked_multi_head_attention(beams):
    """A step over the shared buffer (the new key and value written at P), beams picking
    each past position's row (row b reads the attention bias of row b / beams, as
    onnxruntime does), the scores output; and cross-attention over [B, H, L, D]."""
    inputs = _decoding_inputs(beams)
    attrs = {"num_heads": H, "past_present_share_buffer": 1, "output_qk": 1}
    want = ort_run([node("DecoderMaskedMultiHeadAttention", [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)],
                         ["y0", "y1", "y2", "y3"], MS, **attrs)], inputs, n_out=4, out_types={3: onnx.TensorProto.FLOAT})
    close(ours("DecoderMaskedMultiHeadAttention", inputs, attrs, n_out=4), want)
    q, kc, vc = rand(4, 1, H * D), rand(4, H, 5, D), rand(4, H, 5, D)
    check("DecoderMaskedMultiHeadAttention", [q, kc, vc], {"num_heads": H, "scale": 0.4}, **ORT)


def test_decoder_masked_multi_head_attention_packed():
    """Packed QKV [B, 1, 3 D] (onnxruntime's CUDA form) against the same step unpacked."""
    inputs = _decoding_inputs(packed=True)
    attrs = {"num_heads": H, "past_present_share_buffer": 1}
    unpacked = list(inputs)
    unpacked[0], unpacked[1], unpacked[2] = np.split(inputs[0], 3, axis=2)
    want = ort_run([node("DecoderMaskedMultiHeadAttention", [f"x{i}" if a is not None else "" for i, a in enumerate(unpacked)],
                         ["y0", "y1", "y2"], MS, **attrs)], unpacked, n_out=3)
    close(ours("DecoderMaskedMultiHeadAttention", inputs, attrs, n_out=3), want)


def test_group_query_attention_float16():
    inputs = [a.astype(np.float16) if a is not None and a.dtype == np.float32 else a
              for a in _gqa_inputs(1, 5, [5, 3], 6, rotary=True)]
    check("GroupQueryAttention", inputs, {"num_heads": H, "kv_num_heads": KVH, "do_rotary": 1}, n_out=3,
          **dict(ORT, rtol=5e-3, atol=5e-3))

"""Kernel tests, LSTM / GRU / RNN: our shape rule, tiling and kernel against onnx's
ReferenceEvaluator (which implements the default activations only, and ignores
sequence_lens and clip) and against onnxruntime (no layout 1, float32 only: layout 1 is
checked against it through transposed operands, float64 against its float32 result)."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError, UnsupportedVariantError
from aircc.ops import TensorType, kernel_backend
from kernel_harness import TARGET, T, check, infer, one_node_model, rand, reference, run_ours

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": 3, "GRU": 2, "RNN": 2}
DIRECTIONS = ("forward", "reverse", "bidirectional")


def rnn_inputs(op, seq=5, batch=3, inp=4, hidden=6, direction="forward", bias=True, lens=None,
               h0=False, c0=False, peepholes=False, layout=0, dtype=np.float32) -> list:
    """X, W, R and the optional inputs asked for (None where omitted, trailing ones dropped)."""
    g, nd = GATES[op], 2 if direction == "bidirectional" else 1
    state = (batch, nd, hidden) if layout else (nd, batch, hidden)
    ins = [rand(*((batch, seq, inp) if layout else (seq, batch, inp)), dtype=dtype),
           rand(nd, g * hidden, inp, dtype=dtype), rand(nd, g * hidden, hidden, dtype=dtype),
           rand(nd, 2 * g * hidden, dtype=dtype) if bias else None,
           None if lens is None else np.array(lens, np.int32),
           rand(*state, dtype=dtype) if h0 else None]
    if op == "LSTM":
        ins += [rand(*state, dtype=dtype) if c0 else None,
                rand(nd, 3 * hidden, dtype=dtype) if peepholes else None]
    while ins[-1] is None:
        ins.pop()
    return ins


def cast(ins: list, dtype) -> list:
    """The float inputs as ``dtype`` (sequence_lens and omitted inputs as they are)."""
    return [a if a is None or a.dtype.kind != "f" else a.astype(dtype) for a in ins]


def ort_batch_first(op, ins, attrs, n_out):
    """onnxruntime's result for a layout-1 node: the layout-0 node on transposed operands,
    its outputs transposed back."""
    ins = [None if a is None else a.transpose(1, 0, 2) if k in (0, 5, 6) else a
           for k, a in enumerate(ins)]
    attrs = {k: v for k, v in attrs.items() if k != "layout"}
    model, _ = one_node_model(op, ins, attrs, 14, n_out)
    outs = reference(model, ins, "ort")
    return [outs[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in outs[1:]]


def compare(op, ins, attrs, *, expected, opset=14, rtol=1e-4, atol=1e-5):
    """Our outputs of ``op`` against ``expected``."""
    types, outs = run_ours(op, ins, attrs, opset, OUTPUTS[op])
    for t, got, exp in zip(types, outs, expected):
        assert t.shape == exp.shape
        np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ onnx's reference
@pytest.mark.parametrize("op", GATES)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("opset", [7, 14])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_default_cells_against_the_reference(op, direction, opset, dtype):
    for bias, h0 in ((True, False), (False, True)):
        ins = rnn_inputs(op, direction=direction, bias=bias, h0=h0, c0=h0, peepholes=h0,
                         dtype=dtype)
        check(op, ins, {"hidden_size": 6, "direction": direction}, opset=opset,
              n_out=OUTPUTS[op], rtol=1e-5, atol=1e-6)
    if op == "GRU":
        check(op, rnn_inputs(op, direction=direction, h0=True, dtype=dtype),
              {"hidden_size": 6, "direction": direction, "linear_before_reset": 1},
              opset=opset, n_out=2, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", GATES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_batch_first_layout_against_the_reference(op, direction):
    ins = rnn_inputs(op, direction=direction, h0=True, c0=True, layout=1)
    check(op, ins, {"hidden_size": 6, "direction": direction, "layout": 1}, opset=14,
          n_out=OUTPUTS[op], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", GATES)
def test_opset_1_computes_what_opset_7_does(op):
    """Opset 1 (``output_sequence``; GRU 3: ``linear_before_reset``) computes the same."""
    ins = rnn_inputs(op, h0=True, direction="bidirectional")
    attrs = {"hidden_size": 6, "direction": "bidirectional"}
    _, seven = run_ours(op, ins, attrs, 7, OUTPUTS[op])
    compare(op, ins, {**attrs, "output_sequence": 1}, opset=1, expected=seven, rtol=0, atol=0)
    if op != "RNN":      # onnx's reference has no RNN before opset 7
        check(op, ins, attrs, opset=1, n_out=OUTPUTS[op], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ onnxruntime
#: (op, input options, attributes) beyond what onnx's reference implements.
ORT_CASES = [
    ("LSTM", {}, {}),
    ("LSTM", {"h0": True, "c0": True, "peepholes": True}, {}),
    ("LSTM", {"lens": [5, 2, 0]}, {}),
    ("LSTM", {"lens": [3, 5, 1], "h0": True, "c0": True, "peepholes": True}, {"clip": 0.3}),
    ("LSTM", {"h0": True, "c0": True}, {"input_forget": 1}),
    ("LSTM", {"peepholes": True, "bias": False}, {"input_forget": 1, "clip": 0.5}),
    ("LSTM", {"h0": True, "peepholes": True},
     {"activations": ["HardSigmoid", "Softsign", "ScaledTanh"], "activation_alpha": [0.3, 1.5],
      "activation_beta": [0.4, 0.7]}),
    ("LSTM", {"c0": True}, {"activations": ["Sigmoid", "Elu", "Softplus"],
                            "activation_alpha": [0.8]}),
    ("GRU", {}, {}),
    ("GRU", {"h0": True, "lens": [4, 1, 5]}, {"linear_before_reset": 1, "clip": 0.4}),
    ("GRU", {"bias": False, "lens": [0, 5, 2]}, {"linear_before_reset": 1}),
    ("GRU", {"h0": True}, {"clip": 0.3}),
    ("GRU", {"h0": True}, {"activations": ["HardSigmoid", "LeakyRelu"],
                           "activation_alpha": [0.3, 0.2], "activation_beta": [0.4]}),
    ("RNN", {}, {}),
    ("RNN", {"h0": True, "lens": [2, 5, 4]}, {"clip": 0.3}),
    ("RNN", {"h0": True}, {"activations": ["Relu"]}),
    ("RNN", {"h0": True}, {"activations": ["ThresholdedRelu"], "activation_alpha": [0.1]}),
    ("RNN", {"h0": True}, {"activations": ["Affine"], "activation_alpha": [0.5],
                           "activation_beta": [0.1]}),
    ("RNN", {"h0": True}, {"activations": ["LeakyRelu"], "activation_alpha": [1.5]}),
]


def _per_direction(attrs: dict, nd: int) -> dict:
    """onnxruntime wants the activation functions (and their values) listed per direction."""
    if nd == 1 or "activations" not in attrs:
        return attrs
    return {k: (v * nd if k.startswith("activation") else v) for k, v in attrs.items()}


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op, options, attrs", ORT_CASES,
                         ids=[f"{op}-{i}" for i, (op, _, _) in enumerate(ORT_CASES)])
def test_against_onnxruntime(op, options, attrs, direction):
    nd = 2 if direction == "bidirectional" else 1
    attrs = _per_direction({"hidden_size": 6, "direction": direction, **attrs}, nd)
    check(op, rnn_inputs(op, direction=direction, **options), attrs, opset=14,
          n_out=OUTPUTS[op], engine="ort", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op, acts", [
    ("LSTM", ["Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Relu", "Softsign"]),
    ("GRU", ["Sigmoid", "Tanh", "Sigmoid", "Relu"]),
    ("RNN", ["Tanh", "Relu"])])
def test_directions_with_their_own_activations_against_onnxruntime(op, acts):
    attrs = {"hidden_size": 6, "direction": "bidirectional", "activations": acts}
    for options in ({"h0": True}, {"lens": [2, 5, 4], "peepholes": True}):
        check(op, rnn_inputs(op, direction="bidirectional", **options), attrs, opset=14,
              n_out=OUTPUTS[op], engine="ort", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", GATES)
@pytest.mark.parametrize("batch, hidden, seq", [(1, 1, 1), (1, 16, 7), (5, 3, 4), (4, 33, 6)])
def test_sizes_against_onnxruntime(op, batch, hidden, seq):
    lens = [seq] + [max(0, seq - 2 - k) for k in range(batch - 1)]
    for options in ({}, {"lens": lens, "h0": True}):
        check(op, rnn_inputs(op, seq=seq, batch=batch, hidden=hidden, direction="bidirectional",
                             **options),
              {"hidden_size": hidden, "direction": "bidirectional"}, opset=14,
              n_out=OUTPUTS[op], engine="ort", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op, lbr", [("LSTM", 0), ("GRU", 0), ("GRU", 1), ("RNN", 0)])
def test_products_in_row_blocks_against_onnxruntime(op, lbr):
    """A hidden size whose recurrence weights the kernel multiplies block by block."""
    from aircc.executor.kernels.rnn import block_rows
    assert block_rows(4 * 256, 256, 8, 4) == 256 and block_rows(3 * 256, 256, 8, 4) == 256
    assert block_rows(4 * 256, 256, 32, 4) == 1024
    attrs = {"hidden_size": 256, "direction": "bidirectional", "linear_before_reset": lbr}
    if op != "GRU":
        del attrs["linear_before_reset"]
    ins = rnn_inputs(op, seq=3, batch=8, inp=16, hidden=256, direction="bidirectional",
                     lens=[3, 1, 2, 3, 0, 3, 2, 1], h0=True)
    ins[2] /= 16                          # weights of the scale 1/sqrt(hidden) models have
    check(op, ins, attrs, opset=14, n_out=OUTPUTS[op], engine="ort", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", GATES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_batch_first_against_onnxruntime(op, direction):
    attrs = {"hidden_size": 6, "direction": direction, "layout": 1, "clip": 0.6}
    ins = rnn_inputs(op, direction=direction, lens=[5, 3, 0], h0=True, c0=True, layout=1,
                     peepholes=True)
    compare(op, ins, attrs, expected=ort_batch_first(op, ins, attrs, OUTPUTS[op]))


@pytest.mark.parametrize("op", GATES)
def test_float64_against_onnxruntime_float32(op):
    attrs = {"hidden_size": 6, "direction": "bidirectional", "clip": 0.8}
    ins = rnn_inputs(op, direction="bidirectional", lens=[5, 1, 3], h0=True, c0=True,
                     peepholes=True, dtype=np.float64)
    narrow = cast(ins, np.float32)
    model, _ = one_node_model(op, narrow, attrs, 14, OUTPUTS[op])
    types, _ = run_ours(op, ins, attrs, 14, OUTPUTS[op])
    assert all(t.dtype == "float64" for t in types)
    compare(op, ins, attrs, expected=reference(model, narrow, "ort"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", GATES)
def test_float16_computes_in_float32(op):
    attrs = {"hidden_size": 6, "direction": "reverse"}
    ins = rnn_inputs(op, direction="reverse", h0=True, lens=[5, 4, 2], dtype=np.float16)
    wide = cast(ins, np.float32)
    _, expected = run_ours(op, wide, attrs, 14, OUTPUTS[op])
    types, outs = run_ours(op, ins, attrs, 14, OUTPUTS[op])
    assert all(t.dtype == "float16" for t in types)
    for got, exp in zip(outs, expected):
        np.testing.assert_allclose(got.astype(np.float32), exp, rtol=2e-3, atol=2e-3)


# ------------------------------------------------------------------ the kernel's entry points
def test_bound_kernel_without_y_reads_its_operands_on_every_run():
    """Y omitted (outputs ``"", Y_h``), the kernel bound once by ``prepare``: each run reads
    its operands' current values, sequence lengths included."""
    op, attrs = "LSTM", {"hidden_size": 6, "direction": "bidirectional"}
    ins = rnn_inputs(op, direction="bidirectional", lens=[5, 5, 5], h0=True, c0=True)
    impl = kernel_backend("numpy").impl(op, 14)
    ws = np.empty(impl.tile([TensorType.of(a) for a in ins], attrs, TARGET)["workspace"], np.uint8)
    y_h = np.full((2, 3, 6), np.nan, np.float32)
    run = impl.prepare(ins, [None, y_h], attrs, {}, ws, [k in (1, 2) for k in range(len(ins))])
    for lens in ([5, 5, 5], [2, 5, 0]):
        ins[0][...] = rand(*ins[0].shape)
        ins[4][...] = lens
        run()
        _, expected = run_ours(op, ins, attrs, 14, 2)
        np.testing.assert_array_equal(y_h, expected[1])


def test_sequence_lengths_outside_the_sequence_are_refused():
    ins = rnn_inputs("GRU", lens=[5, 6, 1])
    with pytest.raises(ValueError, match=r"sequence_lens \[5, 6, 1\] must lie in \[0, 5\]"):
        run_ours("GRU", ins, {"hidden_size": 6}, 14, 2)


def test_shape_rule():
    x, w, r = T((7, 2, 4)), T((2, 9, 4)), T((2, 9, 3))
    y, y_h = infer("GRU", [x, w, r], {"direction": "bidirectional"}, opset=14, n_out=2)
    assert y.shape == (7, 2, 2, 3) and y_h.shape == (2, 2, 3)
    xb = T((2, 7, 4))
    outs = infer("LSTM", [xb, T((1, 12, 4)), T((1, 12, 3))], {"layout": 1}, opset=14, n_out=3)
    assert [o.shape for o in outs] == [(2, 7, 1, 3), (2, 1, 3), (2, 1, 3)]
    (y,) = infer("RNN", [T(("s", "b", 4)), T((1, 3, 4)), T((1, 3, 3))], {"hidden_size": 3})
    assert y.shape == ("s", 1, "b", 3)


@pytest.mark.parametrize("attrs, inputs, message", [
    ({"direction": "sideways"}, None, "direction must be forward, reverse or bidirectional"),
    ({"activations": ["Sigmoid", "Swish"]}, None, "activation 'Swish' is not one ONNX defines"),
    ({"activations": ["Affine", "Tanh"]}, None, "Affine needs activation_alpha"),
    ({"activations": ["Tanh"]}, None, "must name 2 function(s) per direction"),
    ({"linear_before_reset": 2}, None, "linear_before_reset must be 0 or 1"),
    ({"hidden_size": 5}, None, "W has shape (1, 9, 4), expected (1, 15, 4)"),
    ({}, [T((5, 2, 4)), T((1, 9, 4)), T((1, 9, 3)), None, T((3,), "int32")],
     "sequence_lens has shape (3,), expected (2,)"),
    ({}, [T((5, 2, 4)), T((1, 9, 4)), T((1, 9, 3)), None, T((2,), "int64")],
     "sequence_lens must be int32"),
])
def test_shape_rule_names_what_is_wrong(attrs, inputs, message):
    inputs = inputs or [T((5, 2, 4)), T((1, 9, 4)), T((1, 9, 3))]
    with pytest.raises(ShapeInferenceError) as e:
        infer("GRU", inputs, attrs, opset=14, n_out=2)
    assert message in str(e.value)


def test_bfloat16_is_left_to_the_fallback():
    with pytest.raises(UnsupportedVariantError):
        infer("RNN", [T((5, 2, 4), "bfloat16"), T((1, 3, 4), "bfloat16"),
                      T((1, 3, 3), "bfloat16")], opset=22)

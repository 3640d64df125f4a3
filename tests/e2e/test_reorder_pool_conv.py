"""reorder-pool-conv: an AveragePool and a 1x1 Conv run in the cheaper order, and compute
what they computed before (against onnxruntime, with weights and inputs far from constant)."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from testdata import numpy_target
from graphs import const, model, tensor

RNG = np.random.default_rng(11)


def _check(m, feeds, reordered: int, rtol=1e-4):
    compiled = aircc.compile(m, target=numpy_target())
    assert compiled.report.stats["reordered_pool_convs"] == reordered
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = aircc.load(compiled).run(feeds)
    for g, e in zip(got.values(), expected):
        np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol * np.abs(e).max())
    return compiled


def _pool_then_conv(c, m_out, pool_attrs, bias=True, relu=True, size=9):
    inits = [const("W", RNG.standard_normal((m_out, c, 1, 1)).astype(np.float32))]
    conv_in = ["p", "W"]
    if bias:
        inits.append(const("B", RNG.standard_normal(m_out).astype(np.float32)))
        conv_in.append("B")
    nodes = [helper.make_node("AveragePool", ["x"], ["p"], **pool_attrs),
             helper.make_node("Conv", conv_in, ["c" if relu else "y"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    return model(nodes, [tensor("x", [2, c, size, size])], [tensor("y", ["n", "c", "h", "w"])], inits)


SAME_SIZE = {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("bias,relu", [(True, True), (True, False), (False, True), (False, False)])
def test_inception_pool_projection_convolves_first(count_include_pad, bias, relu):
    """AveragePool(3x3, stride 1) -> Conv 32 -> 8 channels: the Conv goes first and the
    pool reads 8 channels; the bias and the Relu follow the pool, whatever the divisor at
    the borders."""
    m = _pool_then_conv(32, 8, dict(SAME_SIZE, count_include_pad=count_include_pad), bias, relu)
    compiled = _check(m, {"x": RNG.standard_normal((2, 32, 9, 9)).astype(np.float32)}, 1)
    ops = [n.op for n in compiled.graph.nodes]
    assert ops.index("Conv") < ops.index("AveragePool")
    pool = next(n for n in compiled.graph.nodes if n.op == "AveragePool")
    assert compiled.graph.types[pool.inputs[0]].shape == (2, 8, 9, 9)


def test_more_output_channels_keep_the_pool_first():
    """Conv 8 -> 32 after a same-size pool: pooling 8 channels is cheaper, nothing moves."""
    m = _pool_then_conv(8, 32, SAME_SIZE)
    compiled = _check(m, {"x": RNG.standard_normal((2, 8, 9, 9)).astype(np.float32)}, 0)
    ops = [n.op for n in compiled.graph.nodes]
    assert ops.index("AveragePool") < ops.index("Conv")


def _conv_then_pool(c, m_out, pool_attrs, bias=True, size=8, conv_attrs=None, kernel=1):
    inits = [const("W", RNG.standard_normal((m_out, c, kernel, kernel)).astype(np.float32))]
    conv_in = ["x", "W"]
    if bias:
        inits.append(const("B", RNG.standard_normal(m_out).astype(np.float32)))
        conv_in.append("B")
    nodes = [helper.make_node("Conv", conv_in, ["c"], **(conv_attrs or {})),
             helper.make_node("AveragePool", ["c"], ["y"], **pool_attrs)]
    return model(nodes, [tensor("x", [2, c, size, size])], [tensor("y", ["n", "c", "h", "w"])], inits)


HALVING = {"kernel_shape": [2, 2], "strides": [2, 2]}


@pytest.mark.parametrize("bias", [True, False])
def test_densenet_transition_pools_first(bias):
    """Conv 256 -> 128 -> AveragePool(2x2, stride 2): the pool goes first, and the Conv
    (bias kept) runs on a quarter of the positions.  With 32 -> 16 channels the GEMM
    saved is smaller than the pool's extra channels cost: nothing moves."""
    m = _conv_then_pool(256, 128, HALVING, bias)
    compiled = _check(m, {"x": RNG.standard_normal((2, 256, 8, 8)).astype(np.float32)}, 1)
    conv = next(n for n in compiled.graph.nodes if n.op == "Conv")
    assert compiled.graph.types[conv.inputs[0]].shape == (2, 256, 4, 4)
    assert (len(conv.inputs) > 2 and bool(conv.inputs[2])) == bias
    _check(_conv_then_pool(32, 16, HALVING, bias), {"x": RNG.standard_normal((2, 32, 8, 8)).astype(np.float32)}, 0)


def test_a_bias_stays_before_a_pool_that_averages_padding():
    """With count_include_pad and pads the average of the bias is not the bias at the
    borders: a Conv with a bias stays first; without a bias it moves."""
    padded = dict(HALVING, pads=[1, 1, 1, 1], count_include_pad=1)
    x = {"x": RNG.standard_normal((2, 256, 8, 8)).astype(np.float32)}
    _check(_conv_then_pool(256, 128, padded, bias=True), x, 0)
    _check(_conv_then_pool(256, 128, padded, bias=False), x, 1)


def test_only_plain_pointwise_pairs_move():
    """A 3x3 Conv, a strided 1x1 Conv, and a pool result read twice stay as they are."""
    x = {"x": RNG.standard_normal((2, 256, 8, 8)).astype(np.float32)}
    _check(_conv_then_pool(256, 128, HALVING, conv_attrs={"pads": [1, 1, 1, 1]}, kernel=3), x, 0, rtol=1e-3)
    _check(_conv_then_pool(256, 128, HALVING, conv_attrs={"strides": [2, 2]}, size=16),
           {"x": RNG.standard_normal((2, 256, 16, 16)).astype(np.float32)}, 0)
    x = {"x": RNG.standard_normal((2, 32, 8, 8)).astype(np.float32)}
    w = const("W", RNG.standard_normal((8, 32, 1, 1)).astype(np.float32))
    nodes = [helper.make_node("AveragePool", ["x"], ["p"], **SAME_SIZE),
             helper.make_node("Conv", ["p", "W"], ["y"]),
             helper.make_node("Relu", ["p"], ["z"])]
    m = model(nodes, [tensor("x", [2, 32, 8, 8])],
              [tensor("y", ["n", "c", "h", "w"]), tensor("z", ["n", "c", "h", "w"])], [w])
    _check(m, x, 0)

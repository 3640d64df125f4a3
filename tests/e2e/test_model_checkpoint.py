"""A loaded model's weights through aircc.Checkpoint: saved from its device memory as the
.om has them, restored onto another device, and written back into the model (what its
kernels derived from them made again) so that it gives onnxruntime's outputs again."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from aircc.errors import CheckpointError
from aircc.executor.runtime.checkpoint import model_tensors
from graphs import const, model, tensor

MLP = "samples/mlp.onnx"


def conv_net():
    """Two 3x3 convolutions (kernels that prepare their weights at load) and a dense layer."""
    rng = np.random.default_rng(0)
    node = helper.make_node
    return model([node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
                  node("Relu", ["c1"], ["r1"], name="relu1"),
                  node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
                  node("GlobalAveragePool", ["c2"], ["g"], name="gap"),
                  node("Flatten", ["g"], ["f"], name="flatten"),
                  node("MatMul", ["f", "w3"], ["y"], name="fc")],
                 [tensor("x", [2, 8, 24, 24])], [tensor("y", [2, 10])],
                 [const("w1", (rng.standard_normal([16, 8, 3, 3]) * 0.2).astype(np.float32)),
                  const("b1", (rng.standard_normal([16]) * 0.1).astype(np.float32)),
                  const("w2", (rng.standard_normal([16, 16, 3, 3]) * 0.2).astype(np.float32)),
                  const("w3", (rng.standard_normal([16, 10]) * 0.3).astype(np.float32))])


@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("which", ["mlp", "conv"])
def test_weights_saved_from_the_device_restore_a_model_to_onnxruntimes_outputs(which, mode,
                                                                              tmp_path):
    if which == "mlp":
        source, x = MLP, np.load("samples/mlp_input.npy")
        name = "input"
    else:
        source, name = conv_net(), "x"
        x = np.random.default_rng(1).standard_normal([2, 8, 24, 24]).astype(np.float32)
    feeds = {name: x}
    raw = source if isinstance(source, str) else source.SerializeToString()
    reference = ort.InferenceSession(raw).run(None, feeds)[0]
    compiled = aircc.compile(source, input_shapes={name: list(x.shape)}, mode=mode)
    dev, other = aircc.VirtualDevice(256 << 20), aircc.VirtualDevice(256 << 20)
    m = aircc.load(compiled, device=dev)
    try:
        before = next(iter(m.run(feeds).values()))
        np.testing.assert_allclose(before, reference, rtol=1e-4, atol=1e-5)
        ck = aircc.Checkpoint({"model": m.name})
        names = ck.add_model(m, prefix="w/")
        weights = m.engine.om.weights
        assert sorted(names) == sorted(f"w/{n}" for n in model_tensors(m))
        assert all(ck[f"w/{n}"].tobytes() == weights[n].tobytes() for n in model_tensors(m))
        ck.save(tmp_path / "weights.ckpt")

        garbage = aircc.Checkpoint()              # other values, the same names and specs
        for n in names:
            dtype, shape = ck.spec(n)
            garbage.add(n, np.random.default_rng(2).standard_normal(shape).astype(dtype))
        garbage.restore_model(m, prefix="w/")
        spoiled = next(iter(m.run(feeds).values()))
        assert not np.allclose(spoiled, reference, rtol=1e-2, atol=1e-2)

        back = aircc.Checkpoint.load(tmp_path / "weights.ckpt")
        assert back.meta == {"model": m.name}
        assert back.restore_model(m, prefix="w/") == names
        after = next(iter(m.run(feeds).values()))
        assert np.array_equal(after, before)
        on_other = back.restore(other)                                  # new allocations
        assert all(t.device is other and t.numpy().tobytes() == back[n].tobytes()
                   for n, t in on_other.items())
        with pytest.raises(CheckpointError, match="the checkpoint has no tensor for the "
                                                  "model's weights"):
            back.restore_model(m)                     # saved under another prefix
    finally:
        m.close()
        dev.close()
        other.close()

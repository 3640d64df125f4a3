"""Values that stay on the device: one model's output, left in device memory, feeds a
second model with no copy off the device and back (the copy counters show it), through
the Python API and through an onnxruntime-style IOBinding."""
from __future__ import annotations

import gc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import aircc
from aircc.errors import DeviceLostError, InputError
from aircc.executor.device.copies import copy_stats, reset_copy_stats
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.tensor import DeviceTensor
from aircc.formats.om import save_om
from testdata import SAMPLES

X = np.random.default_rng(0).standard_normal((4, 784)).astype(np.float32)


def head_model() -> onnx.ModelProto:
    """What a second model does with the MLP's probabilities: scale, shift, log."""
    g = helper.make_graph(
        [helper.make_node("Mul", ["probs", "k"], ["t"]),
         helper.make_node("Add", ["t", "one"], ["u"]),
         helper.make_node("Log", ["u"], ["score"])], "head",
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["batch", 10])],
        [helper.make_tensor("k", TensorProto.FLOAT, [], [3.0]),
         helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def builds():
    mlp = f"{SAMPLES}/mlp.onnx"
    shapes = {"input": [4, 784]}
    return {"static": (aircc.compile(mlp, mode="static", input_shapes=shapes).om,
                       aircc.compile(head_model(), mode="static",
                                     input_shapes={"probs": [4, 10]}).om),
            "dynamic": (aircc.compile(mlp, mode="dynamic").om,
                        aircc.compile(head_model(), mode="dynamic").om),
            "gears": (aircc.compile(mlp, dynamic_batch=[2, 4]).om,
                      aircc.compile(head_model(), dynamic_batch=[2, 4]).om)}


@pytest.fixture
def dev():
    d = VirtualDevice(128 << 20)
    yield d
    d.close()


def host_copies(stats: dict) -> int:
    """Copies between the host and the device of every kind but the models' own."""
    return sum(stats[d][m]["calls"] for d in ("h2d", "d2h") for m in ("sync", "async"))


@pytest.mark.parametrize("mode", ["static", "dynamic", "gears"])
def test_an_output_left_on_the_device_feeds_the_next_model_without_a_host_copy(builds, dev, mode):
    first_om, second_om = builds[mode]
    with aircc.load(first_om, device=dev) as first, aircc.load(second_om, device=dev) as second:
        want = second.run({"probs": first.run({"input": X})["probs"]})["score"]
        for _ in range(2):                         # a dynamic model's second run is a replay
            reset_copy_stats(dev)
            probs = first.run({"input": X}, device_outputs=True)["probs"]
            assert isinstance(probs, DeviceTensor) and probs.device is dev
            assert probs.shape == (4, 10) and probs.dtype == np.float32
            score = second.run({"probs": probs})["score"]
            stats = copy_stats(dev)
            np.testing.assert_array_equal(score, want)
            model = stats["model"]
            assert model["h2d"] == {"calls": 1, "bytes": X.nbytes}           # the first input
            assert model["d2h"] == {"calls": 1, "bytes": want.nbytes}        # the last output
            assert model["d2d"]["calls"] == 2        # probs into its tensor, then out of it
            assert host_copies(stats) == 0
        np.testing.assert_array_equal(probs.numpy(), first.run({"input": X})["probs"])
        assert copy_stats(dev)["d2h"]["sync"]["calls"] == 1     # numpy(): one copy off


def test_gears_hand_back_the_real_batch_of_a_padded_run_on_the_device(builds, dev):
    with aircc.load(builds["gears"][0], device=dev, pad_to_gear=True) as m:
        probs = m.run({"input": X[:3]}, device_outputs=["probs"])["probs"]
        assert probs.shape == (3, 10)
        np.testing.assert_array_equal(probs.numpy(), m.run({"input": X[:3]})["probs"])


def test_device_tensors_give_their_memory_back_and_the_runs_count_their_copies(builds, dev):
    first_om, _ = builds["static"]
    base = dev.memory.used
    with aircc.load(first_om, device=dev) as m:
        loaded = dev.memory.used
        x = DeviceTensor.from_numpy(X, dev)
        outs = [m.run({"input": x}, device_outputs=True)["probs"] for _ in range(3)]
        assert dev.memory.used > loaded
        reset_copy_stats(dev)
        m.run({"input": X})
        assert copy_stats(dev)["model"]["h2d"] == {"calls": 1, "bytes": X.nbytes}
        assert copy_stats(dev)["model"]["d2h"]["calls"] == 1
        del x, outs
        gc.collect()
        assert dev.memory.used == loaded
    assert dev.memory.used == base


def test_a_wrong_device_value_is_refused_with_what_to_do_and_the_next_run_works(builds, dev):
    first_om, _ = builds["static"]
    other = VirtualDevice(16 << 20, device_id=7)
    try:
        with aircc.load(first_om, device=dev) as m:
            want = m.run({"input": X})["probs"]
            with pytest.raises(InputError, match="tensor on device 7, but the run is on device"):
                m.run({"input": DeviceTensor.from_numpy(X, other)})
            with pytest.raises(InputError, match="must be float32, got a device tensor of float64"):
                m.run({"input": DeviceTensor.from_numpy(X.astype(np.float64), dev)})
            with pytest.raises(InputError, match=r"must have shape \[4, 784\], got a device tensor"):
                m.run({"input": DeviceTensor.from_numpy(X[:2], dev)})
            freed = DeviceTensor.from_numpy(X, dev)
            freed.free()
            with pytest.raises(DeviceLostError, match="was freed"):
                m.run({"input": freed})
            with pytest.raises(InputError, match=r"device_outputs \['nope'\]: the run returns"):
                m.run({"input": X}, device_outputs=["nope"])
            lost = DeviceTensor.from_numpy(X, dev)
            dev.lose("test")
            dev.reset()
            with pytest.raises(DeviceLostError, match="lost its memory contents"):
                m.run({"input": lost})
            np.testing.assert_array_equal(m.run({"input": X})["probs"], want)
    finally:
        other.close()


def test_run_async_returns_device_outputs_too(builds, dev):
    first_om, second_om = builds["static"]
    with aircc.load(first_om, device=dev, contexts=2) as first, \
            aircc.load(second_om, device=dev) as second:
        want = second.run({"probs": first.run({"input": X})["probs"]})["score"]
        futures = [first.run_async({"input": X}, device_outputs=True) for _ in range(4)]
        for f in futures:
            probs = f.result(10)["probs"]
            assert isinstance(probs, DeviceTensor)
            np.testing.assert_array_equal(second.run({"probs": probs})["score"], want)


def test_an_iobinding_keeps_an_output_on_the_device_for_the_next_session(builds, tmp_path):
    first_om, second_om = builds["static"]
    a, b = tmp_path / "a.om", tmp_path / "b.om"
    save_om(first_om, a)
    save_om(second_om, b)
    first, second = aircc.InferenceSession(str(a)), aircc.InferenceSession(str(b))
    dev = first.model.device
    want = second.run(None, {"probs": first.run(None, {"input": X})[0]})[0]
    x = aircc.OrtValue.ortvalue_from_numpy(X, "aircc", dev.id)
    assert x.device_name() == "aircc"
    reset_copy_stats(dev)
    one = first.io_binding()
    one.bind_ortvalue_input("input", x)
    one.bind_output("probs", "aircc")
    first.run_with_iobinding(one)
    probs = one.get_outputs()[0]
    assert probs.device_name() == "aircc" and probs.shape() == [4, 10]
    two = second.io_binding()
    two.bind_ortvalue_input("probs", probs)
    two.bind_output("score")
    second.run_with_iobinding(two)
    np.testing.assert_array_equal(two.copy_outputs_to_cpu()[0], want)
    stats = copy_stats(dev)
    assert stats["model"]["h2d"]["calls"] == 0 and stats["model"]["d2h"]["calls"] == 1
    assert stats["model"]["d2d"]["calls"] == 3       # x in, probs out, probs in
    assert host_copies(stats) == 0
    np.testing.assert_array_equal(probs.numpy(), first.run(None, {"input": X})[0])
    with pytest.raises(InputError, match="device_type 'cuda' is not available"):
        one.bind_output("probs", "cuda")
    first.close()
    second.close()

"""A run's deadline holds: it counts the wait for the model (runs take turns) and every
recovery action and retry between attempts, and it stops the host's own control flow (a
Loop of a huge trip count); a Loop that can never end is refused at load, or stopped at
its deadline."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper

import aircc
from aircc import faults
from aircc.errors import ModelFormatError, RunTimeoutError
from aircc.executor.device.device import VirtualDevice
from graphs import diamond, loop_if_model, model, tensor
from test_runtime_faults import X, branches, reference

pytestmark = pytest.mark.usefixtures("no_faults_left")


def test_the_deadline_counts_the_wait_for_the_model(dev_static):
    m, want = dev_static
    fault = faults.inject("hang", node="mul1", seconds=0.8)
    first = threading.Thread(target=lambda: m.run({"x": X}, timeout=10))
    first.start()
    end = time.monotonic() + 5
    while not fault.fired and time.monotonic() < end:
        time.sleep(0.005)
    t0 = time.monotonic()
    with pytest.raises(RunTimeoutError, match=r"deadline of 0.3 s .*waiting for the model"):
        m.run({"x": X}, timeout=0.3)
    assert time.monotonic() - t0 < 0.9
    first.join(10)
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)


def test_the_deadline_covers_retries(dev_static):
    m, want = dev_static
    m.recovery = aircc.RecoveryPolicy(retries=10)
    faults.inject("hang", node="mul0", seconds=0.1, times=0)    # every attempt takes 0.1 s
    faults.inject("kernel_error", node="sum", times=10)          # and fails
    t0 = time.monotonic()
    with pytest.raises(RunTimeoutError, match=r"deadline of 0.35 s"):
        m.run({"x": X}, timeout=0.35)
    assert time.monotonic() - t0 < 1.05
    faults.clear()
    np.testing.assert_array_equal(m.run({"x": X})["y"], want)


@pytest.fixture
def dev_static():
    dev = VirtualDevice(64 << 20)
    m = aircc.load(branches("static"), device=dev)
    want = m.run({"x": X})["y"]
    np.testing.assert_allclose(want, reference(diamond(), {"x": X})["y"], rtol=1e-6)
    yield m, want
    faults.clear()
    m.close()
    dev.settle(10)
    dev.close()


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_loop_of_a_trillion_trips_stops_at_its_deadline(mode):
    om = aircc.compile(loop_if_model(), mode=mode).om
    feeds = {"M": np.array(10 ** 12, np.int64), "x": np.ones((2, 8), np.float32)}
    with aircc.load(om) as m:
        t0 = time.monotonic()
        with pytest.raises(RunTimeoutError, match="deadline of 0.4 s"):
            m.run(feeds, timeout=0.4)
        assert time.monotonic() - t0 < 1.2
        small = dict(feeds, M=np.array(3, np.int64))
        np.testing.assert_allclose(m.run(small)["y"], reference(loop_if_model(), small)["y"],
                                   rtol=1e-5, atol=1e-6)


def endless_loop():
    """A Loop with no trip count whose condition stays a constant true."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Tanh", ["h_in"], ["h_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), tensor("h_in", [2, 8])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), tensor("h_out", [2, 8])])
    return model([helper.make_node("Loop", ["", "go", "x"], ["y"], body=body, name="forever")],
                 [tensor("x", [2, 8])], [tensor("y", [2, 8])],
                 [helper.make_tensor("go", TensorProto.BOOL, [], [True])])


def test_a_loop_that_can_never_end_is_refused_or_stopped_at_its_deadline():
    dynamic = aircc.compile(endless_loop(), mode="dynamic").om
    with pytest.raises(ModelFormatError, match="node 'forever'.*never end"):
        aircc.load(dynamic)
    static = aircc.compile(endless_loop(), mode="static").om
    with aircc.load(static) as m:
        t0 = time.monotonic()
        with pytest.raises(RunTimeoutError, match="deadline of 0.4 s"):
            m.run({"x": np.ones((2, 8), np.float32)}, timeout=0.4)
        assert time.monotonic() - t0 < 1.2

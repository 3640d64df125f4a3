"""The runtime's faults an audit found, each reproduced: compute units that leaked, a
load-time out-of-memory recovery that crashed, priorities lost while faults are armed or a
profile records, a device loss that crashed the process under a running convolution, a
model bricked by a device loss during a stuck run, raw exceptions from host kernels, and a
recorded run whose memory a release of cached blocks gave away (deadlines:
``test_deadlines.py``).

Every test checks that the error names what went wrong and that the next run is right.
"""
from __future__ import annotations

import copy
import os
import subprocess
import sys
import threading
import time

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import aircc
from aircc import faults
from aircc.errors import DeviceLostError, KernelError, RunTimeoutError, ShapeInferenceError
from aircc.executor.device.device import VirtualDevice
from graphs import const, diamond, loop_if_model, model, tensor

pytestmark = pytest.mark.usefixtures("no_faults_left")

X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


def reference(proto, feeds: dict) -> dict:
    """What onnxruntime makes of ``proto`` (the onnx reference evaluator gets a Loop without
    a condition input wrong)."""
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def branches(mode: str, proto=None, **kw):
    """``proto`` (default: the diamond, three streams) compiled in ``mode`` on streams."""
    return aircc.compile(proto if proto is not None else diamond(**kw), mode=mode,
                         min_branch_bytes=0, split_matrix_branches=True).om


# ---------------------------------------------------------------- compute units
def test_twenty_dynamic_runs_leave_a_one_unit_device_with_one_unit():
    dev = VirtualDevice(16 << 20, compute_units=1)
    try:
        with aircc.load(branches("dynamic"), device=dev, replay=False) as m:
            want = reference(diamond(), {"x": X})["y"]
            for _ in range(20):
                np.testing.assert_allclose(m.run({"x": X})["y"], want, rtol=1e-6)
        assert dev.units.free == 1 and dev.units.count == 1
    finally:
        dev.close()


# ---------------------------------------------------------------- load-time out of memory
def test_a_load_out_of_memory_releases_cached_blocks_and_loads():
    """A dynamic model's cached blocks stand in the way of a second model's load: the
    default policy gives them back and loads again."""
    dyn_om = branches("dynamic", width=4096)
    static_proto = diamond(width=4096, branches=2)
    static_om = aircc.compile(static_proto, mode="static").om
    x = np.linspace(-1, 1, 2 * 4096, dtype=np.float32).reshape(2, 4096)
    probe = VirtualDevice(256 << 20)
    try:
        with aircc.load(static_om, device=probe):
            need = probe.memory.used
        with aircc.load(dyn_om, device=probe, replay=False) as d:
            d.run({"x": x})
            cached, held = probe.memory.cached, probe.memory.used - probe.memory.cached
    finally:
        probe.close()
    assert cached >= need
    dev = VirtualDevice(held + cached + need // 2)       # the second fits only without the cache
    try:
        dyn = aircc.load(dyn_om, device=dev, replay=False)
        dyn.run({"x": x})
        assert dev.memory.cached == cached
        m = aircc.load(static_om, device=dev)
        assert m.recoveries[0]["error"] == "DeviceOutOfMemoryError"
        assert "released the device's cached blocks" in m.recoveries[0]["action"]
        np.testing.assert_allclose(m.run({"x": x})["y"], reference(static_proto, {"x": x})["y"],
                                   rtol=1e-5)
        m.close()
        dyn.close()
    finally:
        dev.close()


# ---------------------------------------------------------------- priorities
@pytest.mark.parametrize("variant", ["plain", "fault armed", "profiling"])
def test_a_high_priority_stream_runs_in_the_middle_of_a_static_walk(variant):
    """A long static walk on a one-unit device gives its unit to a higher-priority stream
    at its next task, whether its run checks for faults or a profile records it."""
    om = aircc.compile(loop_if_model(), mode="static").om
    dev = VirtualDevice(16 << 20, compute_units=1)
    try:
        m = aircc.load(om, device=dev)
        if variant == "fault armed":
            faults.inject("kernel_error", node="no-such-node")     # a checked walk
        elif variant == "profiling":
            m.start_profiling()
        feeds = {"M": np.array(500, np.int64), "x": np.ones((2, 8), np.float32)}
        t0 = time.perf_counter()
        m.run(feeds)
        trips = int(0.6 * 500 / (time.perf_counter() - t0))          # about 0.6 s
        high = dev.create_stream("high")
        for _ in range(4):                  # a walk long enough on a machine busy or not
            feeds["M"] = np.array(min(400_000, trips), np.int64)
            started: list[float] = []
            timer = threading.Timer(0.1, lambda: high.submit(
                lambda: started.append(time.perf_counter())))
            t0 = time.perf_counter()
            timer.start()
            m.run(feeds)
            returned = time.perf_counter()
            timer.join()
            high.synchronize(10)
            if returned - t0 > 0.4:
                break
            trips *= 2
        walk = returned - t0
        assert returned - started[0] > (walk - 0.1) / 2, \
            f"the high-priority task waited for the walk's end ({walk:.2f} s)"
        assert dev.units.stats["preemptions"] >= 1
        m.close()
    finally:
        dev.close()


# ---------------------------------------------------------------- device loss under a kernel
LOSSES = r"""
import sys, time
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import aircc
from aircc import faults
from aircc.executor.device.device import VirtualDevice

C, HW = 64, 56
rng = np.random.default_rng(0)
nodes = [helper.make_node("Relu", ["x"], ["r"], name="stem"),
         helper.make_node("Conv", ["r", "w"], ["c"], name="conv", pads=[1, 1, 1, 1])]
prev = "r"
for k in range(6):                     # a second stream, busy while the first convolves
    nodes.append(helper.make_node("Softmax", [prev], [f"s{k}"], name=f"soft{k}", axis=1))
    prev = f"s{k}"
nodes.append(helper.make_node("Concat", ["c", prev], ["y"], name="cat", axis=1))
w = numpy_helper.from_array((rng.standard_normal((C, C, 3, 3)) * 0.05).astype(np.float32), "w")
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, HW, HW])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2 * C, HW, HW])], [w])
proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
x = rng.standard_normal((1, C, HW, HW)).astype(np.float32)
from onnx.reference import ReferenceEvaluator
want = ReferenceEvaluator(proto).run(None, {"x": x})[0]
for mode in ("static", "dynamic"):
    om = aircc.compile(proto, mode=mode, min_branch_bytes=0, split_matrix_branches=True).om
    dev = VirtualDevice(256 << 20, compute_units=2)
    m = aircc.load(om, device=dev)
    assert len(m.engine.streams) == 2
    np.testing.assert_allclose(m.run({"x": x})["y"], want, rtol=1e-3, atol=1e-3)
    losses, end = 0, time.monotonic() + float(sys.argv[1])
    while losses < int(sys.argv[2]) and time.monotonic() < end:
        faults.inject("device_lost", node=f"soft{losses % 6}")
        np.testing.assert_allclose(m.run({"x": x})["y"], want, rtol=1e-3, atol=1e-3)
        losses += 1
    assert dev.stats["resets"] == losses and dev.kernels.poisonings == losses
    m.close()
    dev.close()
    print(mode, losses)
"""


def test_device_losses_under_a_running_convolution_never_crash_the_process():
    """A loss on one stream while the other is inside a oneDNN convolution, whose scratchpad
    holds pointers: written over under it, the process died (SIGSEGV).  In a subprocess,
    so that a crash fails the test."""
    env = dict(os.environ, AIRCC_WINOGRAD="off", AIR_LOG="error")   # oneDNN's own convolution
    out = subprocess.run([sys.executable, "-c", LOSSES, "5", "150"], capture_output=True,
                         text=True, timeout=180, env=env)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    counts = dict(line.split() for line in out.stdout.split("\n") if line)
    assert int(counts["static"]) >= 20 and int(counts["dynamic"]) >= 20, counts


# ---------------------------------------------------------------- loss during a stuck run
def reshaping_branches():
    """Two streams; the first reshapes by constant shapes (read when its tasks are bound)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="stem"),
             helper.make_node("Mul", ["r", "k0"], ["m0"], name="mul0"),
             helper.make_node("Reshape", ["m0", "s8"], ["f0"], name="flat0"),
             helper.make_node("Tanh", ["f0"], ["t0"], name="tanh0"),
             helper.make_node("Reshape", ["t0", "s24"], ["u0"], name="unflat0"),
             helper.make_node("Mul", ["r", "k1"], ["m1"], name="mul1"),
             helper.make_node("Tanh", ["m1"], ["t1"], name="tanh1"),
             helper.make_node("Add", ["u0", "t1"], ["y"], name="sum")]
    inits = [const("k0", np.full([4], 2.0, np.float32)), const("k1", np.full([4], 3.0, np.float32)),
             const("s8", np.array([8], np.int64)), const("s24", np.array([2, 4], np.int64))]
    return model(nodes, [tensor("x", [2, 4])], [tensor("y", [2, 4])], inits)


def lost_while_stuck(m, dev, timeout: float = 0.5) -> Exception | None:
    """A run whose kernel on stream 1 hangs while the device is lost from outside."""
    faults.inject("hang", node="mul1", seconds=1.0)
    threading.Timer(0.15, lambda: dev.inject_fault("pulled out")).start()
    try:
        m.run({"x": X}, timeout=timeout)
    except Exception as e:                          # what it raises is checked by the caller
        return e
    return None


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_device_lost_during_a_stuck_run_leaves_the_model_runnable(mode):
    om = branches(mode, reshaping_branches())
    want = reference(reshaping_branches(), {"x": X})["y"]
    dev = VirtualDevice(64 << 20)
    try:
        m = aircc.load(om, device=dev, recovery=aircc.RecoveryPolicy(device_lost="fail"))
        np.testing.assert_allclose(m.run({"x": X})["y"], want, rtol=1e-6)
        error = lost_while_stuck(m, dev)
        assert isinstance(error, (DeviceLostError, RunTimeoutError)), repr(error)
        with pytest.raises(DeviceLostError, match="reset it"):
            m.run({"x": X})                         # until someone resets the device
        dev.reset()
        np.testing.assert_allclose(m.run({"x": X})["y"], want, rtol=1e-6)
        m.close()
        assert dev.settle(10)
        m = aircc.load(om, device=dev)              # the default policy: reset and run again
        for _ in range(3):
            error = lost_while_stuck(m, dev)
            assert error is None or isinstance(error, (DeviceLostError, RunTimeoutError)), repr(error)
            np.testing.assert_allclose(m.run({"x": X})["y"], want, rtol=1e-6)
        m.close()
        assert dev.settle(10) and dev.memory.used == 0
    finally:
        faults.clear()
        dev.close()


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_hangs_and_losses_mixed_end_every_run_right_or_with_a_named_error(mode):
    om = branches(mode, reshaping_branches())
    want = reference(reshaping_branches(), {"x": X})["y"]
    dev = VirtualDevice(64 << 20)
    rng = np.random.default_rng(5)
    outcomes = {"right": 0, "named": 0}
    try:
        m = aircc.load(om, device=dev)
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            if rng.random() < 0.5:
                faults.inject("hang", node=str(rng.choice(["mul0", "mul1", "tanh0"])),
                              seconds=float(rng.uniform(0.05, 0.4)))
            if rng.random() < 0.5:
                threading.Timer(float(rng.uniform(0, 0.3)),
                                lambda: dev.inject_fault("pulled out")).start()
            try:
                got = m.run({"x": X}, timeout=0.25)["y"]
            except (DeviceLostError, RunTimeoutError):
                outcomes["named"] += 1
            else:
                np.testing.assert_allclose(got, want, rtol=1e-6)
                outcomes["right"] += 1
            faults.clear()
        time.sleep(0.35)                            # the last timers have fired
        np.testing.assert_allclose(m.run({"x": X}, timeout=5)["y"], want, rtol=1e-6)
        assert outcomes["right"] >= 3, outcomes
        m.close()
    finally:
        faults.clear()
        dev.close()


# ---------------------------------------------------------------- loss between kernels
class LosesTheDevice:
    """A feed whose conversion loses the device and resets it at once: a loss after the run
    found its device healthy and before its first kernel.  No kernel runs, so the memory
    is written over at once, and the device answers again when the kernels start."""

    def __init__(self, x: np.ndarray, dev: VirtualDevice):
        self.x, self.dev, self.fired = x, dev, False

    def __array__(self, dtype=None, copy=None):
        if not self.fired:
            self.fired = True
            self.dev.inject_fault("pulled out and put back")
            self.dev.reset()
        return self.x


@pytest.mark.parametrize("mode,replay", [("static", True), ("dynamic", True), ("dynamic", False)],
                         ids=["static", "dynamic", "dynamic-no-replay"])
def test_a_run_the_device_was_lost_under_never_returns_its_outputs(mode, replay):
    """Found by the chaos test (``test_chaos.py``): the run read weights written over by the
    loss and returned them as its answer, with no error."""
    om = branches(mode)
    dev = VirtualDevice(64 << 20)
    try:
        m = aircc.load(om, device=dev, replay=replay)
        want = m.run({"x": X})["y"]
        np.testing.assert_allclose(want, reference(diamond(), {"x": X})["y"], rtol=1e-6)
        np.testing.assert_array_equal(m.run({"x": LosesTheDevice(X, dev)})["y"], want)
        assert "was lost while model" in m.recoveries[-1]["message"]
        assert "reset device 0" in m.recoveries[-1]["action"]
        m.close()
        m = aircc.load(om, device=dev, replay=replay,
                       recovery=aircc.RecoveryPolicy(device_lost="fail"))
        with pytest.raises(DeviceLostError, match="pulled out and put back.*not trusted"):
            m.run({"x": LosesTheDevice(X, dev)})
        np.testing.assert_array_equal(m.run({"x": X})["y"], want)   # the device answers
        m.close()
        assert dev.memory.used == 0
    finally:
        dev.close()


# ---------------------------------------------------------------- host kernels
def normalising():
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], name="norm", axis=-1,
                              epsilon=1e-5),
             helper.make_node("Transpose", ["n"], ["t"], name="flip", perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t", "shape"], ["y"], name="flat")]
    inits = [const("g", rng.standard_normal(8).astype(np.float32)), const("b", np.zeros(8, np.float32)),
             const("shape", np.array([0, -1], np.int64))]
    return model(nodes, [tensor("x", ["N", 4, 8])], [tensor("y", ["N", 32])], inits)


def set_attr(node: str, name: str, value):
    return lambda g: next(n for n in g.nodes if n.name == node).attrs.__setitem__(name, value)


@pytest.mark.parametrize("node, tamper, error", [
    ("norm", set_attr("norm", "epsilon", "bogus"), (KernelError, ShapeInferenceError)),
    ("norm", set_attr("norm", "axis", "x"), (KernelError, ShapeInferenceError)),
    ("flip", set_attr("flip", "perm", "abc"), (KernelError, ShapeInferenceError)),
    ("flip", set_attr("flip", "perm", [None, 1, 2]), (KernelError, ShapeInferenceError)),
    ("flat", lambda g: setattr(next(n for n in g.nodes if n.name == "flat"), "inputs",
                               next(n for n in g.nodes if n.name == "flat").inputs[:1]),
     ShapeInferenceError),
], ids=["epsilon-string", "axis-string", "perm-string", "perm-none", "input-dropped"])
def test_a_host_kernels_failure_is_an_aircc_error_naming_the_node(node, tamper, error):
    """Past the reader (a contract changed in memory): InferShape, Tiling and the kernels of
    the dynamic path raise aircc errors naming the node and its op, never raw exceptions."""
    om = aircc.compile(normalising(), mode="dynamic").om
    x = np.random.default_rng(1).standard_normal((2, 4, 8)).astype(np.float32)
    for cores in (1, 3):
        bad = aircc.formats.OmFile(om.mode, om.sections, om.weights)
        bad.contract = copy.deepcopy(om.parsed())
        tamper(bad.contract.exec_graph)
        with aircc.load(bad, runtime_core_number=cores) as m:
            with pytest.raises(error, match=rf"node '{node}'"):
                m.run({"x": x})
    with aircc.load(om) as m:                       # the untouched model runs right
        np.testing.assert_allclose(m.run({"x": x})["y"], reference(normalising(), {"x": x})["y"],
                                   rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- recorded runs' memory
def test_a_release_of_cached_blocks_leaves_a_recorded_runs_memory_to_it():
    """A dynamic model's recorded run keeps its blocks in a pool of its own: the device's
    ``release_cached()`` must not give them to anyone else while the recording may replay."""
    dev = VirtualDevice(64 << 20)
    try:
        m = aircc.load(branches("dynamic", width=4096), device=dev)
        x = np.linspace(-1, 1, 2 * 4096, dtype=np.float32).reshape(2, 4096)
        want = m.run({"x": x})["y"]
        np.testing.assert_array_equal(m.run({"x": x})["y"], want)
        assert m.run_stats().replays == 1
        dev.release_cached()
        assert dev.memory.cached == 0               # the recording's blocks count as in use
        other = dev.memory.malloc(dev.memory.largest_free_block())
        region = dev.memory.data[other:other + dev.memory.size_of(other)]
        region[:] = 7
        np.testing.assert_array_equal(m.run({"x": x})["y"], want)
        assert m.run_stats().replays == 2
        assert (region == 7).all(), "the replay wrote into memory another owner holds"
        dev.memory.free(other)
        m.close()
        dev.release_cached()
        assert dev.memory.used == 0
    finally:
        dev.close()

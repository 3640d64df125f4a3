"""Kernels bound once on the device: the device binds through ``prepare`` only when the
operands stay, and a static model's bound tasks run again and again."""
from __future__ import annotations

import numpy as np
from onnx import helper

import aircc
from aircc.executor.device.device import VirtualDevice
from aircc.ops import KernelImpl, kernel_backend
from graphs import const, model, tensor

RNG = np.random.default_rng(5)


def _r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_device_binds_through_prepare_only_when_told_the_operands_stay():
    dev = VirtualDevice(1 << 20)
    impl = kernel_backend("numpy").impl("Gelu", 20)
    x, y = _r(8), np.empty(8, np.float32)
    seen = []

    def spy(*args, **kwargs):
        seen.append(args[-1])
        return impl.prepare(*args, **kwargs)

    probe = KernelImpl("Gelu", 20, "", impl.kernel, impl.tiling, spy)
    try:
        dev.engine_call(probe, "vector", [x], [y], {}, {}, np.empty(64, np.uint8))()
        assert seen == []                                   # a one-off launch: the plain kernel
        dev.engine_call(probe, "vector", [x], [y], {}, {}, np.empty(64, np.uint8), [False])()
        assert seen == [[False]]
    finally:
        dev.close()
    np.testing.assert_allclose(y, _r_gelu(x), rtol=1e-6, atol=1e-7)


def _r_gelu(x):
    from math import erf, sqrt
    return np.array([v * 0.5 * (1 + erf(v / sqrt(2))) for v in x.astype(np.float64)])


def test_static_tasks_bound_through_prepare_run_again_and_again(device):
    """A bound kernel's result is not a task's return value (a task's return is a jump): a
    Mul, whose bound call is the bare ufunc returning its output, runs in a static program
    twice."""
    w = _r(3, 8)
    m = model([helper.make_node("Mul", ["x", "W"], ["y"])], [tensor("x", [3, 8])],
              [tensor("y", [3, 8])], [const("W", w)])
    loaded = aircc.load(aircc.compile(m, mode="static"), device=device)
    x = _r(3, 8)
    for _ in range(2):
        np.testing.assert_allclose(loaded.run({"x": x})["y"], x * w, rtol=1e-6)

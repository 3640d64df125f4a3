"""Kernels bound once (a kernel's ``prepare``): static tasks and replayed launches run them.

A bound kernel must compute what the plain kernel computes, run after run, read
its non-constant operands afresh every run (only weights may be worked out
ahead), and decline (None) the uses it does not cover, which then run the plain
kernel."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.ops import KernelImpl, TensorType
from kernel_harness import BACKEND, TARGET


def _impl(op: str, version: int = 20, domain: str = "") -> KernelImpl:
    return BACKEND.impl(op, version, domain)


def _blank(shape, dtype) -> np.ndarray:
    out = np.empty(shape, dtype)
    out[...] = np.nan if np.dtype(dtype).kind == "f" else 0
    return out


def _both(op, ins, out_shapes, attrs, constant, version=20, dtype=np.float32):
    """(plain kernel's outputs, bound kernel's outputs) on inputs that changed in place
    after the kernel was bound and run once: a bound kernel that kept a copy of an
    activation (say, a numpy scalar instead of a view) answers the first run's values."""
    impl = _impl(op, version)
    types = [None if a is None else TensorType.of(a) for a in ins]
    tiling = impl.tile(types, attrs, TARGET)
    ws = np.empty(tiling.get("workspace", 0), np.uint8) if tiling.get("workspace") else None
    bound = [_blank(s, dtype) for s in out_shapes]
    run = impl.prepare(ins, bound, attrs, tiling, ws, constant)
    assert run is not None, f"{op} declined a use it covers"
    run()
    for a, c in zip(ins, constant):      # the next run's activations, where the first's lay
        if a is not None and not c and a.size > 1:
            a[...] = np.roll(a.copy(), 1)
        elif a is not None and not c and a.dtype.kind == "f":
            a[...] = a * 2 + 1
    for b in bound:
        b[...] = _blank(b.shape, b.dtype)
    run()
    plain = [np.empty(s, dtype) for s in out_shapes]
    impl.kernel(ins, plain, attrs, tiling, ws)
    return plain, bound


rng = np.random.default_rng(5)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("case", ["plain", "no_bias", "fused_add", "fused_add_broadcast", "axis1", "big"])
@pytest.mark.parametrize("constant", [True, False])
def test_layernorm_bound_equals_plain(case, constant):
    x, g, b = _r(2, 5, 8), _r(8), _r(8)
    attrs, ins = {"axis": -1, "epsilon": 1e-5}, [x, g, b]
    if case == "no_bias":
        ins = [x, g]
    elif case == "fused_add":
        attrs["fused_add"], ins = 1, [x, g, b, _r(2, 5, 8)]
    elif case == "fused_add_broadcast":            # the residual is the broadcast side
        attrs["fused_add"], ins = 1, [x, g, b, _r(1, 5, 8)]
    elif case == "axis1":
        x, g, b = _r(2, 5, 8), _r(5, 8), _r(8)
        attrs["axis"], ins = 1, [x, g, b]
    elif case == "big":                            # past the expanded-constant size
        x = _r(300, 64)
        ins = [x, g := _r(64), b := _r(64)]
    flags = [False] + [constant] * (len(ins) - 1)
    if case == "axis1" and not constant:    # b broadcast over 2 dims: only a copy lies flat,
        impl = _impl("LayerNormalization", 17)   # and a copy made at bind misses later values
        ws = np.empty(1 << 16, np.uint8)
        assert impl.prepare(ins, [np.empty(x.shape, np.float32)], attrs, {}, ws, flags) is None
        return
    plain, bound = _both("LayerNormalization", ins, [x.shape], attrs, flags, version=17)
    np.testing.assert_allclose(bound[0], plain[0], rtol=1e-6, atol=1e-6)


def test_layernorm_bound_reads_non_constant_operands_every_run():
    impl = BACKEND.impl("LayerNormalization", 17)
    x, g, b, y = _r(4, 8), _r(8), _r(8), np.empty((4, 8), np.float32)
    tiling = impl.tile([TensorType.of(a) for a in (x, g, b)], {}, TARGET)
    ws = np.empty(tiling["workspace"], np.uint8)
    run = impl.prepare([x, g, b], [y], {}, tiling, ws, [False, False, False])
    run()
    first = y.copy()
    g *= 2
    x += 1                                          # a shift: the normalised x is unchanged
    run()
    np.testing.assert_allclose(y - b, 2 * (first - b), rtol=1e-5, atol=1e-5)


def test_layernorm_declines_what_it_does_not_cover():
    impl = BACKEND.impl("LayerNormalization", 17)
    x, g = _r(4, 8), _r(8)
    tiling = impl.tile([TensorType.of(x), TensorType.of(g)], {}, TARGET)
    ws = np.empty(tiling["workspace"], np.uint8)
    y, mean = np.empty((4, 8), np.float32), np.empty((4, 1), np.float32)
    assert impl.prepare([x, g], [y, mean], {}, tiling, ws, [False, True]) is None   # Mean wanted
    assert impl.prepare([x, g], [y], {}, tiling, None, [False, True]) is None       # no workspace
    x64 = x.astype(np.float64)
    assert impl.prepare([x64, g], [y.astype(np.float64)], {}, {}, ws, [False, True]) is None
    assert impl.tile([TensorType("float32", (2, 2048)), TensorType.of(g)], {}, TARGET) == {}


@pytest.mark.parametrize("attrs, batch", [({}, (3, 4)), ({"fused_add": 1}, (3, 4)),
                                          ({"fused_add": 1, "fused_relu": 1}, (3, 4)),
                                          ({"fused_scale": 0.5, "fused_add": 1}, (6,)),
                                          ({"fused_add": 1}, (300,))])
@pytest.mark.parametrize("constant", [True, False])
def test_matmul_bound_equals_plain(attrs, batch, constant):
    a, w, bias = _r(*batch, 16), _r(16, 8), _r(8)
    ins = [a, w, bias] if attrs.get("fused_add") else [a, w]
    plain, bound = _both("MatMul", ins, [(*batch, 8)], attrs, [False, True, constant][:len(ins)], 13)
    np.testing.assert_allclose(bound[0], plain[0], rtol=1e-6, atol=1e-6)


def test_matmul_bound_with_a_full_shape_residual_and_head_views():
    a, w, res = _r(2, 3, 16), _r(16, 8), _r(2, 3, 8)
    plain, bound = _both("MatMul", [a, w, res], [(2, 3, 8)], {"fused_add": 1}, [False, True, False], 13)
    np.testing.assert_allclose(bound[0], plain[0], rtol=1e-6)
    q, k = _r(2, 5, 3, 4), _r(2, 3, 4, 5)            # perm_a reads Q's heads in place
    plain, bound = _both("MatMul", [q, k], [(2, 3, 5, 5)], {"perm_a": [0, 2, 1, 3]}, [False, False], 13)
    np.testing.assert_allclose(bound[0], plain[0], rtol=1e-6)


@pytest.mark.parametrize("n", [10, 4096, 70000])
def test_gelu_bound_equals_plain(n):
    x = (_r(n) * 3).reshape(-1, 2) if n % 2 == 0 else _r(n) * 3
    plain, bound = _both("Gelu", [x], [x.shape], {}, [False])
    np.testing.assert_array_equal(bound[0], plain[0])


@pytest.mark.parametrize("x_shape, idx, axis", [((1,), np.array(0), 0), ((5,), np.array(-2), 0),
                                                ((4, 3), np.array(1), 1), ((4, 3), np.array([2, 0, 2]), 0),
                                                ((2, 4, 3), np.array([[1, -1], [0, 3]]), 1)])
def test_gather_bound_reads_its_data_afresh(x_shape, idx, axis):
    x = np.arange(1, np.prod(x_shape) + 1, dtype=np.int64).reshape(x_shape)
    out = np.take(x, idx, axis=axis).shape
    for constant in ([False, True], [False, False]):
        plain, bound = _both("Gather", [x.copy(), idx], [out], {"axis": axis}, constant, 13, np.int64)
        np.testing.assert_array_equal(bound[0], plain[0])


def test_gelu_declines_the_tanh_form_and_in_place():
    from kernel_harness import BACKEND

    impl = BACKEND.impl("Gelu", 20)
    x = _r(8)
    ws = np.empty(64, np.uint8)
    assert impl.prepare([x], [np.empty(8, np.float32)], {"approximate": "tanh"}, {}, ws, [False]) is None
    assert impl.prepare([x], [x], {}, {}, ws, [False]) is None


@pytest.mark.parametrize("op, a_shape, b_shape, constant", [("Add", (2, 3, 8), (8,), [False, True]),
                                                             ("Mul", (2, 3, 8), (2, 3, 8), [False, False]),
                                                             ("Sub", (1,), (4, 5), [True, False]),
                                                             ("Greater", (3, 4), (4,), [False, True])])
def test_binary_ops_bound_as_one_ufunc_call(op, a_shape, b_shape, constant):
    a, b = _r(*a_shape), _r(*b_shape)
    out = np.broadcast_shapes(a_shape, b_shape)
    plain, bound = _both(op, [a, b], [out], {}, constant, version=14,
                         dtype=bool if op == "Greater" else np.float32)
    np.testing.assert_array_equal(bound[0], plain[0])


def test_cast_bound_only_where_nothing_can_overflow():
    from aircc.ops import kernel_backend

    impl = kernel_backend("numpy").impl("Cast", 19)
    ids = np.arange(12, dtype=np.int64).reshape(3, 4)
    y = np.empty((3, 4), np.float32)
    run = impl.prepare([ids], [y], {"to": 1}, {}, None, [False])
    run()
    np.testing.assert_array_equal(y, ids.astype(np.float32))
    assert impl.prepare([_r(3)], [np.empty(3, np.int32)], {"to": 6}, {}, None, [False]) is None
    assert impl.prepare([_r(3).astype(np.float64)], [np.empty(3, np.float32)], {"to": 1}, {}, None,
                        [False]) is None

"""The C attention core of the oneDNN backend (attention_core.c) and its softmax step:
where the tiling picks the core, that the core, the C softmax between oneDNN's matmuls
and oneDNN's own four primitives match the numpy kernel on every geometry and mask the op
allows (keys and head sizes off the vector width included), their NaN and -inf rows with
and without the guard, that a .om that chose the core runs the primitives where the
module is missing, and that threads do not change a bit of the result."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from aircc.executor.device import threads
from aircc.executor.kernels.dnnl_backend import attention
from aircc.ops import TensorType, kernel_backend, resolve_target

DNNL_BACKEND = kernel_backend("dnnl")
NUMPY = kernel_backend("numpy")
TARGET = resolve_target("dnnl-avx512" if "avx512" in DNNL_BACKEND.host_vector_class() else "dnnl-avx2")
rng = np.random.default_rng(0)

pytestmark = pytest.mark.skipif(attention.core() is None, reason="the C core is not built here")


def f32(*shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def run(backend, op: str, ins: list, attrs: dict, out_shapes: list, since: int = 1):
    """Outputs and tiling of the attention on ``backend``: tiled, bound once, run."""
    impl = backend.impl(op, since, "aircc")
    tiling = impl.tile([None if x is None else TensorType.of(x) for x in ins], attrs, TARGET)
    ws = np.zeros(max(1, int(tiling.get("workspace", 0))), np.uint8)
    outs = [np.full(s, np.nan, np.float32) for s in out_shapes]
    call = impl.prepare(ins, outs, attrs, tiling, ws, [False] * len(ins), prepared=None)
    if call is None:
        impl.kernel(ins, outs, attrs, tiling, ws)
    else:
        call()
    return outs, tiling


def close(got, want):
    """Equal to float32 rounding, relative to the largest output (scores of a few units
    leave errors of some 1e-6 of the context's scale where the context nearly cancels)."""
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, np.nanmax(np.abs(want))))


def _case(b, s, h, d, mask, seq_in=0, seq_out=0, base2=1, scale=0.3):
    e = h * d
    x = f32(s, b, e) if seq_in else f32(b, s, e)
    shapes = {None: None, "per-key": (b, 1, 1, s), "per-query-and-key": (s, s),
              "per-head": (b, h, s, s), "per-query": (b, 1, s, 1)}
    ins = [x, f32(e, 3 * e) * scale, f32(3 * e)]
    if shapes[mask]:
        ins.append(np.where(f32(*shapes[mask]) > 1.0, -1e4, 0.0).astype(np.float32))
    attrs = {"heads": h, "base2": base2, "seq_first_in": seq_in, "seq_first_out": seq_out}
    out = (s, b, h, d) if seq_out else (b, s, h, d)
    return ins, attrs, out


PATHS = ["core", "c-softmax", "onednn"]


@pytest.fixture
def path(request, monkeypatch):
    """Run the attention through the C core ("core"), oneDNN's matmuls around the C
    softmax ("c-softmax") or oneDNN's four primitives ("onednn")."""
    monkeypatch.setattr(attention, "use_core", lambda *a: request.param == "core")
    if request.param == "onednn":
        monkeypatch.setattr(attention, "c_softmax", lambda: None)
    return request.param


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize("b,s,h,d", [(1, 16, 4, 16), (2, 5, 3, 8), (1, 33, 2, 40), (3, 17, 2, 16),
                                     (1, 1, 1, 4)])
@pytest.mark.parametrize("mask", [None, "per-key", "per-query-and-key", "per-head", "per-query"])
def test_both_paths_match_numpy(path, b, s, h, d, mask):
    ins, attrs, out = _case(b, s, h, d, mask)
    want, _ = run(NUMPY, "Attention", ins, attrs, [out], 1)
    got, tiling = run(DNNL_BACKEND, "Attention", ins, attrs, [out], 1)
    assert tiling["backend"] == "dnnl" and tiling["core"] == (path == "core")
    close(got[0], want[0])


@pytest.mark.parametrize("path", ["core", "c-softmax"], indirect=True)
@pytest.mark.parametrize("seq_in,seq_out", [(1, 1), (0, 1), (1, 0)])
@pytest.mark.parametrize("base2", [0, 1])
def test_the_core_reads_and_writes_every_layout_in_either_unit(path, seq_in, seq_out, base2):
    ins, attrs, out = _case(3, 9, 2, 16, "per-key", seq_in, seq_out, base2)
    want, _ = run(NUMPY, "Attention", ins, attrs, [out], 1)
    got, _ = run(DNNL_BACKEND, "Attention", ins, attrs, [out], 1)
    close(got[0], want[0])


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize("guard", [0, 1])
def test_hidden_rows_and_nans_give_nan_or_with_the_guard_zero(path, guard):
    b, s, h, d = 2, 8, 2, 16
    ins, attrs, out = _case(b, s, h, d, "per-key", base2=0)
    mask = ins[3]
    mask[:] = 0
    mask[1] = -np.inf                      # batch 1: every key hidden
    x = ins[0]
    x[0, 3] = np.nan                       # batch 0: a NaN at position 3
    attrs["nan_guard"] = guard
    got, _ = run(DNNL_BACKEND, "Attention", ins, attrs, [out], 1)
    y = got[0]
    assert np.isnan(y[0]).all()            # every query of batch 0 met the NaN key (with the
    if guard:                              # guard: probabilities 0, but 0 times its NaN value)
        assert (y[1] == 0).all()           # no key seen: 0 V
    else:
        assert np.isnan(y[1]).all()
    want, _ = run(NUMPY, "Attention", ins, attrs, [out], 1)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want[0]))
    mask[1, ..., : s // 2] = 0             # half of batch 1's keys seen again: a finite context
    got, _ = run(DNNL_BACKEND, "Attention", ins, attrs, [out], 1)
    clean = [ins[0].copy(), *ins[1:]]
    clean[0][0] = 0                        # batch 0 without its NaN, for the reference
    want, _ = run(NUMPY, "Attention", clean, {**attrs, "nan_guard": 0}, [out], 1)
    close(got[0][1], want[0][1])


def test_the_tiling_takes_the_core_for_small_heads_only():
    assert attention.use_core(1, 16, 4, 16) and attention.use_core(8, 128, 4, 16)
    assert attention.use_core(1, 64, 4, 64)                 # little work
    assert not attention.use_core(8, 128, 12, 32)           # MiniLM at (8, 128): oneDNN
    assert not attention.use_core(1, 128, 4, 64) and not attention.use_core(4, 64, 4, 64)
    ins, attrs, out = _case(8, 128, 12, 32, "per-key", scale=0.05)
    _, tiling = run(DNNL_BACKEND, "Attention", ins[:1] + ins[1:], attrs, [out], 1)
    assert tiling["core"] is False


def test_a_tiling_that_chose_the_core_runs_the_primitives_where_the_module_is_missing(monkeypatch):
    ins, attrs, out = _case(2, 12, 4, 16, "per-key")
    want, tiling = run(DNNL_BACKEND, "Attention", ins, attrs, [out], 1)
    assert tiling["core"] is True
    calls: list[int] = []
    real = attention._bind

    def primitives(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(attention, "core", lambda: None)
    monkeypatch.setattr(attention, "_bind", primitives)
    got, tiling = run(DNNL_BACKEND, "Attention", ins, attrs, [out], 1)
    assert tiling["core"] is True and calls
    close(got[0], want[0])


@pytest.mark.parametrize("path", ["core", "c-softmax"], indirect=True)
def test_two_threads_give_the_same_bits_as_one(path):
    """In a device worker the core shares its heads (the C softmax its rows) among a team;
    every one is computed the same way whichever thread takes it."""
    if len(threads.available_cpus()) < 2:
        pytest.skip("one CPU")
    b, s, h, d = (4, 64, 8, 16) if path == "core" else (4, 128, 8, 16)
    ins, attrs, out = _case(b, s, h, d, "per-key")
    assert attention.team_size(4.0 * b * h * s * s * d if path == "core" else 8.0 * b * h * s * s) > 1
    parallel = threads.parallel_calls
    results: dict[str, np.ndarray] = {}

    def in_worker():
        threads.mark_device_worker()
        results["team"] = run(DNNL_BACKEND, "Attention", ins, attrs, [out], 1)[0][0]

    th = threading.Thread(target=in_worker)
    th.start()
    th.join(60)
    assert threads.parallel_calls > parallel or threads.usable_cpus() < 2
    results["one"] = run(DNNL_BACKEND, "Attention", ins, attrs, [out], 1)[0][0]   # not a worker
    assert np.array_equal(results["team"], results["one"])

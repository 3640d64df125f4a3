"""Kernel tests, binary, variadic and comparison ops: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from aircc.executor.kernels import binary
from aircc.ops import Trait, op_def
from aircc.ops.defs import binary as binary_defs
from kernel_harness import BACKEND, RNG, T, check, infer, ints, rand

_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("a,b", _SHAPES)
@pytest.mark.parametrize("name,since,result", [(e[0], e[1], e[3]) for e in binary_defs.BINARY])
def test_binary(name, since, result, a, b):
    opset = max(since, 13)
    if name in ("And", "Or", "Xor"):
        x = RNG.integers(0, 2, size=a).astype(bool)
        y = RNG.integers(0, 2, size=b).astype(bool)
    elif name.startswith("Bitwise"):
        x, y = ints(*a, lo=0, hi=100), ints(*b, lo=0, hi=100)
    elif name == "Pow":
        x, y = rand(*a, lo=0.1, hi=3), rand(*b, lo=-2, hi=2)
    elif name == "Mod":
        x, y = ints(*a, lo=-20, hi=20), ints(*b, lo=1, hi=7) * RNG.choice([-1, 1], size=b)
        check(name, [x, y], {"fmod": 1}, opset=opset)
        check(name, [rand(*a, lo=-5, hi=5), rand(*b, lo=0.5, hi=2)], {"fmod": 1}, opset=opset)
    elif name == "PRelu":
        x, y = rand(*a), rand(*b)
        if len(b) > len(a) or (len(a) == 0):
            return  # slope must broadcast to X
    else:
        x, y = rand(*a), rand(*b)
        if result == "bool":  # coarse values so that ties (Equal, *OrEqual) happen
            x, y = np.round(x * 2) / 2, np.round(y * 2) / 2
    check(name, [x, y], opset=opset)


def test_div_int_truncates():
    a = np.array([7, -7, 7, -7, 6, -6, 0], np.int64)
    b = np.array([2, 2, -2, -2, 3, 3, 5], np.int64)
    check("Div", [a, b], opset=13)
    check("Div", [a.astype(np.int32), b.astype(np.int32)], opset=13)
    check("Pow", [rand(3, 4, lo=0.1, hi=2), np.array(2.0, np.float32)], opset=13)
    check("Pow", [rand(3, 4, lo=0.1, hi=2), np.array(0.5, np.float32)], opset=13)
    check("Pow", [rand(3, 4, lo=0.1, hi=2), np.array(3, np.int64)], opset=13)
    check("Pow", [ints(3, 4, lo=0, hi=5), np.array(2, np.int64)], opset=13)
    check("PRelu", [rand(2, 3, 4, 4), rand(3, 1, 1)], opset=9)


@pytest.mark.parametrize("name", ["Sum", "Max", "Min", "Mean"])
def test_variadic(name):
    check(name, [rand(2, 3, 4)], opset=13)
    check(name, [rand(2, 3, 4), rand(3, 1), rand(4)], opset=13)
    check(name, [rand(3, 4), rand(3, 4)], opset=6)


def test_where():
    c = RNG.random((3, 1, 4)) < 0.5
    check("Where", [c, rand(2, 1), rand(3, 2, 4)], opset=9)
    check("Where", [c, ints(4), ints(1)], opset=16)


def test_broadcast_symbolic():
    (t,) = infer("Add", [T(("N", 3, 1)), T((1, "W"))])
    assert t.shape == ("N", 3, "W")
    (t,) = infer("Add", [T(("N", 1)), T(("N", 5))])
    assert t.shape == ("N", 5)
    (t,) = infer("Add", [T(("A",)), T(("B",))])
    assert isinstance(t.shape[0], str) and t.shape[0] not in ("A", "B")
    (t,) = infer("Add", [T(("A",)), T((7,))])
    assert t.shape == (7,)
    (t,) = infer("Equal", [T(("N", 3)), T((3,))])
    assert t == T(("N", 3), "bool")
    with pytest.raises(ShapeInferenceError):
        infer("Add", [T((2, 3)), T((4,))])
    with pytest.raises(ShapeInferenceError):
        infer("Add", [T((2, 3)), T((3,), "int64")])


def test_every_kernel_has_a_definition_of_its_version():
    """The kernel tables and the definitions list the same (op, since) pairs."""
    kernels = {(e[0], e[1]) for e in binary.BINARY}
    kernels |= {(e[0], since) for e in binary.VARIADIC for since in binary.VARIADIC_SINCE}
    kernels |= {("Where", 9)} | set(binary_defs.LEGACY)
    for name, since in kernels:
        d = op_def(name, since)
        assert d.native and d.since == since, (name, since, d.since)
        assert BACKEND.impl(name, since).since == since, (name, since)


_HOST = {"Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Equal", "Less", "Greater",
         "LessOrEqual", "GreaterOrEqual", "And", "Or", "Where"}
_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "Greater",
                "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where"}


@pytest.mark.parametrize("name,since", sorted(
    {(e[0], e[1]) for e in binary_defs.BINARY} | set(binary_defs.LEGACY) | {("Where", 9)}
    | {(n, s) for n, _ in binary_defs.VARIADIC for s, _ in binary_defs.VARIADIC_VERSIONS}))
def test_traits(name, since):
    """ELEMENTWISE from opset 7 for binary ops and from 8 for variadic ones (earlier versions
    align B at an axis), never PRelu (its slope broadcasts one way); HOST_CAPABLE on every
    version of the shape-arithmetic ops."""
    d = op_def(name, since)
    variadic = name in ("Sum", "Max", "Min", "Mean")
    elementwise = (name in _ELEMENTWISE and since >= 7) or (variadic and since >= 8)
    assert d.has(Trait.ELEMENTWISE) == elementwise, (name, since)
    assert d.has(Trait.HOST_CAPABLE) == (name in _HOST), (name, since)
    assert d.engine == "vector" and d.foldable and d.value_inputs == ()


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_bit_shift(direction, dtype):
    a = ints(3, 4, lo=0, hi=200, dtype=dtype)
    check("BitShift", [a, ints(4, lo=0, hi=7, dtype=dtype)], {"direction": direction}, opset=11)
    check("BitShift", [a, np.array([3], dtype)], {"direction": direction}, opset=11)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16])
def test_bit_shift_28_signed_and_out_of_range_counts(direction, dtype):
    """From opset 28 signed types too; a count outside [0, width) gives 0, or -1 for a
    negative value shifted right."""
    width = np.dtype(dtype).itemsize * 8
    a = ints(2, 6, lo=-100 if np.dtype(dtype).kind == "i" else 0, hi=100, dtype=dtype)
    b = np.array([0, 1, 5, width - 1, width, width + 3], dtype)
    check("BitShift", [a, b], {"direction": direction}, opset=28)


def test_bit_shift_refuses_signed_types_before_28_and_bad_directions():
    with pytest.raises(ShapeInferenceError, match="unsigned integer"):
        infer("BitShift", [T((2,), "int32"), T((2,), "int32")], {"direction": "LEFT"}, opset=11)
    with pytest.raises(ShapeInferenceError, match="direction must be"):
        infer("BitShift", [T((2,), "uint8"), T((2,), "uint8")], {"direction": "UP"}, opset=11)

"""Kernel tests, binary, variadic and comparison ops: our shape rule, tiling and kernel against onnx's ReferenceEvaluator."""
from __future__ import annotations

import numpy as np
import pytest
from aircc.errors import ShapeInferenceError
from aircc.executor.kernels import binary  # noqa: E402
from kernel_harness import RNG, T, check, infer, ints, rand

_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("a,b", _SHAPES)
@pytest.mark.parametrize("name,since,result", [(e[0], e[1], e[3]) for e in binary.BINARY])
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

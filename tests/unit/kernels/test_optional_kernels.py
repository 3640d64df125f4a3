"""Optional, OptionalHasElement, OptionalGetElement: their definitions' host run, as the
dynamic runtime calls it, and as the numpy backend's kernel (models: test_sequences)."""
from __future__ import annotations

import numpy as np
import pytest

from aircc.ops import InferContext, TensorType, op_def

from kernel_harness import BACKEND, COVERED, check, run_ours


@pytest.mark.parametrize("opset", [15, 18])
def test_has_element_and_get_element_of_a_tensor(opset):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _, (has,) = run_ours("OptionalHasElement", [x], opset=opset)
    assert has.dtype == bool and has.shape == () and bool(has)
    check("OptionalGetElement", [x], opset=18) if opset == 18 else \
        np.testing.assert_array_equal(run_ours("OptionalGetElement", [x], opset=opset)[1][0], x)


@pytest.mark.parametrize("opset", [15, 18])
def test_run_on_host_values(opset):
    has, get = op_def("OptionalHasElement", opset), op_def("OptionalGetElement", opset)
    seq = [np.ones(2, np.float32), np.zeros(3, np.float32)]
    assert has.run([None], {}, 1)[0].item() is False
    assert has.run([seq], {}, 1)[0].item() is True
    assert get.run([seq], {}, 1)[0] is seq
    with pytest.raises(ValueError, match="empty"):
        get.run([None], {}, 1)
    t = get.infer(InferContext([TensorType("optional:sequence:int64", None)], {}, [None], "n",
                               "OptionalGetElement", 1))
    assert t == [TensorType("sequence:int64", None)]


def test_optional_wraps_its_input_or_is_empty_of_its_type():
    d = op_def("Optional", 15)
    x = np.ones(3, np.float32)
    assert d.run([x], {}, 1)[0] is x and d.run([None], {"type": "float32"}, 1)[0] is None
    ctx = InferContext([None], {"type": "sequence:float32"}, [None], "n", "Optional", 1)
    assert d.infer(ctx) == [TensorType("optional:sequence:float32", None)]
    ctx = InferContext([TensorType("int64", (2,))], {}, [None], "n", "Optional", 1)
    assert d.infer(ctx) == [TensorType("optional:int64", None)]
    impl = BACKEND.impl("Optional", 15)
    assert impl.native
    out = np.zeros(3, np.float32)
    impl.kernel([x], [out], {}, {}, None)       # an optional holding an array, on the device
    np.testing.assert_array_equal(out, x)
    COVERED.add(("Optional", 15))

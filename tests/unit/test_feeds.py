"""A run's feeds checked against the model's inputs."""
from __future__ import annotations

import numpy as np
import pytest

from aircc.errors import InputError
from aircc.executor.runtime.feeds import check_feeds
from aircc.formats.model_section import IOSpec

SPECS = [IOSpec("s", "object", ("N",)), IOSpec("x", "float32", (2,))]


def test_an_empty_array_of_another_type_is_taken_as_the_input_s_type():
    """No element whose type could be wrong: onnx's own empty string tensor comes back
    from numpy as float64."""
    s, x = check_feeds(SPECS, {"s": np.array([]), "x": np.ones(2, np.float32)})
    assert s.dtype == object and s.shape == (0,) and x.dtype == np.float32


def test_a_non_empty_array_of_another_type_is_refused_by_name():
    with pytest.raises(InputError, match="input 'x' must be float32, got float64"):
        check_feeds(SPECS, {"s": np.array(["a"], object), "x": np.ones(2)})

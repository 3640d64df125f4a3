"""Running ONNX backend test cases through aircc.backend, with a reason for each failure."""
from __future__ import annotations

import glob
import os
import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

import aircc.backend as backend

#: Element types outside the plain-tensor suite (bfloat16, float8, float4, int4 and int2
#: tensors are in it: ml_dtypes' numpy dtypes).
EXCLUDED_TYPES = {TensorProto.STRING}

#: Filled by the suite test, printed at the end of the run by conftest.
SUMMARY: dict = {}


def is_plain(model: onnx.ModelProto) -> bool:
    """Tensor inputs and outputs (sequences and optionals of tensors too), default domain,
    no excluded element types."""
    g = model.graph
    for v in [*g.input, *g.output]:
        t = v.type           # a sequence or an optional counts by the tensors it holds
        while t.WhichOneof("value") in ("sequence_type", "optional_type"):
            t = getattr(t, t.WhichOneof("value")).elem_type
        if not t.HasField("tensor_type") or t.tensor_type.elem_type in EXCLUDED_TYPES:
            return False
    return all(n.domain in ("", "ai.onnx") for n in g.node)


def node_cases():
    """Every node case of ``onnx.backend.test``: every domain, every element type, tensor,
    sequence and optional values (:func:`is_plain` tells the plain-tensor ones apart)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return collect_testcases("")


def data_folder_cases(kind: str):
    from onnx.backend.test.loader import load_model_tests

    return load_model_tests(kind=kind)


def _load_pb(pattern: str) -> list[np.ndarray]:
    files = sorted(glob.glob(pattern), key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    return [numpy_helper.to_array(onnx.load_tensor(f)) for f in files]


def folder_data_sets(model_dir: str):
    for ds in sorted(glob.glob(os.path.join(model_dir, "test_data_set_*"))):
        yield _load_pb(os.path.join(ds, "input_*.pb")), _load_pb(os.path.join(ds, "output_*.pb"))


def compare(got, expected, rtol: float, atol: float) -> None:
    if len(got) != len(expected):
        raise AssertionError(f"{len(got)} outputs, expected {len(expected)}")
    for k, (g, e) in enumerate(zip(got, expected)):
        e = backend.as_array(e)
        if g.shape != e.shape or g.dtype != e.dtype:
            raise AssertionError(f"output {k} is {g.dtype}{list(g.shape)}, expected {e.dtype}{list(e.shape)}")
        if e.dtype == object or e.dtype.kind in "biu":
            np.testing.assert_array_equal(g, e, err_msg=f"output {k}")
        else:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {k}")


def run_case(model: onnx.ModelProto, data_sets, rtol: float = 1e-3, atol: float = 1e-7,
             target: str | None = None) -> None:
    """Prepare through the backend (for compile ``target``) and check every data set;
    raises on the first problem."""
    rep = backend.prepare(model, target=target)
    try:
        for inputs, outputs in data_sets:
            compare(rep.run([backend.as_array(x) for x in inputs]), outputs, rtol, atol)
    finally:
        rep.model.close()


def failure_reason(error: BaseException) -> str:
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first[:200]}"

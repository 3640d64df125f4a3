"""Every default-domain op with a native numpy kernel, for every numpy-representable element
type of its main type constraint, through the real pipeline (static and dynamic, the numpy
target and the native one) against onnx's reference (tests/dtype_sweep.py): each (op, type)
passes or is refused at compile time with an UnsupportedOpError naming the op and the type;
nothing fails at run time.  The counts, refusals and skips are printed at the end of the run."""
from __future__ import annotations

import warnings

import dtype_sweep
from testdata import numpy_target


def test_every_native_kernel_runs_or_refuses_every_type(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # the reference's integer x / 0
        result = dtype_sweep.sweep(device, numpy_target())
    text = dtype_sweep.summary(result)
    dtype_sweep.SUMMARY[:] = [text]
    print(text)
    missing = set(result["ops"]) - result["swept_ops"] - set(result["skipped_ops"])
    assert not missing, f"ops with a native kernel neither swept nor skipped: {sorted(missing)}"
    assert result["outcomes"], "the sweep ran nothing"
    failures = [f"{op} {t} {run}: {detail}" for (op, t, run), (outcome, detail)
                in sorted(result["outcomes"].items()) if outcome == "failed"]
    assert not failures, f"{len(failures)} run-time failures:\n" + "\n".join(failures)

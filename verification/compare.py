"""Comparing one value aircc computed with the reference's: errors, NaN/inf, dtype, shape.

A float element agrees when ``|got - want| <= atol + rtol * |want|`` (numpy's
``allclose``); NaNs must sit where the reference has them and infinities must match in
sign.  Integers, bools and strings agree only when equal.  The relative error is taken
over the elements whose reference is not 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Tolerances by float dtype when the user gives none: (rtol, atol).
DEFAULT_TOLERANCES = {"float64": (1e-3, 1e-4), "float32": (1e-3, 1e-4),
                      "float16": (1e-2, 1e-3), "bfloat16": (2e-2, 1e-2)}
#: Narrower floats (float8, float4): a step of their coarse grid.
NARROW_FLOAT_TOLERANCE = (0.25, 0.1)


@dataclass(frozen=True)
class Tolerance:
    """How far a value may be from the reference: exact when both are 0."""

    rtol: float
    atol: float

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0

    def __str__(self) -> str:
        return "exact" if self.exact else f"rtol {self.rtol:g}, atol {self.atol:g}"


EXACT = Tolerance(0.0, 0.0)


def is_float(dtype: np.dtype) -> bool:
    """numpy's floats and ml_dtypes' (bfloat16, float8, float4)."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name.startswith(("bfloat", "float")))


def tolerance_for(dtype: np.dtype | str, rtol: float | None = None,
                  atol: float | None = None) -> Tolerance:
    """The tolerance of a value of ``dtype``: ``rtol`` / ``atol`` where given (floats
    only), else the dtype's default; exact for integers, bools and strings."""
    dtype = np.dtype(dtype)
    if not is_float(dtype):
        return EXACT
    d_rtol, d_atol = DEFAULT_TOLERANCES.get(dtype.name, NARROW_FLOAT_TOLERANCE)
    return Tolerance(d_rtol if rtol is None else rtol, d_atol if atol is None else atol)


@dataclass(frozen=True)
class ValueCheck:
    """One value of aircc against the reference's."""

    name: str
    dtype: str
    """The reference's dtype (``sequence:<dtype>`` for a sequence, ``none`` for an empty
    optional)."""
    shape: list[int] | None
    """The reference's shape (None: not a tensor)."""
    tolerance: Tolerance
    max_abs: float = 0.0
    """Largest ``|aircc - reference|`` over the finite elements (0: none differ)."""
    max_rel: float = 0.0
    """Largest ``|aircc - reference| / |reference|`` over those whose reference is not 0."""
    mismatched: int = 0
    """Elements outside the tolerance (NaN/inf ones included)."""
    nan_inf_mismatched: int = 0
    """Elements where aircc and the reference disagree on NaN or on an infinity."""
    elements: int = 0
    problem: str | None = None
    """A mismatch of kind rather than of values: dtype, shape, missing value."""

    @property
    def passed(self) -> bool:
        return self.problem is None and self.mismatched == 0


def _kind(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return "sequence:" + (value[0].dtype.name if value else "?")
    return np.asarray(value).dtype.name


def compare_values(name: str, got, want, rtol: float | None = None,
                   atol: float | None = None) -> ValueCheck:
    """``got`` (aircc's) against ``want`` (the reference's): a tensor, a sequence of
    tensors (element by element) or None (an empty optional)."""
    if isinstance(want, list) or isinstance(got, list):
        return _compare_sequences(name, got, want, rtol, atol)
    if want is None or got is None:
        tol = EXACT
        problem = None if got is None and want is None else \
            f"aircc gives {_kind(got)}, the reference {_kind(want)}"
        return ValueCheck(name, _kind(want), None, tol, problem=problem)
    want, got = np.asarray(want), np.asarray(got)
    tol = tolerance_for(want.dtype, rtol, atol)
    base = dict(name=name, dtype=want.dtype.name, shape=list(want.shape), tolerance=tol,
                elements=int(want.size))
    if got.dtype != want.dtype:
        return ValueCheck(**base, problem=f"dtype: aircc gives {got.dtype.name}, the "
                                          f"reference {want.dtype.name}")
    if got.shape != want.shape:
        return ValueCheck(**base, problem=f"shape: aircc gives {list(got.shape)}, the "
                                          f"reference {list(want.shape)}")
    if not is_float(want.dtype):
        if want.dtype == object:
            equal = np.array([g == w for g, w in zip(got.reshape(-1), want.reshape(-1))], bool)
        else:
            equal = got == want
        wrong = int(equal.size - np.count_nonzero(equal))
        figures = {}
        if wrong and want.dtype.kind in "iub":
            figures = _float_errors(got.astype(np.float64), want.astype(np.float64), EXACT)
        return ValueCheck(**base, max_abs=figures.get("max_abs", 0.0),
                          max_rel=figures.get("max_rel", 0.0), mismatched=wrong)
    return ValueCheck(**base, **_float_errors(got.astype(np.float64), want.astype(np.float64), tol))


def _float_errors(got: np.ndarray, want: np.ndarray, tol: Tolerance) -> dict:
    """max_abs, max_rel, mismatched and nan_inf_mismatched of two float arrays."""
    finite = np.isfinite(want) & np.isfinite(got)
    same_special = ((np.isnan(want) & np.isnan(got))
                    | (np.isinf(want) & np.isinf(got) & (np.sign(want) == np.sign(got))))
    special_wrong = int(np.count_nonzero(~finite & ~same_special))
    diff = np.abs(got - want, where=finite, out=np.zeros_like(want))
    scale = np.abs(want)
    outside = finite & (diff > tol.atol + tol.rtol * scale)
    nonzero = finite & (scale > 0)
    rel = np.divide(diff, scale, where=nonzero, out=np.zeros_like(want))
    return {"max_abs": float(diff.max(initial=0.0)), "max_rel": float(rel.max(initial=0.0)),
            "mismatched": int(np.count_nonzero(outside)) + special_wrong,
            "nan_inf_mismatched": special_wrong}


def _compare_sequences(name: str, got, want, rtol: float | None,
                       atol: float | None) -> ValueCheck:
    """Two sequences: the same length, each element within its tolerance."""
    kind = _kind(want)
    if not (isinstance(got, list) and isinstance(want, list)):
        return ValueCheck(name, kind, None, EXACT,
                          problem=f"aircc gives {_kind(got)}, the reference {kind}")
    if len(got) != len(want):
        return ValueCheck(name, kind, None, EXACT, problem=f"aircc gives a sequence of {len(got)}, "
                                                           f"the reference of {len(want)}")
    parts = [compare_values(f"{name}[{k}]", g, w, rtol, atol)
             for k, (g, w) in enumerate(zip(got, want))]
    problems = [p.problem for p in parts if p.problem]
    tol = parts[0].tolerance if parts else EXACT
    return ValueCheck(name, kind, None, tol, max_abs=max((p.max_abs for p in parts), default=0.0),
                      max_rel=max((p.max_rel for p in parts), default=0.0),
                      mismatched=sum(p.mismatched for p in parts),
                      nan_inf_mismatched=sum(p.nan_inf_mismatched for p in parts),
                      elements=sum(p.elements for p in parts),
                      problem=problems[0] if problems else None)

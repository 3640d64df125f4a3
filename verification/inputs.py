"""The feeds a verification runs on: the ones given, and the others generated.

Generated inputs come from one generator seeded with the verification's seed, input by
input in the model's order: floats (float16/32/64, bfloat16, float8...) from the
standard normal N(0, 1), integers uniform in [0, 10) (safe as token ids and indices),
bools true or false with equal odds, strings the digits '0'-'9'.

A symbolic dim takes, in this order: the size ``input_shapes`` gives for that input
(``--input-shape``), the size a given feed shows for the same symbol, else a default:
1 for a batch-like dim (the first dim of an input, or a symbol whose name says batch:
``batch``, ``batch_size``, ``N``, ``B``...), 8 for any other (sequence lengths, sizes).
One symbol takes one size across all inputs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from aircc.compiler.frontend.model_metadata import declared_shape
from aircc.compiler.frontend.onnx_import import value_dtype_of
from aircc.errors import InputError
from aircc.ops.types import value_kind

#: The size of a batch-like symbolic dim, and of any other, when nothing else says.
BATCH_SIZE, OTHER_SIZE = 1, 8
#: Names of symbols taken for a batch (besides any name containing ``batch``).
BATCH_NAMES = ("n", "b", "bs", "batch", "batch_size", "batchsize", "unk__batch")
#: The range generated integers are drawn from, [low, high).
INT_RANGE = (0, 10)


@dataclass(frozen=True)
class InputSpec:
    """An input of the ONNX model: its name, aircc dtype (``float32``,
    ``sequence:float32``...) and declared shape (ints, symbol names, None for an unnamed
    dim; None: no shape declared)."""

    name: str
    dtype: str
    shape: tuple[int | str | None, ...] | None


@dataclass(frozen=True)
class FeedInfo:
    """What one input was fed: its dtype and shape, and whether it was ``given`` or
    ``generated``."""

    name: str
    dtype: str
    shape: list[int] | None
    source: str


def model_inputs(model: onnx.ModelProto) -> list[InputSpec]:
    """The model's inputs (without the initializers an old model lists among them)."""
    weights = {t.name for t in model.graph.initializer}
    return [InputSpec(i.name, value_dtype_of(i.type, i.name),
                      None if (s := declared_shape(i)) is None else tuple(s))
            for i in model.graph.input if i.name not in weights]


def is_batch_like(symbol: str | None, position: int) -> bool:
    """A dim taken for a batch: the first of an input, or named so."""
    name = (symbol or "").lower()
    return position == 0 or name in BATCH_NAMES or "batch" in name


def make_feeds(specs: list[InputSpec], given: dict | None, seed: int,
               input_shapes: dict[str, list[int]] | None = None) -> tuple[dict, list[FeedInfo]]:
    """The feeds of a run: ``given`` (by input name) and the rest generated from ``seed``
    (see the module doc); also what was fed."""
    given = dict(given or {})
    input_shapes = {k: list(v) for k, v in (input_shapes or {}).items()}
    names = [s.name for s in specs]
    for label, keys in (("feeds", given), ("input_shapes", input_shapes)):
        unknown = sorted(set(keys) - set(names))
        if unknown:
            raise InputError(f"{label}: the model has no input {unknown[0]!r}; its inputs "
                             f"are {names}")
    symbols = _known_symbols(specs, given, input_shapes)
    rng = np.random.default_rng(seed)
    feeds, infos = {}, []
    for spec in specs:
        if spec.name in given:
            value = given[spec.name]
            feeds[spec.name] = value
            infos.append(FeedInfo(spec.name, _dtype_of(value, spec.dtype),
                                  list(np.shape(value)) if isinstance(value, np.ndarray) else None,
                                  "given"))
            continue
        if value_kind(spec.dtype) != "tensor":
            raise InputError(f"input '{spec.name}' is a {spec.dtype}: inputs of that kind are "
                             f"not generated; give its value (--input FILE.npz, keys "
                             f"{spec.name}/0, {spec.name}/1, ...)")
        shape = input_shapes.get(spec.name) or _shape(spec, symbols)
        _check_shape(spec, shape)
        feeds[spec.name] = generate(rng, spec.dtype, shape)
        infos.append(FeedInfo(spec.name, spec.dtype, list(shape), "generated"))
    return feeds, infos


def generate(rng: np.random.Generator, dtype: str, shape: list[int]) -> np.ndarray:
    """One generated input (see the module doc)."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt == object:
        return rng.integers(0, 10, shape).astype(str).astype(object)
    if dt.kind in "iu":
        return rng.integers(*INT_RANGE, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def _dtype_of(value, declared: str) -> str:
    return value.dtype.name if isinstance(value, np.ndarray) else declared


def _known_symbols(specs: list[InputSpec], given: dict,
                   input_shapes: dict[str, list[int]]) -> dict[str, int]:
    """Sizes of the symbols that given feeds or ``input_shapes`` fix."""
    sizes: dict[str, int] = {}
    for spec in specs:
        shape = input_shapes.get(spec.name)
        if shape is None and isinstance(given.get(spec.name), np.ndarray):
            shape = list(given[spec.name].shape)
        if shape is None or spec.shape is None or len(shape) != len(spec.shape):
            continue
        for d, n in zip(spec.shape, shape):
            if isinstance(d, str) and isinstance(n, int):
                sizes.setdefault(d, n)
    return sizes


def _shape(spec: InputSpec, symbols: dict[str, int]) -> list[int]:
    """A generated input's shape: the declared one, its symbols sized (module doc)."""
    if spec.shape is None:
        raise InputError(f"input '{spec.name}' declares no shape; give its shape "
                         f"(--input-shape {spec.name}:D1,D2,...) or its value (--input)")
    out = []
    for k, d in enumerate(spec.shape):
        if isinstance(d, int):
            out.append(d)
            continue
        if d is None:
            out.append(BATCH_SIZE if is_batch_like(None, k) else OTHER_SIZE)
            continue
        if d not in symbols:
            symbols[d] = BATCH_SIZE if is_batch_like(d, k) else OTHER_SIZE
        out.append(symbols[d])
    return out


def _check_shape(spec: InputSpec, shape: list) -> None:
    """A shape given for ``spec`` fits its declared one."""
    declared = spec.shape
    ok = all(isinstance(n, int) and n >= 0 for n in shape)
    if declared is not None:
        ok = ok and len(shape) == len(declared) and all(
            not isinstance(d, int) or d == n for d, n in zip(declared, shape))
    if not ok:
        raise InputError(f"input '{spec.name}': shape {list(shape)} does not fit its "
                         f"declared shape {list(declared) if declared is not None else '?'}")

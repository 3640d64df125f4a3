"""A node's (or a kernel task's) inputs, outputs and attributes against its op's signature.

The signature is onnx's schema of the op at the node's opset version (``onnx.defs``,
written out to :mod:`.onnx_signatures` by ``tools/gen_onnx_signatures.py``; the domains
onnx defines): how many inputs and outputs the op takes, which inputs it needs,
and each attribute's type.  The compiler adds to that (:data:`COMPILER_ATTRS`): its fusions
record their epilogue in attributes of their own, and ``fused_add`` gives the op one more
input.  Where onnx has no schema (aircc's own ops, onnxruntime's contrib ops) an attribute
must still be one of the kinds the format stores (:data:`PLAIN`).  Checked at read time,
so that a value of the wrong type is a ModelFormatError naming the node and the attribute,
not a kernel's ``float('bogus')`` in the middle of a run.

Cost: one schema look-up per distinct (domain, op, version), then a pass over each node's
attributes.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from .checks import Checker, describe
from .onnx_signatures import OPSETS, TABLE

#: Domains whose ops onnx's schemas describe.
SCHEMA_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})


def _int(v: Any) -> bool:
    return isinstance(v, int)                      # bool too: ONNX has no bool attributes


def _float(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


def _list_of(item: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(item(x) for x in v)


def _activation(v: Any) -> bool:
    """``{"op": name, "attrs": {parameter: number or str}}`` (:mod:`aircc.ops.epilogues`)."""
    return (isinstance(v, dict) and set(v) == {"op", "attrs"} and isinstance(v["op"], str)
            and isinstance(v["attrs"], dict)
            and all(isinstance(k, str) and (_float(x) or isinstance(x, str)) for k, x in v["attrs"].items()))


def _plain(v: Any, depth: int = 2) -> bool:
    """A number, a str, an array, or a list of those (or of such lists: two levels at most)."""
    if isinstance(v, list):
        return depth > 0 and all(_plain(x, depth - 1) for x in v)
    return isinstance(v, (int, float, str, np.ndarray))


KIND_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": _int, "float": _float, "str": lambda v: isinstance(v, str),
    "tensor": lambda v: isinstance(v, np.ndarray), "ints": _list_of(_int),
    "floats": _list_of(_float), "strs": _list_of(lambda x: isinstance(x, str)),
    "tensors": _list_of(lambda x: isinstance(x, np.ndarray)),
    "bools": _list_of(lambda x: isinstance(x, bool)), "activation": _activation, "plain": _plain,
}
#: onnx's attribute types as the kinds a payload stores them in (a TYPE_PROTO: a dtype name);
#: graphs are bodies of the control kernel, never attributes.
ONNX_KINDS = {"INT": "int", "FLOAT": "float", "STRING": "str", "TENSOR": "tensor", "INTS": "ints",
              "FLOATS": "floats", "STRINGS": "strs", "TENSORS": "tensors", "TYPE_PROTO": "str",
              "GRAPH": "graph", "GRAPHS": "graph"}
#: Attributes the compiler gives ops (fusions, layouts, the memory plan), by kind.
COMPILER_ATTRS = {
    "channels_last": "int", "fused_relu": "int", "fused_add": "int", "fused_scale": "float",
    "fused_activation": "activation", "weight_layout": "str", "in_place": "bools",
    "perm_a": "ints", "perm_b": "ints", "perm_y": "ints",
}
#: What an attribute no table names may be.
PLAIN = "plain"
#: The kinds' names in messages.
KIND_NAMES = {"int": "an int", "float": "a number", "str": "a str", "tensor": "an array",
              "ints": "a list of ints", "floats": "a list of numbers", "strs": "a list of strs",
              "tensors": "a list of arrays", "bools": "a list of bools",
              "activation": "{'op': str, 'attrs': {str: number or str}}",
              "plain": "a number, a str, an array or a list of those"}


@dataclass(frozen=True)
class Signature:
    """What onnx's schema says of one op version."""

    since: int
    min_inputs: int
    max_inputs: int
    required_inputs: tuple[int, ...]
    """Positions of the inputs the op cannot do without (a name, never empty)."""
    variadic_from: int | None
    """Where its variadic inputs start (each a name, never empty), if it has any."""
    min_outputs: int
    max_outputs: int
    attrs: dict[str, str]
    """Attribute name -> kind (:data:`KIND_CHECKS`)."""
    required_attrs: tuple[str, ...]


#: (domain, op) -> the fields of each of its signatures, oldest first.
SIGNATURES: dict[tuple[str, str], list[tuple]] = {
    (domain, op): [(since, lo, hi, tuple(req), var, olo, ohi, attrs, tuple(need))
                   for since, lo, hi, req, var, olo, ohi, attrs, need in sigs]
    for domain, op, sigs in json.loads(TABLE)}


@functools.lru_cache(maxsize=4096)
def signature(domain: str, op: str, version: int) -> Signature | None:
    """onnx's schema of ``op`` at opset ``version`` of ``domain`` (its newest for a version
    of 0), or None where onnx has none.

    Read from :mod:`.onnx_signatures`, the schemas written out of onnx (so that a runtime
    reading an .om never imports onnx); an opset newer than that table asks the installed
    onnx itself."""
    if domain not in SCHEMA_DOMAINS:
        return None
    domain = "" if domain == "ai.onnx" else domain
    if version > OPSETS.get(domain, 0):
        return schema_signature(domain, op, version)
    history = SIGNATURES.get((domain, op))
    if not history:
        return None
    if version <= 0:
        return Signature(*history[-1])
    chosen = None
    for entry in history:                    # oldest first: the newest since <= version
        if entry[0] > version:
            break
        chosen = entry
    return None if chosen is None else Signature(*chosen)


def schema_signature(domain: str, op: str, version: int) -> Signature | None:
    """The installed onnx's schema of ``op`` at opset ``version`` of ``domain`` (``""``
    for the default one; its newest for a version of 0), or None where it has none."""
    import onnx.defs

    try:
        s = onnx.defs.get_schema(op, min(version, 2**31 - 1), domain) if version > 0 else \
            onnx.defs.get_schema(op, domain)
    except Exception:        # onnx.defs.SchemaError: no such op or version
        return None
    option = onnx.defs.OpSchema.FormalParameterOption
    required = tuple(i for i, p in enumerate(s.inputs) if p.option == option.Single)
    variadic = next((i for i, p in enumerate(s.inputs) if p.option == option.Variadic), None)
    attrs = {n: ONNX_KINDS.get(a.type.name, PLAIN) for n, a in s.attributes.items()}
    return Signature(s.since_version, s.min_input, s.max_input, required, variadic,
                     s.min_output, s.max_output, attrs,
                     tuple(n for n, a in s.attributes.items() if a.required and attrs[n] != "graph"))


def check_signature(c: Checker, where: str, label: str, domain: str, op: str, version: int,
                    inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict) -> None:
    """The node at ``where`` (``label`` names it in messages) against its op's signature
    (see the module doc); ``inputs`` and ``outputs``: its names (or operands), empty or None
    where it has none."""
    sig = signature(domain, op, version)
    for name, value in attrs.items():
        if not isinstance(name, str):
            c.fail(f"{where}.attrs", f"of {label} must be named by strs, got {describe(name)}")
        kind = sig.attrs.get(name) if sig is not None else None
        kind = kind or COMPILER_ATTRS.get(name, PLAIN)
        if kind == "graph":
            c.fail(f"{where}.attrs.{name}", f"of {label} is a graph: graphs are bodies of "
                                            f"the control kernel, not attributes")
        if not KIND_CHECKS[kind](value):
            c.fail(f"{where}.attrs.{name}", f"of {label} must be {KIND_NAMES[kind]}, got {describe(value)}")
    if sig is None:
        return
    missing = [n for n in sig.required_attrs if n not in attrs]
    if missing:
        c.fail(f"{where}.attrs", f"of {label} lack '{missing[0]}', which {op} (opset "
                                 f"{sig.since}) needs")
    extra = 1 if attrs.get("fused_add") else 0          # the fused Add's other operand
    n_in, n_out = len(inputs), len(outputs)
    if not sig.min_inputs <= n_in <= sig.max_inputs + extra:
        c.fail(f"{where}.inputs", f"of {label} are {n_in}, but {op} (opset {sig.since}) takes "
                                  f"{_range(sig.min_inputs, sig.max_inputs + extra)}")
    empty = [i for i in sig.required_inputs if i < n_in and not inputs[i]]
    if sig.variadic_from is not None:
        empty += [i for i in range(sig.variadic_from, n_in) if not inputs[i]][:1]
    if empty:
        c.fail(f"{where}.inputs[{empty[0]}]", f"of {label} is empty, but {op} needs it")
    if not sig.min_outputs <= n_out <= sig.max_outputs:
        c.fail(f"{where}.outputs", f"of {label} are {n_out}, but {op} (opset {sig.since}) has "
                                   f"{_range(sig.min_outputs, sig.max_outputs)}")


def _range(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"at least {lo}" if hi >= 2**31 - 1 else f"{lo} to {hi}"

"""Broadcasting binary ops (arithmetic, comparison, logical), PRelu, Where, the variadic
Sum/Max/Min/Mean, and the binary ops' legacy versions.  Defined from tables: one line
per op.

From opset 7 the binary ops broadcast all their inputs the numpy way (multidirectional),
and so do the variadic ops from opset 8: those versions are ``ELEMENTWISE``.  The binary
ops' earlier versions broadcast B into A only when told to (``broadcast``), aligned at an
``axis``, and the variadic ops' earlier versions are not marked either; PRelu broadcasts
its slope into X only (unidirectional), the Bitwise ops are not marked.
"""
from __future__ import annotations

from aircc.ops.registry import InferContext, ShapeRule, define
from aircc.ops.shapes import broadcast_shapes
from aircc.ops.traits import Trait
from aircc.ops.types import TensorType

#: Ops of this module that may run on the host in dynamic mode (shape arithmetic).
HOST_CAPABLE = frozenset({"Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Equal", "Less",
                          "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Where"})


def _traits(name: str, elementwise: bool) -> set[Trait]:
    traits = {Trait.ELEMENTWISE} if elementwise else set()
    if name in HOST_CAPABLE:
        traits.add(Trait.HOST_CAPABLE)
    return traits


def broadcast_rule(result: str, same_types: bool = True, doc: str = "") -> ShapeRule:
    """Shape rule: broadcast all inputs; result dtype is the first input's (``result``
    ``"same"``) or bool; ``same_types``: the inputs must share a dtype."""

    def infer(ctx: InferContext) -> list[TensorType]:
        types = [ctx.input_type(i) for i in range(ctx.num_inputs)]
        if same_types and any(t.dtype != types[0].dtype for t in types):
            ctx.fail(f"input types differ: {[t.dtype for t in types]}")
        shape = broadcast_shapes(ctx, *[t.shape for t in types])
        return [TensorType(types[0].dtype if result == "same" else "bool", shape)]

    infer.__doc__ = doc
    return infer


#: (name, since, what it computes, result dtype: "same" or "bool", inputs must share
#: dtype, ELEMENTWISE)
BINARY = [
    ("Add", 7, "a + b.", "same", True, True),
    ("Sub", 7, "a - b.", "same", True, True),
    ("Mul", 7, "a * b.", "same", True, True),
    ("Div", 7, "a / b; integers truncate toward zero.", "same", True, True),
    ("Pow", 7, "a to the power b.", "same", False, True),
    ("Mod", 10, "Remainder of a / b: the divisor's sign, or the dividend's with ``fmod``.",
     "same", True, True),
    ("PRelu", 7, "x if x >= 0 else slope x (the slope broadcasts into x).", "same", True, False),
    ("Equal", 7, "a == b.", "bool", True, True),
    ("Less", 7, "a < b.", "bool", True, True),
    ("Greater", 7, "a > b.", "bool", True, True),
    ("LessOrEqual", 12, "a <= b.", "bool", True, True),
    ("GreaterOrEqual", 12, "a >= b.", "bool", True, True),
    ("And", 7, "Logical and of bools.", "bool", True, True),
    ("Or", 7, "Logical or of bools.", "bool", True, True),
    ("Xor", 7, "Logical xor of bools.", "bool", True, True),
    ("BitwiseAnd", 18, "Bitwise and of integers.", "same", True, False),
    ("BitwiseOr", 18, "Bitwise or of integers.", "same", True, False),
    ("BitwiseXor", 18, "Bitwise xor of integers.", "same", True, False),
]

for _name, _since, _doc, _result, _same_types, _elementwise in BINARY:
    define(_name, _since, traits=_traits(_name, _elementwise))(
        broadcast_rule(_result, _same_types, _doc))


#: Variadic ops: (name, what it computes)
VARIADIC = [("Sum", "The sum of the inputs."), ("Max", "The largest of the inputs."),
            ("Min", "The smallest of the inputs."), ("Mean", "The mean of the inputs.")]


def variadic_rule(doc: str) -> ShapeRule:
    """Shape rule of a variadic op: at least one input, all broadcast, of one dtype."""
    broadcast = broadcast_rule("same")

    def infer(ctx: InferContext) -> list[TensorType]:
        if ctx.num_inputs < 1:
            ctx.fail("needs at least one input")
        return broadcast(ctx)

    infer.__doc__ = doc
    return infer


#: The variadic ops' versions, and whether they broadcast the numpy way (opset 8 on).
VARIADIC_VERSIONS = ((1, False), (8, True))

for _name, _doc in VARIADIC:
    for _since, _elementwise in VARIADIC_VERSIONS:
        define(_name, _since, traits=_traits(_name, _elementwise))(variadic_rule(_doc))


@define("Where", 9, traits=_traits("Where", True))
def where(ctx: InferContext) -> list[TensorType]:
    """X where the condition holds, else Y (three-way broadcasting)."""
    c, x, y = (ctx.input_type(i) for i in range(3))
    if c.dtype != "bool":
        ctx.fail(f"condition must be bool, got {c.dtype}")
    if x.dtype != y.dtype:
        ctx.fail(f"X is {x.dtype} but Y is {y.dtype}")
    return [TensorType(x.dtype, broadcast_shapes(ctx, c.shape, x.shape, y.shape))]


# ----------------------------------------------------- legacy broadcasting (opset < 7)
def legacy_rule(name: str, since: int) -> ShapeRule:
    """Shape rule of ``name`` before opset 7: B broadcasts into A's shape (with
    ``broadcast`` set, or always for PRelu); the result has A's type."""

    def infer(ctx: InferContext) -> list[TensorType]:
        a, b = ctx.input_type(0), ctx.input_type(1)
        if not int(ctx.attrs.get("broadcast", 0)) and a.shape != b.shape and name != "PRelu":
            ctx.fail(f"shapes {a.shape} and {b.shape} differ and broadcast is not set")
        return [TensorType(a.dtype, a.shape)]     # B broadcasts to A's shape

    infer.__doc__ = (f"PRelu as of opset {since}: one slope per channel, or slopes that broadcast "
                     "into X." if name == "PRelu" else
                     f"{name} as of opset {since}: B broadcasts into A only with ``broadcast`` set, "
                     "aligned from ``axis``.")
    return infer


#: The binary ops' versions before opset 7.
LEGACY = (("Add", 1), ("Sub", 1), ("Mul", 1), ("Div", 1), ("Pow", 1), ("PRelu", 1),
          ("Add", 6), ("Sub", 6), ("Mul", 6), ("Div", 6), ("PRelu", 6))

for _name, _since in LEGACY:
    define(_name, _since, traits=_traits(_name, False))(legacy_rule(_name, _since))


def _bit_shift_rule(types: tuple[str, ...]) -> ShapeRule:
    def infer(ctx: InferContext) -> list[TensorType]:
        direction = ctx.attrs.get("direction")
        if direction not in ("LEFT", "RIGHT"):
            ctx.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
        a, b = ctx.input_type(0), ctx.input_type(1)
        if a.dtype != b.dtype or not a.dtype.startswith(types):
            kinds = "unsigned integer" if types == ("uint",) else "integer"
            ctx.fail(f"inputs must be the same {kinds} type, got {a.dtype} and {b.dtype}")
        return [TensorType(a.dtype, broadcast_shapes(ctx, a.shape, b.shape))]

    infer.__doc__ = ("a shifted left or right (``direction``) by b bits, broadcast; a shift "
                     "of the type's width or more gives 0 (-1 for a negative a shifted right).")
    return infer


define("BitShift", 11, traits={Trait.ELEMENTWISE})(_bit_shift_rule(("uint",)))
define("BitShift", 28, traits={Trait.ELEMENTWISE})(_bit_shift_rule(("uint", "int")))

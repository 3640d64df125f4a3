"""Elementwise ops on oneDNN: the unary activations it implements, and binary ops whose
second operand broadcasts (dims of size 1) into the first's shape.

oneDNN spreads them over the OpenMP team; on a tensor of a few hundred elements numpy's
single call is as fast, and on a large one the team wins.  The layout does not matter:
an elementwise op reads and writes its operands as they lie.
"""
from __future__ import annotations

from aircc.executor.kernels.dnnl.attr import Attr
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.ops import binary, eltwise
from aircc.executor.kernels.dnnl.primitive import PrimitiveDesc
from aircc.ops import TensorType

from . import DNNL
from .common import NotForDnnl, act, bind, cached_pd, dnnl_or_twin, storage, twin_prepare, type_md
from .nan import nan_twin

#: ONNX op (since) -> (oneDNN algorithm, alpha and beta from the node's attributes).  Not
#: here: Log, Softplus, Mish and GELU, whose oneDNN approximations are off by up to 1e-3
#: relative (Softplus even negative far left), and Relu and Exp, which oneDNN's JIT gets
#: wrong on NaN (``relu`` takes it to 0 with ``vmaxps``, ``exp`` to +inf; oneDNN runs a
#: Relu that keeps NaN only as post-ops, which its eltwise primitive takes to its reference
#: kernel) and numpy's kernels run as fast: numpy's kernels run them.
UNARY = {
    ("LeakyRelu", 1): ("relu", lambda a: (float(a.get("alpha", 0.01)), 0.0)),
    ("Sigmoid", 1): ("logistic", lambda a: (0.0, 0.0)),
    ("Tanh", 1): ("tanh", lambda a: (0.0, 0.0)),
    ("Sqrt", 1): ("sqrt", lambda a: (0.0, 0.0)),
    ("Abs", 1): ("abs", lambda a: (0.0, 0.0)),
    ("Neg", 1): ("linear", lambda a: (-1.0, 0.0)),
    ("Elu", 1): ("elu", lambda a: (float(a.get("alpha", 1.0)), 0.0)),
    ("HardSigmoid", 1): ("hardsigmoid", lambda a: (float(a.get("alpha", 0.2)),
                                                   float(a.get("beta", 0.5)))),
    ("HardSwish", 14): ("hardswish", lambda a: (1.0 / 6.0, 0.5)),
}
#: Those whose oneDNN kernel takes NaN to a bound (``vmaxps`` / ``vminps``): numpy's kernel
#: runs an input that holds NaN (:func:`~.nan.nan_twin`; numpy's HardSigmoid takes 1.6x
#: oneDNN's time).
DROPS_NAN = {"HardSigmoid"}
#: ONNX binary op (since) -> oneDNN algorithm, and whether the operands commute.
BINARY = {("Add", 7): ("add", True), ("Sub", 7): ("sub", False), ("Mul", 7): ("mul", True),
          ("Div", 7): ("div", False)}
#: Below this many elements numpy's one ufunc call is as fast as a oneDNN call.
SMALL = 4096


def _key(kind: str, types: list, attrs: dict) -> tuple:
    return (kind, tuple(None if t is None else (t.dtype, tuple(t.shape)) for t in types),
            repr(sorted(attrs.items())))


def _check(t: TensorType) -> None:
    if t.dtype != "float32":
        raise NotForDnnl(f"{t.dtype} data")
    n = 1
    for d in t.shape:
        n *= int(d)
    if n < SMALL:
        raise NotForDnnl(f"{n} elements: numpy's single call is as fast")


def _unary(op: str, since: int, alg: str, params):
    @DNNL.kernel(op, since)
    @dnnl_or_twin(op, since)
    class Unary:
        @staticmethod
        def plan(types: list, attrs: dict) -> PrimitiveDesc:
            x = types[0]
            _check(x)
            name = alg
            alpha, beta = params(attrs)
            if name == "relu" and alpha == 0.0:
                raise NotForDnnl("a LeakyRelu of slope 0 (oneDNN's takes NaN to 0)")
            return cached_pd(_key(op, types, attrs),
                             lambda: eltwise(type_md(x), type_md(x), name, alpha, beta,
                                             attr=Attr((), scratchpad="user")), 8.0 * x.numel)

        @staticmethod
        def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
            run = bind(pd, {Arg.src: act(ins[0]), Arg.dst: act(outs[0])}, ws)
            if op not in DROPS_NAN:
                return run
            return nan_twin(run, ins[0], lambda: twin_prepare(op, since, "", ins, outs, attrs, {},
                                                              ws, constant, prepared))
    Unary.__name__ = Unary.__qualname__ = op
    return Unary


for (_op, _since), (_alg, _params) in UNARY.items():
    _unary(_op, _since, _alg, _params)


def _binary(op: str, since: int, alg: str, commutes: bool):
    @DNNL.kernel(op, since)
    @dnnl_or_twin(op, since)
    class Binary:
        @staticmethod
        def plan(types: list, attrs: dict) -> PrimitiveDesc:
            a, b = _order(types[0], types[1], commutes)
            _check(a)
            if b.dtype != a.dtype:
                raise NotForDnnl("operands of two types")

            def make():
                rank = len(a.shape)
                shape1 = (1,) * (rank - len(b.shape)) + tuple(b.shape)
                return binary(type_md(a), type_md(TensorType(b.dtype, shape1)), type_md(a), alg,
                              attr=Attr((), scratchpad="user"))
            return cached_pd(_key(op, types, attrs), make, 8.0 * a.numel)

        @staticmethod
        def bind_to(pd, ins, outs, attrs, ws, constant, prepared):
            a, b = _order(ins[0], ins[1], commutes)
            if not b.flags.c_contiguous:
                raise NotForDnnl("a strided operand")
            return bind(pd, {Arg.src_0: act(a), Arg.src_1: storage(b, pd.arg_md(Arg.src_1)),
                             Arg.dst: act(outs[0])}, ws)
    Binary.__name__ = Binary.__qualname__ = op
    return Binary


def _order(a, b, commutes: bool):
    """(full operand, broadcast operand): swapped when the first broadcasts and they commute;
    NotForDnnl when the first broadcasts otherwise."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    if sa == _broadcast(sa, sb):
        return a, b
    if commutes and sb == _broadcast(sa, sb):
        return b, a
    raise NotForDnnl(f"shapes {list(sa)} and {list(sb)}: the first operand broadcasts")


def _broadcast(sa: tuple, sb: tuple) -> tuple:
    rank = max(len(sa), len(sb))
    pa, pb = (1,) * (rank - len(sa)) + sa, (1,) * (rank - len(sb)) + sb
    out = []
    for x, y in zip(pa, pb):
        if x != y and 1 not in (x, y):
            raise NotForDnnl(f"shapes {list(sa)} and {list(sb)} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


for (_op, _since), (_alg, _commutes) in BINARY.items():
    _binary(_op, _since, _alg, _commutes)

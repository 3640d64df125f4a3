"""NaN and infinities on oneDNN: the Relu post-ops that keep NaN, and the guards that run
them (or numpy's Relu, or a fix-up) only where an operand could make one.

oneDNN's JIT takes NaN to a bound wherever it runs a max or a min (``vmaxps(x, c)`` gives
c for a NaN x): a Relu of slope 0 as a post-op or an eltwise, ``clip``, ``clip_v2``,
``hardsigmoid``, a binary ``max``, batch norm's ``fuse_norm_relu``, max pooling; its
softmax leaves a row holding NaN or +inf NaN at that entry alone.  ONNX (numpy) keeps NaN.
"""
from __future__ import annotations

import math

import numpy as np

from aircc.executor.kernels.dnnl.attr import Eltwise
from aircc.executor.kernels.epilogue import relu as numpy_relu
from aircc.ops import TensorType

from .common import then, unfaithful

#: The smallest positive float32 (a denormal): the slope of :data:`RELU_POST_OPS`' second step.
TINY = float(np.float32(2.0 ** -149))
#: Relu as oneDNN post-ops that keep NaN.  Its JIT runs ``relu`` of slope 0 (and ``clip``,
#: ``clip_v2``, a binary ``max``) as ``vmaxps(x, 0)``, which gives 0 for a NaN x; with a slope
#: it compares ``x > 0`` and blends ``x`` or ``slope * x``, which keeps NaN.  So: ``elu``
#: (alpha 1/4) keeps x > 0 and NaN and takes every other x, -inf too, into [-1/4, 0];
#: ``relu`` of slope :data:`TINY` keeps x > 0 and NaN and makes those -0 (a quarter of the
#: smallest denormal rounds to 0); ``linear`` 1, 0 makes -0 + 0 = +0.  Exact: x for x > 0,
#: +0 for x <= 0, NaN for NaN.  The ``elu`` costs an exp an element: 2-7% of a convolution
#: (1x1 of 64 channels the most), 6% of ResNet-50, so it runs only where the plain ``relu``
#: could meet NaN (:func:`relu_guard`).
RELU_POST_OPS = (Eltwise("elu", 0.25, 0.0), Eltwise("relu", TINY, 0.0), Eltwise("linear", 1.0, 0.0))
#: The plain Relu post-op: exact on every value but NaN.
PLAIN_RELU = (Eltwise("relu"),)
#: A product whose entries are bounded by less than this has neither overflowed nor met an
#: infinity (a margin of 30 below float32's largest for the rounding on the way).
FINITE_BOUND = 1e37
#: Outputs of a product up to which the NaN-keeping epilogue always runs (no guard): an
#: ``elu`` over 4096 floats costs about as much as the guard's norm (1-2 us).
ALWAYS_KEEP_NAN = 4096


def relu_ops(keep_nan: bool) -> tuple[Eltwise, ...]:
    """The Relu post-ops: :data:`RELU_POST_OPS` (``keep_nan``) or :data:`PLAIN_RELU`."""
    return RELU_POST_OPS if keep_nan else PLAIN_RELU


def norm(a: np.ndarray) -> float:
    """A bound of the 2-norm of ``a``: NaN when it holds NaN, inf for an infinity.  One BLAS
    dot (0.07 ns an element here); where the float32 sum of squares overflows (a norm past
    about 1e19), sqrt(size) times the largest magnitude.  Called per run on the device's
    workers, whose numpy warnings are off (an ``errstate`` here cost 1.7 us a call)."""
    f = a.reshape(-1)
    squares = float(np.dot(f, f))
    if squares < math.inf or squares != squares:       # finite, or NaN
        return math.sqrt(squares)
    return math.sqrt(f.size) * max(-float(np.minimum.reduce(f)), float(np.maximum.reduce(f)))


def plain_epilogue_unsafe(attrs: dict) -> bool:
    """Whether the product's fused epilogue takes NaN or an infinity wrong when run plain
    (a fused Relu, an :func:`~.common.unfaithful` activation): :func:`guarded` decides."""
    return bool(attrs.get("fused_relu")) or unfaithful(attrs)


def keeps_nan_always(outputs: int, attrs: dict, bfloat16_operands: bool = False) -> bool:
    """Whether a product of ``outputs`` entries runs its NaN-keeping epilogue with no guard
    (see :func:`guarded`): its plan makes that twin alone, so that one primitive is made."""
    return plain_epilogue_unsafe(attrs) and (outputs <= ALWAYS_KEEP_NAN or bfloat16_operands)


def relu_guard(fast, make_slow, bound):
    """A call running ``fast`` (a product whose epilogue takes NaN or an infinity wrong: the
    plain Relu post-op, an :func:`~.common.unfaithful` activation, ``fuse_norm_relu``) when
    ``bound()`` (a bound of the magnitude of every entry before the epilogue, from the
    operands' norms: NaN or inf when an operand holds NaN or an infinity) is below
    :data:`FINITE_BOUND`: then every entry is finite and the epilogue exact.  Else the same
    product with an epilogue that keeps them (:data:`RELU_POST_OPS`, numpy's activation),
    bound by ``make_slow()`` when first needed."""
    slow: list = []

    def run():
        if bound() < FINITE_BOUND:
            fast()
            return
        if not slow:
            slow.append(make_slow())
        slow[0]()
    run.bound = getattr(fast, "bound", None)
    return run


def guarded(bound, plan, pd, ins, outs, attrs, ws, constant, prepared, magnitude):
    """A product's ``bound(pd, ...)`` (a conv's or matmul's binding; ``plan(types, attrs,
    keep_nan=True)`` makes its NaN-keeping twin), guarded where its epilogue takes NaN or
    an infinity wrong (a fused Relu, an :func:`~.common.unfaithful` activation):
    :func:`relu_guard` with ``magnitude`` (a bound of its output's entries).  A product of
    at most :data:`ALWAYS_KEEP_NAN` outputs, or with no ``magnitude`` (operands whose norm
    numpy cannot take at speed: bfloat16), runs the twin alone."""
    if not plain_epilogue_unsafe(attrs):
        return bound(pd, ins, outs, attrs, ws, constant, prepared)

    def make_slow(into=None):          # packed weights in ``into`` (None: a host copy)
        types = [None if a is None else TensorType.of(a) for a in ins]
        return bound(plan(types, attrs, keep_nan=True), ins, outs, attrs, ws, constant, into,
                     keep_nan=True)
    if magnitude is None or outs[0].size <= ALWAYS_KEEP_NAN:    # no cheap bound, or small
        return make_slow(prepared)
    return relu_guard(bound(pd, ins, outs, attrs, ws, constant, prepared), make_slow, magnitude)


def relu_after(attrs: dict, y: np.ndarray):
    """A call running the ``fused_relu`` of ``attrs`` on ``y`` in place with numpy (which keeps
    NaN), for primitives that take no :data:`RELU_POST_OPS`; or None."""
    if not attrs.get("fused_relu"):
        return None
    return lambda: numpy_relu(y, y)


def norm_relu(cls, bound, pd, ins, attrs, outs, operands: int):
    """``bound(pd)``; with a fused Relu, guarded: where an operand could make NaN, the
    normalisation without ``fuse_norm_relu`` then numpy's Relu (:func:`relu_guard`: finite
    operands make a finite or infinite result, which the flag's Relu gets right)."""
    run = bound(pd)
    if not attrs.get("fused_relu"):
        return run

    def make_slow():
        types = [None if a is None else TensorType.of(a) for a in ins]
        return then(bound(cls.plan(types, attrs, keep_nan=True)), relu_after(attrs, outs[0]))

    def finite() -> float:
        return sum(norm(a) for a in ins[:operands] if a is not None)
    return relu_guard(run, make_slow, finite)


def nan_rows(y: np.ndarray, axis: int):
    """A call making every row of ``y`` along ``axis`` that holds a NaN all NaN, as ONNX's
    softmax of a row with a NaN or +inf is: oneDNN's leaves NaN at that entry alone (0 or
    -inf elsewhere).  numpy's minimum of ``y``, which is NaN when any entry is, tells
    whether there is any (0.07-0.09 ms for (96, 128, 128), 4-5% of oneDNN's softmax)."""
    flat = _flat(y)

    def guard(least=np.minimum.reduce, isnan=np.isnan):
        if isnan(least(flat, axis=None)):
            np.copyto(y, np.nan, where=isnan(y).any(axis=axis, keepdims=True))
    return guard


def nan_channels(x: np.ndarray, y: np.ndarray, channels_last: bool):
    """A call making NaN every channel of a global max pool ``y`` whose input ``x`` holds a
    NaN, as ONNX's reference (``np.max``) has it: oneDNN's max drops NaN.  numpy's minimum
    of ``x``, NaN when any entry is, tells whether there is any."""
    axes = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
    flat = _flat(x)

    def guard(least=np.minimum.reduce, isnan=np.isnan):
        if isnan(least(flat, axis=None)):
            np.copyto(y, np.nan, where=isnan(x).any(axis=axes, keepdims=True))
    return guard


def nan_twin(run, x: np.ndarray, make_twin):
    """A call running ``run`` (a oneDNN primitive exact on everything but NaN, which its
    ``vmaxps`` / ``vminps`` drop: a max pool, ``hardsigmoid``), or where ``x`` holds NaN
    (numpy's minimum of it is NaN: 0.06 ns an element) the numpy twin, made by
    ``make_twin()`` when first needed, which keeps it as ONNX does."""
    twin: list = []
    flat = _flat(x)

    def guarded(least=np.minimum.reduce, isnan=np.isnan):
        if not isnan(least(flat, axis=None)):
            run()
            return
        if not twin:
            twin.append(make_twin())
        twin[0]()
    guarded.bound = getattr(run, "bound", None)
    return guarded


def _flat(a: np.ndarray) -> np.ndarray:
    """``a`` as one dimension where that is a view (numpy reduces it 20% faster), else ``a``."""
    return a.reshape(-1) if a.flags.c_contiguous else a

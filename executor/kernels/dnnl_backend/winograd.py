"""Winograd convolution F(m x m, 3 x 3) on the oneDNN backend, where it beats oneDNN's own
direct convolution (oneDNN 3.2 has no float32 Winograd on these CPUs).

A 3x3 stride-1 convolution computes each m x m output tile from an (m+2) x (m+2) input
tile; in the Winograd domain that is an elementwise product, so the whole layer is one
GEMM per tile position f, ``Mo[f] (T x K) = V[f] (T x C) @ U[f] (C x K)`` over the T
tiles: (m+2)^2 / (9 m^2) of the direct multiply-adds (0.44 for m = 2, 0.25 for m = 4).
Three steps per run, on device memory carved from the task's workspace:

1. ``V = B^T d B`` for every tile, channels-last in and out (C, ``winograd_transforms.c``);
2. the (m+2)^2 products as ONE batched oneDNN matmul;
3. ``y = A^T Mo A`` with the bias, a residual and Relu on the way out (C).

The C steps share their tiles out among the matmul's OpenMP team (the same libgomp as
oneDNN's, so the same threads; ``threads`` is the matmul's team as :func:`~.common.bind`
sizes it, one off a device's workers): ResNet-50 34.4 ms against 36.3 with serial
transforms.  Beside a busy neighbour process Winograd and direct ResNet-50 take the same
time (the median of interleaved blocks' ratios 1.00-1.01).

``U = G w G^T`` is made once, when the model is loaded, into device memory beside the
model's other prepared weights (the numpy backend's :func:`~..conv.winograd.weights`,
in float64; the matrices are :func:`~..conv.winograd.matrices`', passed to the C code).
Float32 results: within about 1e-5 of the largest output for m = 4, 1e-6 for m = 2.

Which convolutions (:func:`choose`, in the tiling, so the .om records the choice):
float32, channels-last, 3x3, stride 1, no dilation or groups, the bias, residual and Relu
at most as the epilogue, and by shape.  The rule comes from each conv's time in its
network, Winograd against the direct kernel (the profiler's per-node medians, the light
models, on a 2-vCPU AMD EPYC):

- F(4x4) when both output dims are at least 24, with at least 64 input and 32 output
  channels: 0.52-0.78 at 27 x 27 to 56 x 56 (Inception, ResNet-50), 0.79-0.89 for
  DenseNet's 128 -> 32 at 28 x 28 and 56 x 56, VGG-19 0.63 as a whole;
- F(2x2) on outputs of 12 to 23 with at least 96 input and 128 output channels:
  0.72-0.96 (ResNet-50's 14 x 14 x 256 0.74-0.76, the same as F(4x4) there, and F(2x2)
  is 20 times more accurate);
- not where its buffers V and Mo together would outgrow :data:`MAX_BUFFER_BYTES` (VGG-19's
  224 x 224 x 64: 58 MB, 1.02; its 112 x 112 x 128, 29 MB: 0.70),
- not at 7 x 7 and below (1.2-2.2: the batched products have too few rows to run near
  the GEMM rate), nor with fewer channels (DenseNet's 128 -> 32 at 14 x 14: 1.4-1.6,
  SqueezeNet's 16 -> 64 at 55 x 55: 1.4).

The compile target's ``winograd`` (``CompileOptions.winograd``, ``aircc compile --winograd``,
by default ``$AIRCC_WINOGRAD``) sets the mode: ``auto`` (the default: the rule above),
``off`` (never), ``2`` or ``4`` (that tile wherever the conv qualifies, whatever its
shape: for measuring); a dynamic model's run-time tiling, whose target does not say,
follows ``$AIRCC_WINOGRAD``.  Where the C module was not built (no compiler at install), the
tiling never chooses it, and a .om that chose it runs the direct kernel, whose scratchpad
the task's workspace also covers.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from aircc.config import settings
from aircc.executor.device.prepared import prepared_array
from aircc.executor.kernels.conv.winograd import matrices, weights as winograd_weights
from aircc.executor.kernels.dnnl.attr import Attr
from aircc.executor.kernels.dnnl.enums import Arg
from aircc.executor.kernels.dnnl.memory import Memory, MemoryDesc
from aircc.executor.kernels.dnnl.ops import matmul
from aircc.formats.alignment import align_up
from aircc.ops import TensorType
from aircc.ops.defs.conv import OIHW, window_params
from aircc.ops.layout import is_channels_last
from aircc.ops.precision import COMPUTE_DTYPE
from aircc.ops.shapes import window_geometry

from .common import bind, cached_pd, worker_cpus

#: F(4x4): both output dims at least this, and at least these input / output channels.
F4_MIN_OUTPUT = 24
F4_MIN_CHANNELS = (64, 32)
#: F(2x2): both output dims from this (up to F4's), and at least these channels.
F2_MIN_OUTPUT = 12
F2_MIN_CHANNELS = (96, 128)
#: V and Mo together at most this many bytes: past the last-level cache (32 MiB here) the
#: transforms' passes run at memory speed and the saved products no longer pay for them.
MAX_BUFFER_BYTES = 40 << 20
#: Epilogue attributes the output transform applies (anything else: the direct kernel).
EPILOGUE = frozenset({"fused_add", "fused_relu"})

ALIGN = 64

_INPUT_ARGS = ([ctypes.c_void_p] + [ctypes.c_int] * 8 + [ctypes.c_void_p, ctypes.c_long,
                                                        ctypes.c_void_p, ctypes.c_int])
_OUTPUT_ARGS = ([ctypes.c_void_p] + [ctypes.c_int] * 6 + [ctypes.c_long] + [ctypes.c_void_p] * 3
                + [ctypes.c_int, ctypes.c_void_p, ctypes.c_int])


@functools.lru_cache(maxsize=None)
def transforms() -> dict | None:
    """The C transforms by tile size ({m: (input, output)}), or None where the extension
    module was not built."""
    try:
        from . import winograd_transforms  # type: ignore[attr-defined]
    except ImportError:
        return None
    lib = ctypes.CDLL(winograd_transforms.__file__)
    out = {}
    for m in (2, 4):
        fin, fout = lib[f"aircc_winograd_input_f{m}"], lib[f"aircc_winograd_output_f{m}"]
        fin.argtypes, fin.restype = _INPUT_ARGS, ctypes.c_int
        fout.argtypes, fout.restype = _OUTPUT_ARGS, None
        out[m] = (fin, fout)
    return out


def available() -> bool:
    return transforms() is not None


@functools.lru_cache(maxsize=None)
def _matrices32(m: int) -> tuple[np.ndarray, np.ndarray]:
    """B^T (a x a) and A^T (m x a) as contiguous float32, for the C transforms."""
    bt, _, at = matrices(m)
    return (np.ascontiguousarray(bt, dtype=np.float32),
            np.ascontiguousarray(at, dtype=np.float32))


class Geometry:
    """One qualifying convolution's sizes: images, input, output, pads, tiles."""

    def __init__(self, x_shape, w_shape, out, pads_begin, m: int):
        self.n, self.h, self.w, self.c = (int(v) for v in x_shape)
        self.k = int(w_shape[0])
        self.ho, self.wo = (int(v) for v in out)
        self.pt, self.pl = (int(v) for v in pads_begin)
        self.m, self.a = m, m + 2
        self.th, self.tw = -(-self.ho // m), -(-self.wo // m)
        self.tiles = self.n * self.th * self.tw


def _geometry(types: list, attrs: dict) -> tuple[tuple, tuple, tuple] | None:
    """(input shape NHWC, output dims, pads at the start) of a conv the Winograd mode can
    run, else None."""
    x, w = types[0], types[1]
    if x is None or w is None or x.dtype != "float32" or w.dtype != "float32":
        return None
    if not is_channels_last(attrs) or len(x.shape) != 4 or len(w.shape) != 4:
        return None
    if attrs.get("weight_layout", OIHW) != OIHW or int(attrs.get("group", 1)) != 1:
        return None
    if {k for k in attrs if k.startswith("fused_")} - EPILOGUE:
        return None
    if tuple(int(v) for v in w.shape[2:]) != (3, 3):
        return None
    xs = (x.shape[0], x.shape[-1], *x.shape[1:-1])
    _, kernel, strides, dilations, pads, auto_pad = window_params(xs, w.shape, attrs)
    if list(strides) != [1, 1] or list(dilations) != [1, 1]:
        return None
    out, pb, _ = window_geometry(xs[2:], kernel, strides, dilations, pads, auto_pad)
    if int(w.shape[1]) != int(x.shape[-1]) or min(out) < 1:
        return None
    if len(types) > 3 and types[3] is not None:
        if tuple(types[3].shape) != (x.shape[0], *out, w.shape[0]):
            return None
    return tuple(x.shape), tuple(out), tuple(pb)


def choose(types: list, attrs: dict, setting: str) -> Geometry | None:
    """The Winograd geometry for this conv (its tile size in ``m``) in Winograd mode
    ``setting``, or None: the direct kernel runs it (see the module doc)."""
    if setting == "off" or not available():
        return None
    found = _geometry(types, attrs)
    if found is None:
        return None
    x_shape, out, pb = found
    c, k = int(x_shape[-1]), int(types[1].shape[0])
    if setting in ("2", "4"):
        m = int(setting)
    elif min(out) >= F4_MIN_OUTPUT and c >= F4_MIN_CHANNELS[0] and k >= F4_MIN_CHANNELS[1]:
        m = 4
    elif min(out) >= F2_MIN_OUTPUT and c >= F2_MIN_CHANNELS[0] and k >= F2_MIN_CHANNELS[1]:
        m = 2
    else:
        return None
    g = Geometry(x_shape, types[1].shape, out, pb, m)
    if setting == "auto" and g.a * g.a * g.tiles * (c + k) * 4 > MAX_BUFFER_BYTES:
        return None
    return g


def _plane(floats: int) -> int:
    """Floats from one plane of V or Mo to the next: whole cache lines, one line past a
    multiple of 4 KiB (planes a multiple of the page apart put a tile's (m+2)^2 rows into
    the same few cache sets)."""
    lines = -(-floats // 16)
    return (lines + (1 - lines) % 64) * 16


class Plan:
    """The batched matmul of one geometry and where V, Mo and its scratchpad lie in the
    task's workspace."""

    def __init__(self, g: Geometry):
        self.g = g
        f, aa = np.float32, g.a * g.a
        self.v_plane, self.mo_plane = _plane(g.tiles * g.c), _plane(g.tiles * g.k)
        self.matmul = cached_pd(
            ("winograd-matmul", aa, g.tiles, g.c, g.k, self.v_plane, self.mo_plane),
            lambda: matmul(MemoryDesc.from_strides((aa, g.tiles, g.c), f, (self.v_plane, g.c, 1)),
                           MemoryDesc.from_tag((aa, g.c, g.k), f, "abc"),
                           MemoryDesc.from_strides((aa, g.tiles, g.k), f, (self.mo_plane, g.k, 1)),
                           attr=Attr((), scratchpad="user")),
            2.0 * aa * g.tiles * g.c * g.k)
        self.v_bytes = aa * self.v_plane * 4
        self.mo_bytes = aa * self.mo_plane * 4
        self.v_at, self.mo_at = 0, align_up(self.v_bytes)
        self.scratch_at = self.mo_at + align_up(self.mo_bytes)
        self.workspace = self.scratch_at + align_up(self.matmul.scratchpad_size)


def tiling(types: list, attrs: dict, direct: dict, setting: str) -> dict | None:
    """The tiling of a conv Winograd mode ``setting`` takes (its workspace also covers the
    direct kernel's ``direct`` tiling), or None."""
    if direct.get("backend") != "dnnl":
        return None
    g = choose(types, attrs, setting)
    if g is None:
        return None
    plan = Plan(g)
    if plan.matmul.is_reference:
        return None
    return {**direct, "winograd": g.m, "workspace": max(plan.workspace, direct["workspace"]),
            "impl": f"winograd F({g.m}x{g.m}, 3x3) + {plan.matmul.impl}"}


def prepare(ins, outs, attrs: dict, tiling: dict, ws, constant, prepared=None, direct=None):
    """The bound run of a conv whose tiling chose Winograd, or None (weights not constant,
    operands not as planned, the C module missing here): the direct kernel then runs.  A run
    whose input holds NaN or an infinity (the input transform says so) calls ``direct()``,
    the bound direct kernel, instead: the transforms mix a tile's inputs, so an infinity
    would make NaN of all its outputs."""
    fns = transforms()
    m = tiling.get("winograd")
    if fns is None or m not in fns or not constant[1] or ws is None:
        return None
    types = [None if a is None else TensorType.of(a) for a in ins]
    found = _geometry(types, attrs)
    if found is None:
        return None
    x, w, y = ins[0], ins[1], outs[0]
    bias = ins[2] if len(ins) > 2 else None
    residual = ins[3] if len(ins) > 3 else None
    g = Geometry(found[0], w.shape, found[1], found[2], m)
    plan = Plan(g)
    if ws.nbytes < plan.workspace or not all(
            a is None or a.flags.c_contiguous for a in (x, y, bias, residual)):
        return None
    v = ws[plan.v_at:plan.v_at + plan.v_bytes].view(np.float32)
    mo = ws[plan.mo_at:plan.mo_at + plan.mo_bytes].view(np.float32)
    scratch = ws[plan.scratch_at:]

    def fill(out: np.ndarray) -> None:          # U = G w G^T as (a*a, C, K)
        out[...] = winograd_weights(np.ascontiguousarray(w), m).transpose(0, 2, 1)

    key = ("winograd-weights", w.ctypes.data, tuple(w.shape), m)
    u = prepared_array(prepared, key, (g.a * g.a, g.c, g.k), np.float32, fill)
    pd = plan.matmul
    products = bind(pd, {Arg.src: Memory(pd.src_md(), v.ctypes.data, v),
                         Arg.weights: Memory(pd.weights_md(), u.ctypes.data, u),
                         Arg.dst: Memory(pd.dst_md(), mo.ctypes.data, mo)}, scratch)
    bt, at = _matrices32(m)
    fin, fout = fns[m]
    in_args = (x.ctypes.data, g.n, g.h, g.w, g.c, g.pt, g.pl, g.th, g.tw, bt.ctypes.data,
               plan.v_plane, v.ctypes.data)
    out_args = (mo.ctypes.data, g.n, g.ho, g.wo, g.k, g.th, g.tw, plan.mo_plane, at.ctypes.data,
                None if bias is None else bias.ctypes.data,
                None if residual is None else residual.ctypes.data,
                1 if attrs.get("fused_relu") else 0, y.ctypes.data)
    keep = (x, y, bias, residual, u, v, mo, bt, at)
    team = pd.team

    def run(keep=keep):
        n = min(team, worker_cpus())         # the matmul's team, as bind() sizes it
        if not fin(*in_args, n) and direct is not None:
            direct()
            return
        products()
        fout(*out_args, n)
    return run


def offered(cls):
    """Class decorator (over :func:`~.common.dnnl_or_twin`'s hooks): a conv the Winograd
    mode takes gets its tiling and bound run; every other one, and one it declines when
    bound, the direct kernel's."""
    direct_tiling, direct_prepare = cls.tiling, cls.prepare

    def tiling_(types, attrs, target):
        direct = direct_tiling(types, attrs, target)
        if attrs.get(COMPUTE_DTYPE):          # float32 transforms: a bfloat16 conv runs direct
            return direct
        setting = target.winograd if target is not None and target.winograd else settings().winograd
        return tiling(types, attrs, direct, setting) or direct

    def prepare_(ins, outs, attrs, tiling, ws, constant, prepared=None):
        if tiling.get("winograd"):
            bound: list = []

            def direct():          # bound when first needed, its weights a copy of its own
                if not bound:
                    bound.append(direct_prepare(ins, outs, attrs, tiling, ws, constant, None))
                bound[0]()
            run = prepare(ins, outs, attrs, tiling, ws, constant, prepared, direct)
            if run is not None:
                return run
        return direct_prepare(ins, outs, attrs, tiling, ws, constant, prepared)

    def kernel_(ins, outs, attrs, tiling, ws):
        prepare_(ins, outs, attrs, tiling, ws, [False] * len(ins), None)()

    cls.tiling, cls.prepare, cls.kernel = (staticmethod(tiling_), staticmethod(prepare_),
                                           staticmethod(kernel_))
    return cls

"""Which mode runs a convolution, chosen once per shape in its tiling, and whether it
wants its weights packed per tap.

The thresholds below were measured on this project's light models (A/B in one
process); the Winograd mode's own, per class of BLAS kernels, are in
:mod:`.winograd` and chosen by the compile target's vector class.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from aircc.ops.defs.conv import HWOI, OIHW, logical_weight_shape, window_params
from aircc.ops.shapes import is_int, prod, window_geometry
from aircc.ops.targets import Target
from aircc.ops.types import Dim, TensorType

from ..phases import phase_bytes, phase_plan
from ..scratch import BLOCK_BYTES, align
from . import winograd

#: Bytes of depthwise column block per channel block (a core's L2 on this machine: 0.97 of
#: 512 KiB's time for ShuffleNet, A/B in one process).
DW_BLOCK_BYTES = 1 << 20

#: The wide mode gathers its columns without the phase layout's junk columns (only the
#: output's width, GEMM straight into Y) when these would be more than this share of
#: the row: at 7 x 7 a 3x3 conv's rows are 9 wide, so the GEMM would do 29% more work
#: (at 14 x 14, 14%, the strided gather costs more than that saves).
EXACT_MIN_WIDTH_SHARE = 1.2


#: The stacked mode runs when the output has at most this share of the input's channels:
#: at 128 -> 32 channels it takes 0.6-0.76 of the per-tap GEMMs' time; at equal channel
#: counts it wins on small images and loses on large ones (1.06-1.1 at 56 x 56, 14 x 14),
#: and with more outputs than inputs its partial outputs outgrow the input it saves
#: reading (1.3-1.5).
STACKED_MAX_CHANNEL_SHARE = 0.5
#: ... and when its partial outputs (taps x M x plane) take at most this many bytes.
STACKED_MAX_BYTES = 8 << 20

#: A conv with fewer multiply-adds than this runs better as one im2col GEMM (``wide``)
#: than as a GEMM per tap: each of the nine BLAS calls starts and joins its threads, and
#: with few channels each has a short inner dimension.  Measured per shape, wide / taps:
#: 0.81-0.96 below 50 M multiply-adds (Inception's 14 x 14 and 13 x 13 convs, strided
#: ones), 0.98-1.07 above 60 M (ResNet's and VGG's).
TAPS_MIN_MACS = 50_000_000

#: Input channels per group below which one im2col GEMM beats a GEMM per tap.
PACKED_MIN_CHANNELS = 64
#: Groups above which the GEMM calls per tap and group cost more than they save.
PACKED_MAX_GROUPS = 4


def _stacks_taps(c: int, m: int, g: int, plan: dict, itemsize: int) -> bool:
    """Whether a 2-D conv with this phase plan runs in the stacked mode (see the package doc)."""
    ntaps = len(plan["taps"])
    return (g == 1 and len(plan["phases"]) == 1 and ntaps > 1
            and m <= STACKED_MAX_CHANNEL_SHARE * c
            and ntaps * m * plan["plane"] * itemsize <= STACKED_MAX_BYTES)


def _plan_of(x_shape, w_shape, attrs, dtype, target: Target):
    """(output spatial shape, phase plan, Winograd tile) of a 2-D conv of static shapes,
    or None."""
    ws = logical_weight_shape(w_shape, attrs)
    if len(x_shape) != 4 or not all(is_int(d) for d in (*x_shape, *ws)):
        return None
    nsp, kernel, strides, dilations, pads, auto_pad = window_params(x_shape, ws, attrs)
    out_sp, pb, _ = window_geometry(x_shape[2:], kernel, strides, dilations, pads, auto_pad)
    tile = winograd.choose_tile(int(x_shape[1]), int(ws[0]), int(attrs.get("group", 1)),
                                kernel, strides, dilations, out_sp, dtype,
                                winograd.thresholds(target.vector_class))
    return out_sp, phase_plan([int(d) for d in x_shape[2:]], out_sp, [int(k) for k in kernel],
                              strides, dilations, pb), tile


def _exact_columns(out_width: int, wq: int) -> bool:
    """Whether a wide-mode row of ``wq`` columns holds junk enough to gather exact ones."""
    return out_width * EXACT_MIN_WIDTH_SHARE < wq


def wants_packed(x_shape: Sequence[Dim], w_shape: Sequence[Dim], attrs: dict, dtype,
                 target: Target) -> bool:
    """Whether a 2-D conv of these shapes runs best on weights packed per tap (the taps
    or stacked mode) rather than in the wide or Winograd mode on ONNX's layout, on
    ``target``: the stacked mode always; otherwise not when Winograd takes it, when the
    output is narrow enough for the wide mode's exact columns (``EXACT_MIN_WIDTH_SHARE``)
    or the work small (``TAPS_MIN_MACS``).  Unknown shapes (dynamic mode) take the
    per-tap kernel."""
    found = _plan_of(x_shape, w_shape, attrs, dtype, target)
    if found is None:
        return True
    out_sp, plan, tile = found
    if tile:
        return False
    m, cg, kh, kw = logical_weight_shape(w_shape, attrs)
    if _stacks_taps(int(x_shape[1]), m, int(attrs.get("group", 1)), plan, np.dtype(dtype).itemsize):
        return True
    if _exact_columns(out_sp[1], plan["wq"]):
        return False
    return int(x_shape[0]) * m * cg * kh * kw * out_sp[0] * out_sp[1] >= TAPS_MIN_MACS


def weight_layout(types: list[TensorType | None], attrs: dict, target: Target) -> str:
    """The weight layout a conv of these input types runs best on, for ``target``:
    ``HWOI`` (packed per tap) for a 2-D conv of several taps with at least
    ``PACKED_MIN_CHANNELS`` input channels per group and at most ``PACKED_MAX_GROUPS``
    groups that :func:`wants_packed`, else ``OIHW`` (ONNX's)."""
    wt = types[1] if len(types) > 1 else None
    if wt is None or wt.shape is None or len(wt.shape) != 4 \
            or not all(is_int(d) for d in wt.shape):
        return OIHW
    _, cg, kh, kw = logical_weight_shape(wt.shape, attrs)
    if kh * kw == 1 or cg < PACKED_MIN_CHANNELS or int(attrs.get("group", 1)) > PACKED_MAX_GROUPS:
        return OIHW
    xt = types[0]
    if xt is not None and xt.shape is not None \
            and not wants_packed(xt.shape, wt.shape, attrs, wt.dtype, target):
        return OIHW
    return HWOI


def tiling(types: list[TensorType], attrs: dict, target: Target) -> dict:
    """The mode of a conv of these input types on ``target`` (see the package doc) and
    its geometry: the phase plan, row or channel blocks and the workspace's layout."""
    xs, wsh = types[0].shape, logical_weight_shape(types[1].shape, attrs)
    packed = attrs.get("weight_layout", OIHW) == HWOI
    nsp, kernel, strides, dilations, pads, auto_pad = window_params(xs, wsh, attrs)
    out_sp, pb, pe = window_geometry(xs[2:], kernel, strides, dilations, pads, auto_pad)
    n, c, m, g = int(xs[0]), int(xs[1]), int(wsh[0]), int(attrs.get("group", 1))
    cg, mg = c // g, m // g
    item = np.dtype(types[0].dtype).itemsize
    kernel = [int(k) for k in kernel]
    in_sp = [int(d) for d in xs[2:]]
    padded = any(pb) or any(pe)
    depthwise = cg == 1 and mg == 1
    t = dict(n=n, c=c, m=m, g=g, cg=cg, mg=mg, kernel=kernel, strides=strides,
             dilations=dilations, out=out_sp)
    if all(k == 1 for k in kernel) and all(s == 1 for s in strides) and not padded:
        t.update(mode="pointwise", workspace=0)
        return t
    tile = nsp == 2 and winograd.choose_tile(c, m, g, kernel, strides, dilations, out_sp,
                                             types[0].dtype,
                                             winograd.thresholds(target.vector_class))
    if tile:
        t.update(mode="winograd", pb=[int(p) for p in pb],
                 **winograd.geometry(c, m, out_sp, tile, item))
        return t
    if nsp == 2 and not depthwise and (packed or prod(kernel) == 1):
        plan = phase_plan(in_sp, out_sp, kernel, strides, dilations, pb)
        direct = plan["wq"] == out_sp[1]   # no junk columns: accumulate in Y itself
        if packed and _stacks_taps(c, m, g, plan, item):
            base = phase_bytes(plan, c + 1, item)   # + a row of ones: the bias
            partial = align((len(plan["taps"]) * m * plan["plane"] + plan["slack"]) * item)
            t.update(mode="stacked", plan=plan, direct=direct, part_off=base,
                     acc_off=base + partial,
                     workspace=base + partial + (0 if direct else align(m * out_sp[0] * plan["wq"] * item)))
            return t
        base = phase_bytes(plan, c, item)
        t.update(mode="taps", plan=plan, direct=direct, acc_off=base,
                 workspace=base + (0 if direct else align(m * out_sp[0] * plan["wq"] * item)))
        return t
    if packed:
        raise ValueError(f"packed Conv weights are only read by the per-tap kernel (2-D, not "
                         f"depthwise); got kernel {kernel}, group {g}")
    if nsp != 2 or (all(k == 1 for k in kernel) and not depthwise):
        # generic N-D im2col (and strided 1x1): padded copy + strided window views
        psp = [max(in_sp[i] + pb[i] + pe[i],
                   (out_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1)
               for i in range(nsp)]
        pe = [psp[i] - in_sp[i] - pb[i] for i in range(nsp)]
        t.update(pb=pb, pe=pe, psp=psp, padded=bool(padded))
        xpad = align(c * prod(psp) * item) if padded else 0
        if depthwise:
            t.update(mode="depthwise", tmp_off=xpad,
                     workspace=xpad + align(c * prod(out_sp) * item))
        else:
            per_row = c * prod(kernel) * prod(out_sp[1:]) * item
            rows = max(1, min(out_sp[0], BLOCK_BYTES // max(per_row, 1)))
            t.update(mode="im2col", rows=rows, lrow=prod(out_sp[1:]), buf_off=xpad,
                     workspace=xpad + align(per_row * rows))
        return t
    # 2-D: stride-phase layout (see phases.phase_plan), every tap a contiguous run
    plan = phase_plan(in_sp, out_sp, kernel, strides, dilations, pb)
    t.update(plan=plan)
    base = phase_bytes(plan, c, item)
    wq, ntaps = plan["wq"], len(plan["taps"])
    if depthwise:
        run = out_sp[0] * wq * item
        # channels per block: their column block (taps x run each) stays in cache
        chunk = max(1, min(c, DW_BLOCK_BYTES // (ntaps * run)))
        acc = align(c * run)
        t.update(mode="depthwise_wide", chunk=chunk, acc_off=base, cols_off=base + acc,
                 workspace=base + acc + align(chunk * ntaps * run))
    else:
        exact = _exact_columns(out_sp[1], wq)
        width = out_sp[1] if exact else wq
        per_row = (c * ntaps + 1) * width * item   # + a row of ones: the bias in the GEMM
        per_row_out = 0 if exact else m * wq * item
        rows = max(1, min(out_sp[0], BLOCK_BYTES // (per_row + per_row_out)))
        t.update(mode="wide", rows=rows, buf_off=base, exact=exact,
                 out_off=base + align(per_row * rows))
        t["workspace"] = t["out_off"] + align(per_row_out * rows)
    return t

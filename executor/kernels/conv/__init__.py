"""Conv: a GEMM per kernel tap (accumulating), im2col + GEMM, pointwise and depthwise paths.

Mode by shape (chosen in the tiling, once per shape):

- ``pointwise`` 1x1, stride 1, no padding: one GEMM per image and group.
- ``taps`` 2-D, weights packed by the ``pack-weights`` pass (or a single tap): the
  padded input is split into stride phases so that each tap reads one contiguous
  run, and each tap is one GEMM that adds into the output (no im2col copy).
- ``stacked`` 2-D, stride 1, packed weights, far fewer output than input channels
  (DenseNet's 128 -> 32): one GEMM with every tap's weights stacked (taps * M rows)
  over the padded input read once, then one strided sum of the taps' shifted partial
  outputs (the "kn2row" formulation: the GEMM reads the input once instead of once per
  tap, and has taps * M rows instead of M).
- ``winograd`` 3x3, stride 1, ungrouped, both channel counts >= 64 and an output of
  enough tiles: Winograd F(4x4, 3x3) or F(2x2, 3x3), a quarter or 0.44 of the
  multiply-adds, every transform a small GEMM (``winograd.py``; the weights are
  transformed once, in ``prepare``).
- ``wide`` other 2-D: im2col of the tap runs, then one GEMM per group.
- ``depthwise_wide`` / ``depthwise``: one multiply-add per tap.
- ``im2col`` N-D and the rest: copy the windows, then one GEMM.

The GEMM-based modes write the bias (and a fused residual) first and let the
GEMM accumulate onto it, so the epilogue is at most one more pass (Relu).
"""
from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from aircc.compiler.ir.graph import TensorType
from aircc.executor.kernels._common import (
    BLOCK_BYTES, align, carve, check_window_attrs, ensure_tiling, epilogue, is_int, pad_into,
    pad_into_phases,
    phase_bytes, phase_plan, prod, relu, view, window_attrs, window_geometry, window_out_dims,
    workspace)
from aircc.executor.device.prepared import prepared_array
from aircc.executor.kernels import winograd
from aircc.executor.kernels.blas import gemm
from aircc.executor.kernels.registry import InferContext, op

#: Bytes of depthwise column block per channel block (a core's L2 on this machine: 0.97 of
#: 512 KiB's time for ShuffleNet, A/B in one process).
DW_BLOCK_BYTES = 1 << 20

#: ``weight_layout`` of weights packed per tap: (kH, kW, M, C/group).
PACKED = "HWOI"

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


def _stacks_taps(c: int, m: int, g: int, plan: dict, itemsize: int) -> bool:
    """Whether a 2-D conv with this phase plan runs in the stacked mode (see module doc)."""
    ntaps = len(plan["taps"])
    return (g == 1 and len(plan["phases"]) == 1 and ntaps > 1
            and m <= STACKED_MAX_CHANNEL_SHARE * c
            and ntaps * m * plan["plane"] * itemsize <= STACKED_MAX_BYTES)


def _plan_of(x_shape, w_shape, attrs, dtype):
    """(output spatial shape, phase plan, Winograd tile) of a 2-D conv of static shapes,
    or None."""
    ws = logical_weight_shape(w_shape, attrs)
    if len(x_shape) != 4 or not all(is_int(d) for d in (*x_shape, *ws)):
        return None
    nsp, kernel, strides, dilations, pads, auto_pad = Conv._params(x_shape, ws, attrs)
    out_sp, pb, _ = window_geometry(x_shape[2:], kernel, strides, dilations, pads, auto_pad)
    tile = winograd.choose_tile(int(x_shape[1]), int(ws[0]), int(attrs.get("group", 1)),
                                kernel, strides, dilations, out_sp, dtype)
    return out_sp, phase_plan([int(d) for d in x_shape[2:]], out_sp, [int(k) for k in kernel],
                              strides, dilations, pb), tile


#: A conv with fewer multiply-adds than this runs better as one im2col GEMM (``wide``)
#: than as a GEMM per tap: each of the nine BLAS calls starts and joins its threads, and
#: with few channels each has a short inner dimension.  Measured per shape, wide / taps:
#: 0.81-0.96 below 50 M multiply-adds (Inception's 14 x 14 and 13 x 13 convs, strided
#: ones), 0.98-1.07 above 60 M (ResNet's and VGG's).
TAPS_MIN_MACS = 50_000_000


def _exact_columns(out_width: int, wq: int) -> bool:
    """Whether a wide-mode row of ``wq`` columns holds junk enough to gather exact ones."""
    return out_width * EXACT_MIN_WIDTH_SHARE < wq


def wants_packed(x_shape, w_shape, attrs, dtype=np.float32) -> bool:
    """Whether a 2-D conv of these shapes runs best on weights packed per tap (the taps
    or stacked mode) rather than in the wide or Winograd mode on ONNX's layout: the
    stacked mode always; otherwise not when Winograd takes it, when the output is narrow
    enough for the wide mode's exact columns (``EXACT_MIN_WIDTH_SHARE``) or the work
    small (``TAPS_MIN_MACS``).  Unknown shapes (dynamic mode) take the per-tap kernel."""
    found = _plan_of(x_shape, w_shape, attrs, dtype)
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


def logical_weight_shape(ws, attrs) -> tuple:
    """The ONNX (M, C/group, kH, kW) shape of a Conv weight in either layout."""
    if attrs.get("weight_layout", "OIHW") == PACKED and len(ws) == 4:
        return (ws[2], ws[3], ws[0], ws[1])
    return tuple(ws)


def windows(xp: np.ndarray, kernel, strides, dilations, out_sp, start0: int = 0) -> np.ndarray:
    """Strided view (C, *kernel, *out_sp) of the sliding windows of ``xp`` (C, *padded).

    ``start0`` offsets the first spatial axis (first output row of a block).
    """
    nsp = len(kernel)
    st = xp.strides
    base = xp[(slice(None), slice(start0 * strides[0], None))]
    shape = (xp.shape[0], *kernel, *out_sp)
    strd = (st[0], *(st[1 + i] * dilations[i] for i in range(nsp)),
            *(st[1 + i] * strides[i] for i in range(nsp)))
    return as_strided(base, shape=shape, strides=strd, writeable=False)


@op("Conv", since=1, engine="cube")
class Conv:
    """N-D convolution with groups, dilations, strides, pads / auto_pad and optional bias."""

    @staticmethod
    def _params(x_shape, w_shape, attrs):
        nsp = len(x_shape) - 2
        kernel = list(attrs.get("kernel_shape") or w_shape[2:])
        strides, dilations, pads, auto_pad = window_attrs(attrs, nsp, kernel)
        return nsp, kernel, strides, dilations, pads, auto_pad

    @staticmethod
    def infer(ctx: InferContext) -> list[TensorType]:
        xt, wt = ctx.input_type(0), ctx.input_type(1)
        xs, ws = ctx.input_shape(0), ctx.input_shape(1)
        layout = ctx.attrs.get("weight_layout", "OIHW")
        if layout not in ("OIHW", PACKED) or (layout == PACKED and len(ws) != 4):
            ctx.fail(f"weight_layout '{layout}' is not supported for W {ws}")
        ws = logical_weight_shape(ws, ctx.attrs)
        if len(xs) < 3 or len(ws) != len(xs):
            ctx.fail(f"X {xs} and W {ws} must have the same rank >= 3")
        nsp, kernel, strides, dilations, pads, auto_pad = Conv._params(xs, ws, ctx.attrs)
        check_window_attrs(ctx, nsp, kernel, strides, dilations, pads)
        if not all(is_int(k) for k in kernel):
            ctx.fail("kernel shape must be known")
        g = int(ctx.attrs.get("group", 1))
        if is_int(xs[1]) and is_int(ws[1]) and xs[1] != ws[1] * g:
            ctx.fail(f"X has {xs[1]} channels but W {ws} with group={g} expects {ws[1] * g}")
        if is_int(ws[0]) and ws[0] % g:
            ctx.fail(f"{ws[0]} output channels are not divisible by group={g}")
        if ctx.has_input(2):
            bs = ctx.input_shape(2)
            if len(bs) != 1 or (is_int(bs[0]) and is_int(ws[0]) and bs[0] != ws[0]):
                ctx.fail(f"bias shape {bs} does not match {ws[0]} output channels")
        if xt.dtype != wt.dtype:
            ctx.fail(f"X is {xt.dtype} but W is {wt.dtype}")
        out_sp = window_out_dims(ctx, xs[2:], kernel, strides, dilations, pads, auto_pad)
        return [TensorType(xt.dtype, (xs[0], ws[0], *out_sp))]

    @staticmethod
    def tiling(types, attrs) -> dict:
        xs, wsh = types[0].shape, logical_weight_shape(types[1].shape, attrs)
        packed = attrs.get("weight_layout", "OIHW") == PACKED
        nsp, kernel, strides, dilations, pads, auto_pad = Conv._params(xs, wsh, attrs)
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
                                                 types[0].dtype)
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
        # 2-D: stride-phase layout (see _common.phase_plan), every tap a contiguous run
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

    @staticmethod
    def prepare(ins, outs, attrs, tiling, ws, constant, prepared=None):
        """The wide, stacked and Winograd modes with constant weights (and bias): their
        GEMM operand made once, in device memory (``prepared``) when it is not a view
        of the weights."""
        if not tiling or tiling.get("mode") not in ("wide", "stacked", "winograd") \
                or not constant[1]:
            return None
        w = ins[1]
        if tiling["mode"] == "winograd":
            m, wo = tiling["tile"], Conv.onnx_weights(w, attrs)
            u = prepared_array(prepared, ("winograd", m, w.ctypes.data, w.shape, w.dtype.str),
                               winograd.weights_shape(wo.shape, m), w.dtype,
                               lambda out: winograd.weights(wo, m, out))
            return lambda: Conv._winograd(ins, outs, attrs, tiling, ws, u)
        if len(ins) > 2 and ins[2] is not None and not constant[2]:
            return None
        b = ins[2] if len(ins) > 2 else None
        make = Conv.stacked_weights if tiling["mode"] == "stacked" else Conv.wide_weights
        operand = make(w, b, tiling)
        if not np.shares_memory(operand, w):   # a new array (the bias as a column): on the device
            key = (tiling["mode"], w.ctypes.data, w.shape, w.dtype.str, b.ctypes.data, operand.shape)
            operand = prepared_array(prepared, key, operand.shape, operand.dtype,
                                     lambda out, src=operand: np.copyto(out, src))
        if tiling["mode"] == "stacked":
            return lambda: Conv._stacked(ins, outs, attrs, tiling, ws, operand)
        return lambda: Conv._run_with_epilogue(ins, outs, attrs, tiling, ws, operand)

    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws) -> None:
        t = ensure_tiling(Conv, tiling, ins, attrs)
        if t["mode"] in ("pointwise", "taps"):
            Conv._gemm_modes(ins, outs, attrs, t, ws)
            return
        if t["mode"] == "stacked":
            Conv._stacked(ins, outs, attrs, t, ws)
            return
        if t["mode"] == "winograd":
            Conv._winograd(ins, outs, attrs, t, ws)
            return
        Conv._run_with_epilogue(ins, outs, attrs, t, ws)

    @staticmethod
    def onnx_weights(w: np.ndarray, attrs) -> np.ndarray:
        """The weights in ONNX's (M, C/group, kH, kW) layout (a view of packed ones)."""
        return w.transpose(2, 3, 0, 1) if attrs.get("weight_layout", "OIHW") == PACKED else w

    @staticmethod
    def _winograd(ins, outs, attrs, t, ws, u=None) -> None:
        """Winograd F(m, 3) per image (``winograd.run``: bias added in its last copy),
        then the fused residual and Relu.  Unprepared (weights not constant), the
        weights are transformed on every call."""
        x, y = ins[0], outs[0]
        b = ins[2] if len(ins) > 2 else None
        if u is None:
            u = winograd.weights(Conv.onnx_weights(ins[1], attrs), t["tile"])
        ws = workspace(ws, t["workspace"])
        for i in range(t["n"]):
            winograd.run(x[i], u, y[i], b, t["pb"], t, ws)
        epilogue(y, ins[3] if len(ins) > 3 else None, attrs)

    @staticmethod
    def _run_with_epilogue(ins, outs, attrs, t, ws, w3=None) -> None:
        """The non-GEMM-first modes, then the fused epilogue; the wide mode stores its
        result through the Relu when nothing is added after it."""
        relu_store = t["mode"] == "wide" and bool(attrs.get("fused_relu")) and not attrs.get("fused_add")
        Conv._run(ins, outs, attrs, t, ws, relu_store, w3)
        if not relu_store:
            epilogue(outs[0], ins[3] if len(ins) > 3 else None, attrs)

    @staticmethod
    def _gemm_modes(ins, outs, attrs, t, ws) -> None:
        """Pointwise and per-tap GEMMs, accumulating onto the bias and fused residual."""
        x, w, y = ins[0], ins[1], outs[0]
        b = ins[2] if len(ins) > 2 else None
        extra = ins[3] if len(ins) > 3 and attrs.get("fused_add") else None
        if extra is not None and extra.shape != y.shape:
            extra = np.broadcast_to(extra, y.shape)
        with_relu = bool(attrs.get("fused_relu"))
        n, c, m, g, cg, mg = t["n"], t["c"], t["m"], t["g"], t["cg"], t["mg"]
        nsp = len(t["out"])
        bias = None if b is None else b.reshape((m,) + (1,) * nsp)
        if t["mode"] == "pointwise" and g > 1:
            Conv._grouped_pointwise(x, w, y, bias, extra, with_relu, t)
            return
        if t["mode"] == "pointwise":
            l = prod(t["out"])
            wt = w.reshape(1, m, cg)
            taps, run = [(0, 0)], l
        else:
            plan = t["plan"]
            (ho, wo), wq, taps = t["out"], plan["wq"], plan["taps"]
            run = ho * wq
            wt = w.reshape(len(taps), m, cg)
            ws = workspace(ws, t["workspace"])
        for i in range(n):
            yi = y[i]
            if t["mode"] == "pointwise":
                src = [x[i].reshape(c, l)]
                acc, accv = view(yi, (m, l)), yi
            else:
                planes = pad_into_phases(x[i], ws, 0, plan, 0)
                src = [planes[j] for j in range(planes.shape[0])]
                if t["direct"]:
                    acc, accv = view(yi, (m, run)), yi
                else:
                    acc = carve(ws, t["acc_off"], (m, run), x.dtype)
                    accv = acc.reshape(m, ho, wq)[:, :, :wo]
                    acc.reshape(m, ho, wq)[:, :, wo:] = 0   # junk columns: keep them finite
            beta = 1.0
            if extra is not None and bias is not None:
                np.add(extra[i], bias, out=accv)
            elif extra is not None:
                np.copyto(accv, extra[i])
            elif bias is not None:
                np.copyto(accv, bias)
            else:
                beta = 0.0
            for gi in range(g):
                rows, chans = slice(gi * mg, (gi + 1) * mg), slice(gi * cg, (gi + 1) * cg)
                for k, (j, off) in enumerate(taps):
                    gemm(wt[k, rows], src[j][chans, off:off + run], acc[rows],
                         beta=beta if k == 0 else 1.0)
            if with_relu:
                relu(accv, yi)
            elif accv is not yi:
                np.copyto(yi, accv)

    @staticmethod
    def stacked_weights(w, b, t) -> np.ndarray:
        """The stacked mode's GEMM operand (taps * M, C [+ 1]): the packed (kH, kW, M, C)
        weights as rows and, with a bias, one more column holding it on the first tap's
        rows (it meets a row of ones under the input, and is summed in once)."""
        ntaps, m, c = len(t["plan"]["taps"]), t["m"], t["c"]
        rows = w.reshape(ntaps * m, c)
        if b is None:
            return rows
        out = np.zeros((ntaps * m, c + 1), w.dtype)
        out[:, :c] = rows
        out[:m, c] = b
        return out

    @staticmethod
    def _stacked(ins, outs, attrs, t, ws, wst=None) -> None:
        """2-D, stride 1: one GEMM of every tap's weights over the padded input gives each
        tap's partial output over the whole plane; output column p sums tap (a, b)'s
        partial at p + a*dH*Wq + b*dW, which is one strided view (kH, kW, M, run) and one
        reduction.  Junk columns (the plane's padding width) are dropped in the store."""
        x, w, y = ins[0], ins[1], outs[0]
        if wst is None:
            wst = Conv.stacked_weights(w, ins[2] if len(ins) > 2 else None, t)
        ws = workspace(ws, t["workspace"])
        plan, c, m = t["plan"], t["c"], t["m"]
        (ho, wo), wq, plane, slack = t["out"], plan["wq"], plan["plane"], plan["slack"]
        (kh, kw), (dh, dw) = t["kernel"], t["dilations"]
        run, it, k = ho * wq, x.itemsize, wst.shape[1]
        cols = carve(ws, 0, (k, plane), x.dtype)
        part = carve(ws, t["part_off"], (kh * kw * m * plane + slack,), x.dtype)
        if slack:
            part[-slack:] = 0   # read only by the last junk columns: keep them finite
        partial = part[:kh * kw * m * plane].reshape(kh * kw * m, plane)
        taps = as_strided(part, shape=(kh, kw, m, run),
                          strides=((kw * m * plane + dh * wq) * it, (m * plane + dw) * it,
                                   plane * it, it), writeable=False)
        relu_store = bool(attrs.get("fused_relu")) and not attrs.get("fused_add")
        for i in range(t["n"]):
            pad_into_phases(x[i], ws, 0, plan, 0)
            if k > c:
                cols[c] = 1
            np.matmul(wst, cols, out=partial)
            yi = y[i]
            if t["direct"]:
                np.add.reduce(taps, axis=(0, 1), out=view(yi, (m, run)))
                if relu_store:
                    relu(yi, yi)
                continue
            acc = carve(ws, t["acc_off"], (m, run), x.dtype)
            np.add.reduce(taps, axis=(0, 1), out=acc)
            res = acc.reshape(m, ho, wq)[:, :, :wo]
            if relu_store:
                relu(res, yi)
            else:
                np.copyto(yi, res)
        if not relu_store:
            epilogue(y, ins[3] if len(ins) > 3 else None, attrs)

    @staticmethod
    def _grouped_pointwise(x, w, y, bias, extra, with_relu, t) -> None:
        """Grouped 1x1: one batched product over the groups (numpy loops the BLAS calls in
        C), then the bias, residual and Relu in place."""
        n, g, cg, mg = t["n"], t["g"], t["cg"], t["mg"]
        l = prod(t["out"])
        w3 = w.reshape(g, mg, cg)
        for i in range(n):
            yi = y[i]
            np.matmul(w3, x[i].reshape(g, cg, l), out=view(yi, (g, mg, l)))
            if bias is not None:
                np.add(yi, bias, out=yi)
            if extra is not None:
                np.add(yi, extra[i], out=yi)
            if with_relu:
                relu(yi, yi)

    @staticmethod
    def _run(ins, outs, attrs, t, ws, relu_store: bool = False, w3=None) -> None:
        x, w = ins[0], ins[1]
        b = ins[2] if len(ins) > 2 else None
        y = outs[0]
        ws = workspace(ws, t["workspace"])
        n, c, m = t["n"], t["c"], t["m"]
        mode, out_sp = t["mode"], t["out"]
        nsp = len(out_sp)
        bias = None if b is None else b.reshape((m,) + (1,) * nsp)
        if mode in ("wide", "depthwise_wide"):
            for i in range(n):
                planes = pad_into_phases(x[i], ws, 0, t["plan"], 0)
                if mode == "wide":
                    Conv._wide(planes, w, b, y[i], t, ws, relu_store, w3)
                else:
                    Conv._depthwise_wide(planes, w, y[i], bias, t, ws)
            return
        xp = carve(ws, 0, (c, *t["psp"]), x.dtype) if t["padded"] else None
        for i in range(n):
            src = x[i]
            if xp is not None:
                pad_into(xp, src, t["pb"], t["pe"])
                src = xp
            if mode == "depthwise":
                Conv._depthwise(src, w, y[i], t, ws)
            else:
                Conv._im2col(src, w, y[i], t, ws)
        if bias is not None:
            np.add(y, bias, out=y)

    @staticmethod
    def wide_weights(w, b, t) -> np.ndarray:
        """The wide mode's GEMM operand (groups, M/group, K): with one group and a bias,
        the bias is one more column (it meets a row of ones under the columns)."""
        m, g, mg = t["m"], t["g"], t["mg"]
        kk = t["cg"] * len(t["plan"]["taps"])
        if b is not None and g == 1:
            return np.concatenate([w.reshape(1, m, kk), b.reshape(1, m, 1).astype(w.dtype)], axis=2)
        return w.reshape(g, mg, kk)

    @staticmethod
    def _wide(planes, w, b, yi, t, ws, with_relu: bool = False, w3=None) -> None:
        """2-D conv: copy each kernel tap's contiguous run into the column block, one GEMM
        per group, then store the valid columns (through the Relu with ``with_relu``).  With
        one group the bias rides in the GEMM: a row of ones under the columns and the
        bias as one more weight column, so the store is the only pass after it.  ``w3``:
        :meth:`wide_weights`, when the caller made it once."""
        c, m, g, cg, mg = t["c"], t["m"], t["g"], t["cg"], t["mg"]
        (ho, wo), rows = t["out"], t["rows"]
        wq, taps = t["plan"]["wq"], t["plan"]["taps"]
        kk = cg * len(taps)
        ones = b is not None and g == 1
        if w3 is None:
            w3 = Conv.wide_weights(w, b, t)
        bias = None if b is None or ones else b.reshape(m, 1, 1)
        if t.get("exact"):
            Conv._wide_exact(planes, w3, ones, bias, yi, t, ws, with_relu)
            return
        for r0 in range(0, ho, rows):
            nr = min(rows, ho - r0)
            run = nr * wq
            cols = carve(ws, t["buf_off"], (c * len(taps) + ones, run), planes.dtype)
            taps_cols = cols[:c * len(taps)].reshape(c, len(taps), run)
            for k, (j, off) in enumerate(taps):
                start = r0 * wq + off
                np.copyto(taps_cols[:, k], planes[j, :, start:start + run])
            if ones:
                cols[-1] = 1
            acc = carve(ws, t["out_off"], (m, run), planes.dtype)
            np.matmul(w3, view(cols, (g, kk + ones, run)), out=view(acc, (g, mg, run)))
            res = view(acc, (m, nr, wq))[:, :, :wo]
            dst = yi[:, r0:r0 + nr]
            if bias is not None:
                np.add(res, bias, out=dst)
                if with_relu:
                    relu(dst, dst)
            elif with_relu:
                relu(res, dst)
            else:
                np.copyto(dst, res)

    @staticmethod
    def _wide_exact(planes, w3, ones: bool, bias, yi, t, ws, with_relu: bool) -> None:
        """The wide mode without junk columns: each tap's rows are gathered at the output's
        width, and the GEMM (bias riding in it as a row of ones) writes Y's rows itself."""
        c, g, mg = t["c"], t["g"], t["mg"]
        (ho, wo), rows = t["out"], t["rows"]
        wq, taps = t["plan"]["wq"], t["plan"]["taps"]
        kk = w3.shape[2]
        for r0 in range(0, ho, rows):
            nr = min(rows, ho - r0)
            cols = carve(ws, t["buf_off"], (c * len(taps) + ones, nr * wo), planes.dtype)
            taps_cols = cols[:c * len(taps)].reshape(c, len(taps), nr, wo)
            for k, (j, off) in enumerate(taps):
                start = r0 * wq + off
                np.copyto(taps_cols[:, k], planes[j, :, start:start + nr * wq].reshape(c, nr, wq)[:, :, :wo])
            if ones:
                cols[-1] = 1
            dst = yi[:, r0:r0 + nr]
            np.matmul(w3, view(cols, (g, kk, nr * wo)), out=view(dst, (g, mg, nr * wo)))
            if bias is not None:
                np.add(dst, bias, out=dst)
            if with_relu:
                relu(dst, dst)

    @staticmethod
    def _depthwise_wide(planes, w, yi, bias, t, ws) -> None:
        """2-D depthwise: per block of channels, gather each tap's contiguous run into a
        (channels, taps, run) column block, then one batched (1 x taps) @ (taps x run)
        product per channel."""
        c = t["c"]
        (ho, wo), wq, taps = t["out"], t["plan"]["wq"], t["plan"]["taps"]
        run, ntaps, chunk = ho * wq, len(taps), t["chunk"]
        acc_all = carve(ws, t["acc_off"], (c, 1, run), planes.dtype)
        cols_all = carve(ws, t["cols_off"], (chunk, ntaps, run), planes.dtype)
        w3 = w.reshape(c, 1, ntaps)
        for c0 in range(0, c, chunk):
            c1 = min(c, c0 + chunk)
            cols = cols_all[:c1 - c0]
            for k, (j, off) in enumerate(taps):
                np.copyto(cols[:, k], planes[j, c0:c1, off:off + run])
            np.matmul(w3[c0:c1], cols, out=acc_all[c0:c1])
        res = view(acc_all, (c, ho, wq))[:, :, :wo]
        if bias is None:
            np.copyto(yi, res)
        else:
            np.add(res, bias, out=yi)

    @staticmethod
    def _im2col(src, w, yi, t, ws) -> None:
        """Copy the windows of a block of output rows into the workspace, then one GEMM."""
        c, g, cg, mg = t["c"], t["g"], t["cg"], t["mg"]
        kernel, out_sp, rows, lrow = t["kernel"], t["out"], t["rows"], t["lrow"]
        kk = cg * prod(kernel)
        w3 = w.reshape(g, mg, kk)
        for r0 in range(0, out_sp[0], rows):
            nr = min(rows, out_sp[0] - r0)
            cols = carve(ws, t["buf_off"], (c, *kernel, nr, *out_sp[1:]), src.dtype)
            np.copyto(cols, windows(src, kernel, t["strides"], t["dilations"],
                                    [nr, *out_sp[1:]], r0))
            np.matmul(w3, view(cols, (g, kk, nr * lrow)),
                      out=view(yi[:, r0:r0 + nr], (g, mg, nr * lrow)))

    @staticmethod
    def _depthwise(src, w, yi, t, ws) -> None:
        """One output channel per input channel (not 2-D): loop over the kernel window."""
        kernel, strides, dil, out_sp = t["kernel"], t["strides"], t["dilations"], t["out"]
        nsp = len(kernel)
        c = t["c"]
        tmp = carve(ws, t["tmp_off"], (c, *out_sp), yi.dtype)
        wv = w.reshape(c, *kernel)
        st = src.strides
        first = True
        for kpos in itertools.product(*(range(k) for k in kernel)):
            base = src[(slice(None),) + tuple(slice(kpos[j] * dil[j], None) for j in range(nsp))]
            v = as_strided(base, shape=(c, *out_sp),
                           strides=(st[0], *(st[1 + j] * strides[j] for j in range(nsp))),
                           writeable=False)
            wk = wv[(slice(None),) + kpos].reshape((c,) + (1,) * nsp)
            if first:
                np.multiply(v, wk, out=yi)
                first = False
            else:
                np.multiply(v, wk, out=tmp)
                np.add(yi, tmp, out=yi)

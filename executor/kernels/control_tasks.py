"""Device-side control kernels of statically lowered If, Loop and Scan.

Static mode keeps control flow on the device: these kernels set up and
advance loop state in device memory, and the stream walkers branch on it
(``switch`` / ``goto`` / ``label`` tasks).  Kernels named ``*Update`` and
``BranchOut`` write into buffers they take as inputs (loop state defined by
the matching ``*Init``); every value they read is staged first, so a body
output that aliases a loop input is safe.
"""
from __future__ import annotations

import numpy as np

from aircc.errors import ShapeInferenceError

from .numpy_backend import NUMPY

INT64_MAX = np.iinfo(np.int64).max


def _scalar(a: np.ndarray):
    return np.asarray(a).reshape(-1)[0]


def _control(name: str):
    """Register a control kernel of the device dialect (:mod:`aircc.ops.device`); they are
    tested through the control-flow models, not one by one."""
    return NUMPY.kernel(name, since=1, domain="aircc")


@_control("LoopInit")
class LoopInit:
    """ins: M?, cond?, *initial values; outs: iteration, condition, trip count, *carried."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        m, cond, init = ins[0], ins[1], ins[2:]
        outs[0][...] = 0
        outs[1][...] = True if cond is None else bool(_scalar(cond))
        outs[2][...] = INT64_MAX if m is None else int(_scalar(m))
        for dst, src in zip(outs[3:], init):
            np.copyto(dst, src)


@_control("LoopCheck")
class LoopCheck:
    """ins: iteration, condition?, trip count; outs: flag = condition and iteration < trip."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        it, cond, trip = ins
        ok = int(_scalar(it)) < int(_scalar(trip)) and (cond is None or bool(_scalar(cond)))
        outs[0][...] = ok


@_control("LoopUpdate")
class LoopUpdate:
    """ins: iteration, condition, *carried, condition out, *carried out (written into the first)."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        n = attrs["carried"]
        it, cond, carried = ins[0], ins[1], ins[2:2 + n]
        cond_out, carried_out = ins[2 + n], ins[3 + n:3 + 2 * n]
        staged = [np.array(v) for v in carried_out]
        cond[...] = bool(_scalar(cond_out))
        for dst, v in zip(carried, staged):
            np.copyto(dst, v)
        it[...] = int(_scalar(it)) + 1


@_control("LoopFinish")
class LoopFinish:
    """ins: *carried; outs: the loop's results."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        for dst, src in zip(outs, ins):
            np.copyto(dst, src)


@_control("IfInit")
class IfInit:
    """Defines an If's results; the branch taken fills them (BranchOut)."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        return None


@_control("BranchOut")
class BranchOut:
    """ins: *branch results, *If results (written)."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        n = len(ins) // 2
        staged = [np.array(v) for v in ins[:n]]
        for dst, v in zip(ins[n:], staged):
            np.copyto(dst, v)


@_control("BranchFail")
class BranchFail:
    """A branch the compiler found cannot run with the shapes compiled for: fails the run
    with what it found (as InferShape would in dynamic mode)."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        raise ShapeInferenceError(attrs["message"])


@_control("ScanInit")
class ScanInit:
    """ins: *initial states; outs: iteration, trip (= scan length), *states, *slices, *scan outputs."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        outs[0][...] = 0
        outs[1][...] = attrs["length"]
        for dst, src in zip(outs[2:], ins):
            np.copyto(dst, src)


@_control("ScanSlice")
class ScanSlice:
    """ins: iteration, *scan inputs, *slice buffers (written): slice k of each input.

    It runs on the home stream before the body streams are released, so the
    slices are in place before any body task reads them."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        m = (len(ins) - 1) // 2
        t, length = int(_scalar(ins[0])), attrs["length"]
        if t >= length:      # the check that ends the loop runs this too: nothing to slice
            return
        for k, (x, dst) in enumerate(zip(ins[1:1 + m], ins[1 + m:])):
            idx = length - 1 - t if attrs["directions"][k] else t
            np.copyto(dst, np.take(x, idx, axis=attrs["axes"][k]))


@_control("ScanUpdate")
class ScanUpdate:
    """ins: iteration, *states, *scan outputs, *body states, *body scan values (written into the first)."""
    @staticmethod
    def kernel(ins, outs, attrs, tiling, ws):
        n, k = attrs["states"], attrs["scans"]
        it = ins[0]
        states, scans = ins[1:1 + n], ins[1 + n:1 + n + k]
        body_states = [np.array(v) for v in ins[1 + n + k:1 + 2 * n + k]]
        body_scans = ins[1 + 2 * n + k:]
        t, length = int(_scalar(it)), attrs["length"]
        for j, (dst, v) in enumerate(zip(scans, body_scans)):
            idx = length - 1 - t if attrs["directions"][j] else t
            index = [slice(None)] * dst.ndim
            index[attrs["axes"][j]] = idx
            dst[tuple(index)] = v
        for dst, v in zip(states, body_states):
            np.copyto(dst, v)
        it[...] = t + 1

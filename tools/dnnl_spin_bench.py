"""Measure OpenMP's wait policy around oneDNN calls, one child process per policy.

libgomp reads ``OMP_WAIT_POLICY`` / ``GOMP_SPINCOUNT`` once, when it is loaded, so each
policy runs in its own interpreter.  For each it reports, in microseconds (median of
``--reps`` rounds):

- ``conv_small`` / ``conv_big``: a NHWC convolution called back to back (1x16x28x28 ->
  16, and 1x64x56x56 -> 64, 3x3);
- ``gemm_alone``: numpy's 256x256 f32 GEMM (OpenBLAS threads) with no oneDNN call before;
- ``gemm_after``: the same GEMM right after a oneDNN convolution returned;
- ``add_after``: a 256K-element numpy add right after the convolution.

Usage: ``python tools/dnnl_spin_bench.py [--threads N] [--reps R]``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

POLICIES = {
    "libgomp default": {"_PRELOAD_GOMP": "1"},
    "aircc default": {},
    "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
    "SPINCOUNT=1000": {"GOMP_SPINCOUNT": "1000"},
    "SPINCOUNT=100000": {"GOMP_SPINCOUNT": "100000"},
}


def child(threads: int, reps: int) -> dict:
    import ctypes

    if os.environ.get("_PRELOAD_GOMP"):
        ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)     # libgomp's own defaults
    import numpy as np
    from aircc.executor.kernels.dnnl import library, ops
    from aircc.executor.kernels.dnnl.enums import Arg
    from aircc.executor.kernels.dnnl.memory import MemoryDesc

    library.set_threads(threads)
    f32 = np.float32

    def conv(c: int, hw: int):
        src = MemoryDesc.from_tag((1, c, hw, hw), f32, "nhwc")
        dst = MemoryDesc.from_tag((1, c, hw, hw), f32, "nhwc")
        pd = ops.convolution(src, MemoryDesc.from_tag((c, c, 3, 3), f32, "any"), dst,
                             pads_begin=(1, 1), pads_end=(1, 1))
        rng = np.random.default_rng(0)
        return pd.bind({Arg.src: rng.random(src.size // 4, f32),
                        Arg.weights: rng.random(pd.weights_md().size // 4, f32),
                        Arg.dst: np.empty(dst.size // 4, f32)})

    small, big = conv(16, 28), conv(64, 56)
    a = np.random.rand(256, 256).astype(f32)
    x = np.random.rand(1 << 18).astype(f32)
    out = {}

    def median(fn, n: int) -> float:
        times = []
        for _ in range(n):
            times.append(fn())
        times.sort()
        return times[len(times) // 2] * 1e6

    def timed(call):
        def run():
            t = time.perf_counter()
            call()
            return time.perf_counter() - t
        return run

    for _ in range(20):
        small(), big(), a @ a
    out["conv_small"] = median(timed(small), reps * 10)
    out["conv_big"] = median(timed(big), reps)

    def gemm_alone():
        time.sleep(0.002)
        return timed(lambda: a @ a)()

    def after(then):
        def run():
            small()
            return timed(then)()
        return run

    out["gemm_alone"] = median(gemm_alone, reps)
    out["gemm_after"] = median(after(lambda: a @ a), reps)
    out["add_after"] = median(after(lambda: np.add(x, x, out=x)), reps)
    out["add_alone"] = median(lambda: (time.sleep(0.002), timed(lambda: np.add(x, x, out=x))())[1],
                              reps)
    out["policy"] = library.spin_policy()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        print(json.dumps(child(ns.threads, ns.reps)))
        return 0
    keys = ("conv_small", "conv_big", "gemm_alone", "gemm_after", "add_alone", "add_after")
    print(f"load average {os.getloadavg()[0]:.2f}, oneDNN threads {ns.threads}, median us")
    print(f"{'policy':18}" + "".join(f"{k:>12}" for k in keys))
    for name, env in POLICIES.items():
        clean = {k: v for k, v in os.environ.items()
                 if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "_PRELOAD_GOMP")}
        result = subprocess.run([sys.executable, __file__, "--child", "--threads",
                                 str(ns.threads), "--reps", str(ns.reps)],
                                env={**clean, **env}, capture_output=True, text=True, check=True)
        r = json.loads(result.stdout)
        print(f"{name:18}" + "".join(f"{r[k]:12.1f}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())

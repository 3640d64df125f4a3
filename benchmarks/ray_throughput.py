"""Rows per second of batch inference on Ray (aircc.distributed) with 1 and 2 actors.

    python benchmarks/ray_throughput.py                       # light squeezenet, 512 rows
    python benchmarks/ray_throughput.py --model resnet50 --rows 256 --actors 1,2,4
    python benchmarks/ray_throughput.py --json out.json

A local Ray instance gets every CPU of the machine (or ``--cpus``); each actor gets
``--actor-cpus`` of them (its aircc threads and device are sized to them) and loads the
light model (the onnx package's, batch 1: each actor runs its rows one at a time).
Reported for each actor count: rows per second over the whole run (actors' start-up and
the model's load included) and over the window from the first batch's start to the last
batch's end, with the speed-up over one actor.  Outputs are checked against a run of
the same rows in this process.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

import aircc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))


def light_model(name: str):
    """The compiled light model ``name`` of the onnx package."""
    from testdata import light_path

    return aircc.compile(light_path(name))


def measure(om, rows: np.ndarray, name: str, actors: int, actor_cpus: float,
            batch_size: int) -> dict:
    """One run with ``actors`` actors: its summary's counts and rates."""
    from aircc.distributed import run_dataset

    job = run_dataset(om, {name: rows}, batch_size=batch_size, actors=actors,
                      cpus_per_actor=actor_cpus, progress=False)
    with job:
        out = job.to_numpy()
    s = job.summary
    return {"actors": actors, "rows": s.rows, "batches": s.batches, "seconds": s.seconds,
            "rows_per_second": s.rows_per_second,
            "rows_per_second_in_window": s.rows_per_second_in_window,
            "actors_used": s.actors_used, "failures": len(s.failures), "outputs": out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="squeezenet", help="a light model of the onnx package")
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--actors", default="1,2", help="actor counts to time, e.g. 1,2,4")
    ap.add_argument("--actor-cpus", type=float, default=1)
    ap.add_argument("--cpus", type=int, default=None, help="CPUs of the local Ray instance")
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the rows here")
    args = ap.parse_args(argv)

    from aircc.distributed import require_ray

    ray = require_ray()
    compiled = light_model(args.model)
    with aircc.load(compiled) as m:
        spec = m.inputs[0]
        out_name = m.outputs[0].name
        x = np.random.default_rng(0).standard_normal(
            [args.rows, *spec.shape[1:]]).astype(spec.dtype)
        reference = np.concatenate([m.run({spec.name: x[i:i + 1]})[out_name]
                                    for i in range(min(args.rows, 16))])
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    results = []
    try:
        for n in [int(a) for a in args.actors.split(",")]:
            r = measure(compiled, x, spec.name, n, args.actor_cpus, args.batch_size)
            out = r.pop("outputs")
            assert np.array_equal(out["row"], np.arange(args.rows)), "rows out of order"
            assert np.array_equal(out[out_name][:len(reference)], reference), "outputs differ"
            results.append(r)
    finally:
        ray.shutdown()
    base = results[0]
    print(f"{args.model}: {args.rows} rows, batch {args.batch_size}, "
          f"{args.actor_cpus:g} CPU per actor, {os.cpu_count()} CPUs here")
    print(f"{'actors':>6} {'rows/s':>9} {'in window':>10} {'speed-up':>9} {'seconds':>8}")
    for r in results:
        r["speedup_in_window"] = r["rows_per_second_in_window"] / base["rows_per_second_in_window"]
        print(f"{r['actors']:>6} {r['rows_per_second']:>9.1f} "
              f"{r['rows_per_second_in_window']:>10.1f} {r['speedup_in_window']:>8.2f}x "
              f"{r['seconds']:>8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "rows": args.rows, "batch_size": args.batch_size,
                       "actor_cpus": args.actor_cpus, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Gears: one static plan per batch size, in one .om (``--dynamic-batch 1,2,4,8``).

As with an offline NPU compiler's dynamic batch, the batch dim is dim 0 of
every input whose dim 0 is symbolic (or given as -1 in ``--input-shape``);
every other dim must be fixed.  Each gear is compiled by the static path;
the gears share one weights region (a weight that differs between gears is
stored once per gear) and, at run time, one arena as large as the largest.
"""
from __future__ import annotations

import time

import numpy as np

from aircc.errors import CompileOptionError

from ..frontend.onnx_import import import_onnx, load_onnx

MIN_GEARS, MAX_GEARS = 2, 100


def gear_shapes(graph_inputs: dict[str, tuple], given: dict, batch: int) -> dict[str, list]:
    """Input shapes of the gear for ``batch``."""
    shapes = {}
    for name, shape in graph_inputs.items():
        dims = list(given.get(name, shape))
        if dims and (isinstance(dims[0], str) or dims[0] == -1):
            dims[0] = batch
        shapes[name] = dims
    return shapes


def _merge_weights(gears: list[tuple[int, dict, dict]]) -> tuple[dict[str, np.ndarray], int]:
    """One weights table for all gears; rewrites each gear's weight operands to it."""
    merged: dict[str, np.ndarray] = {}
    offsets: dict[str, int] = {}
    end = 0
    for batch, sections, weights in gears:
        remap: dict[int, int] = {}
        plan = sections["memory_plan"]
        for w in plan["weights"]:
            arr = weights[w["name"]]
            name = w["name"]
            if name in merged and not (merged[name].dtype == arr.dtype and merged[name].shape == arr.shape
                                       and np.array_equal(merged[name], arr)):
                name = f"{name}@batch{batch}"
            if name not in merged:
                merged[name] = arr
                offsets[name] = end
                end += (arr.nbytes + plan["alignment"] - 1) // plan["alignment"] * plan["alignment"]
            remap[w["offset"]] = offsets[name]
            w["name"], w["offset"] = name, offsets[name]
        for lst in sections["tasks"]["lists"]:
            for task in lst:
                for key in ("inputs", "outputs"):
                    for o in task.get(key, []):
                        if o and o["mem"] == "weights":
                            o["offset"] = remap[o["offset"]]
                for key in ("src", "dst"):
                    if task.get(key) and task[key]["mem"] == "weights":
                        task[key]["offset"] = remap[task[key]["offset"]]
    for _, sections, _ in gears:
        sections["memory_plan"]["weights_bytes"] = end
    return merged, end


def compile_gears(source, options):
    from ..driver import CompileOptions, _finish, _io, _lower_static, optimize

    sizes = sorted(set(int(b) for b in options.dynamic_batch))
    if not MIN_GEARS <= len(sizes) <= MAX_GEARS or sizes[0] < 1:
        raise CompileOptionError(f"--dynamic-batch needs {MIN_GEARS} to {MAX_GEARS} distinct positive "
                                 f"batch sizes, got {options.dynamic_batch}")
    t0 = time.perf_counter()
    model = load_onnx(source)
    probe = import_onnx(model)
    inputs = {n: probe.types[n].shape for n in probe.inputs}
    batched = [n for n, s in gear_shapes(inputs, options.input_shapes, -7).items() if s and s[0] == -7]
    if not batched:
        raise CompileOptionError("--dynamic-batch needs an input whose dim 0 is symbolic "
                                 "(or -1 in --input-shape)")
    gears, seconds, graph, io_of = [], {}, None, {}
    for b in sizes:
        opts = CompileOptions(streams=options.streams, mode="static", passes=options.passes,
                              min_branch_bytes=options.min_branch_bytes,
                              input_shapes=gear_shapes(inputs, options.input_shapes, b))
        graph = optimize(model, opts)
        kernels = len(graph.nodes)
        gear_io = (_io(graph, graph.inputs), _io(graph, graph.outputs))
        sections, weights, facts = _lower_static(graph, opts, seconds)
        gears.append((b, sections, weights))
        io_of[b] = gear_io
        facts_last = facts
    weights, weights_bytes = _merge_weights(gears)
    largest = gears[-1][1]
    plans = [{"batch": b, "inputs": io_of[b][0], "outputs": io_of[b][1], "tasks": s["tasks"],
              "memory_plan": s["memory_plan"], "tiling": s["tiling"]} for b, s, _ in gears]
    sections = {"tasks": largest["tasks"], "memory_plan": largest["memory_plan"],
                "tiling": largest["tiling"],
                "gears": {"batch_inputs": batched, "sizes": sizes, "plans": plans}}
    inputs_io = [dict(i, shape=["batch", *i["shape"][1:]] if i["name"] in batched else i["shape"])
                 for i in io_of[sizes[0]][0]]
    facts = dict(facts_last, gears=sizes, weights_bytes=weights_bytes,
                 arena_bytes=max(p["memory_plan"]["arena_bytes"] for p in plans))
    return _finish(graph, "static", sections, weights, facts, seconds, t0,
                   (inputs_io, _gear_outputs(io_of)), kernels)


def _gear_outputs(io_of: dict[int, tuple]) -> list[dict]:
    """Outputs whose dim 0 equals the batch size in every gear get the symbol ``batch``."""
    result = []
    for k, o in enumerate(io_of[min(io_of)][1]):
        shape = list(o["shape"])
        if shape and all(io[1][k]["shape"][0] == b for b, io in io_of.items()):
            shape[0] = "batch"
        result.append(dict(o, shape=shape))
    return result

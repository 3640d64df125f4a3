"""The benchmark's results as markdown: one table per suite (every target's latency, ratio
and GFLOP/s beside onnxruntime's), the geometric means, the failures, the contended run,
the serving table (``serving.py``), compile scaling and load time."""
from __future__ import annotations

SUITE_TITLES = {"light": "the light models", "samples": "the samples", "broader": "the broader suite"}


def row_line(r: dict, gemm: float) -> str | None:
    """One row as the benchmark prints it while it runs (None for a row not timed)."""
    if "targets" not in r:
        return None
    parts = [f"{r['model']:<24} {r['mode']:<8} ort {r['onnxruntime_ms']:8.2f} ms"]
    for name, t in r["targets"].items():
        fb = f" fallback {t['fallback_nodes']}" if t["fallback_nodes"] else ""
        cos = f" cosine to f32 {t['cosine_to_float32']:.6f}" if "cosine_to_float32" in t else ""
        parts.append(f"{name} {t['aircc_ms']:8.2f} ms ratio {t['ratio']:5.2f}{fb}{cos}")
    if r.get("gmacs"):
        parts.append("GFLOP/s ort {:.0f}, {} (GEMM {:.0f})".format(r["onnxruntime_gflops"], ", ".join(
            f"{name} {t['aircc_gflops']:.0f}" for name, t in r["targets"].items()), gemm))
    if r.get("others_cpu_cores") is not None:
        parts.append(f"other processes {r['others_cpu_cores']:.2f} cores")
    return "  ".join(parts)


def _machine_line(results: dict) -> str:
    m = results["machine"]
    return (f"Machine: {m['cpu']}, {m['cpus']} CPUs, Python {m['python']}, numpy {m['numpy']} "
            f"(OpenBLAS kernels {m.get('blas_kernels', 'unknown')}; float32 GEMM "
            f"{m.get('gemm_gflops', 0):.0f} GFLOP/s at 1024^3), onnxruntime {m['onnxruntime']}; "
            f"{results['rounds']} rounds, each a block of at least {results.get('min_block', 2)} timed "
            f"runs of each engine after one untimed (fast models more, until "
            f"{results.get('min_seconds', 0):g} s of timed runs, up to {results.get('max_block', 400)}), "
            f"each block started with the other engines' threads idle; medians; "
            + (f"device workers and the host thread on CPU {','.join(map(str, results['device_cpus']))}."
               if results.get("device_cpus") else "nothing pinned."))


def _targets_line(results: dict) -> str | None:
    info, skipped = results.get("target_info") or {}, results.get("skipped_targets") or {}
    if not info and not skipped:
        return None
    line = "Targets: " + "; ".join(f"{name}: {what}" for name, what in info.items()) + "."
    if skipped:
        line += " Skipped: " + "; ".join(f"{name} ({why})" for name, why in skipped.items()) + "."
    return line


def _fallback(t: dict) -> str:
    ops = t.get("fallback_ops") or {}
    return f"{t['fallback_nodes']} ({', '.join(f'{op} {n}' for op, n in ops.items())})" if ops else "0"


def _cores(row: dict) -> str:
    return f"{row['others_cpu_cores']:.2f}" if row.get("others_cpu_cores") is not None else "-"


def _table(rows: list[dict], targets: list[str]) -> list[str]:
    many = len(targets) > 1
    reduced = [t for t in targets if "@" in t]      # a precision mode: its agreement with f32

    def label(what: str, t: str) -> str:
        return f"{what} {t}" if many else what

    header = (["model", "mode"] + [label("aircc", t) + " ms" for t in targets] + ["onnxruntime ms"]
              + [label("ratio", t) for t in targets]
              + ["host us/inference", "peak device MB", "compile s", "GMAC"]
              + [label("aircc", t) + " GFLOP/s" for t in targets]
              + ["onnxruntime GFLOP/s", "fallback nodes"]
              + [label("cosine to f32", t) for t in reduced] + ["other processes' CPU"])
    lines = ["| " + " | ".join(header) + " |",
             "|" + "".join(" --- |" if h in ("model", "mode", "fallback nodes") else " ---: |"
                           for h in header)]
    for r in rows:
        if "ratio" not in r:
            continue
        ts = [r.get("targets", {}).get(t) for t in targets] if "targets" in r else [r]
        cells = [r["model"], r["mode"]]
        cells += [f"{t['aircc_ms']:.2f}" if t else "-" for t in ts] + [f"{r['onnxruntime_ms']:.2f}"]
        cells += [f"{t['ratio']:.2f}" if t else "-" for t in ts]
        cells += [f"{r['host_us_per_inference']:.0f}", f"{r['peak_device_bytes'] / (1 << 20):.1f}",
                  f"{r['compile_s']:.2f}", f"{r['gmacs']:.3f}" if r.get("gmacs") else "-"]
        cells += [f"{t['aircc_gflops']:.0f}" if t and r.get("gmacs") else "-" for t in ts]
        cells.append(f"{r['onnxruntime_gflops']:.0f}" if r.get("gmacs") else "-")
        cells.append("; ".join((f"{t} " if many else "") + _fallback(x)
                               for t, x in zip(targets, ts) if x and "fallback_nodes" in x) or "-")
        cells += [f"{x['cosine_to_float32']:.6f}" if x and "cosine_to_float32" in x else "-"
                  for t, x in zip(targets, ts) if t in reduced]
        cells.append(_cores(r))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _contended(results: dict) -> list[str]:
    rows = [c for c in results.get("contended", []) if "contended" in c]
    if not rows:
        return []
    lines = ["", "Contended: " + rows[0]["neighbour"]["what"] + "; each model timed quiet, then "
             "again with the neighbour running.", "",
             "| model | target | aircc ms quiet | aircc ms contended | onnxruntime ms quiet "
             "| onnxruntime ms contended | ratio quiet | ratio contended | other processes' CPU quiet "
             "| neighbour's share of a core |",
             "| --- | --- |" + " ---: |" * 8]
    for c in rows:
        q, b = c["quiet"], c["contended"]
        for t in q.get("targets", {}):
            if t not in b.get("targets", {}):
                continue
            tq, tb = q["targets"][t], b["targets"][t]
            lines.append(f"| {c['model']} | {t} | {tq['aircc_ms']:.2f} | {tb['aircc_ms']:.2f} | "
                         f"{q['onnxruntime_ms']:.2f} | {b['onnxruntime_ms']:.2f} | {tq['ratio']:.2f} | "
                         f"{tb['ratio']:.2f} | {_cores(q)} | {c['neighbour']['core_share']:.2f} |")
    return lines


def _scaling(results: dict) -> list[str]:
    rows = results["compile_scaling"]
    series = list(dict.fromkeys(c["series"] for c in rows))
    streams: dict[str, int] = {}
    for c in rows:
        streams[c["series"]] = max(streams.get(c["series"], 0), c["streams"])
    lines = ["", "| synthetic nodes | " + " | ".join(
        f"compile s, {name} ({streams[name]} stream{'s' * (streams[name] > 1)})"
        for name in series) + " |", "| ---: |" + " ---: |" * len(series)]
    by_nodes: dict[int, dict] = {}
    for c in rows:
        by_nodes.setdefault(c["nodes"], {})[c["series"]] = c["compile_s"]
    for nodes, times in by_nodes.items():
        lines.append(f"| {nodes} | " + " | ".join(
            f"{times[name]:.2f}" if name in times else "-" for name in series) + " |")
    exponents = results.get("compile_growth_exponent") or {}
    if exponents:
        lines += ["", "Compile time grows as " + ", ".join(
            f"nodes^{e:.2f} on {name}" for name, e in exponents.items())
            + " (least-squares slopes on log-log axes; 1 is linear)."]
    return lines


def serving_row_lines(row: dict) -> list[str]:
    """A served model as the benchmark prints it while it runs."""
    if "in_flight" not in row:
        return [f"{row['model']:<24} serving FAILED " + "; ".join(
            f"{k}: {v}" for k, v in row["errors"].items())]
    lines = []
    for r in row["in_flight"]:
        rates = ", ".join(f"{name} {e['per_second']:.1f}" for name, e in r["engines"].items())
        ratio = f"  ratio {r['ratio']:.2f} to {r['best_peer']}" if "ratio" in r else ""
        lines.append(f"{row['model']:<24} N={r['n']} inferences/s {rates}{ratio}")
    return lines


SERVING_ENGINES = {"aircc": "aircc", "onnxruntime": "onnxruntime", "openvino_f32": "OpenVINO f32",
                 "openvino_default": "OpenVINO default"}


def serving_machine_line(machine: dict, serving: dict) -> str:
    """The CPU, its ISA flags and the engines' versions."""
    flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in serving["isa"].items())
    ov = f"OpenVINO {serving['openvino']}" if serving.get("openvino") else \
        "OpenVINO skipped: " + serving["skipped"].get("openvino", "")
    return (f"Machine: {machine['cpu']}, {machine['cpus']} CPUs ({flags}); onnxruntime "
            f"{machine['onnxruntime']}, {ov}.")


def _serving(results: dict) -> list[str]:
    """The serving table's lines (none where the run served nothing)."""
    serving = results.get("serving")
    if not serving:
        return []
    rows = [m for m in serving["models"] if "in_flight" in m]
    names = [n for n in SERVING_ENGINES if any(n in r["engines"] for m in rows for r in m["in_flight"])]
    precision = next((m["precisions"].get("openvino_default") for m in rows
                      if m.get("precisions", {}).get("openvino_default")), None)
    titles = {**SERVING_ENGINES, "openvino_default": f"OpenVINO default ({precision})"
              if precision else "OpenVINO default"}
    lines = ["", f"### Serving: {', '.join(map(str, serving['in_flight']))} requests in flight", "",
             serving_machine_line(results["machine"], serving),
             f"aircc compiled for {serving['target']}; {serving['rounds']} rounds, each a "
             f"{serving['seconds']:g} s window per engine and N, engines interleaved, each block "
             "started with the other engines' threads idle; inferences/s are medians over the "
             "rounds; latencies (p50 / p99 ms) pool every round's requests; ratio: aircc's "
             "inferences/s over the best float32 peer's (above 1: aircc serves more); "
             "scaling: aircc at N over aircc at 1.", ""]
    header = (["model", "N", "aircc mode"] + [f"{titles[n]} inf/s" for n in names]
              + ["ratio", "best peer", "aircc scaling"] + [f"{titles[n]} p50 / p99 ms" for n in names]
              + ["other processes' CPU"])
    lines += ["| " + " | ".join(header) + " |",
              "| --- | ---: | --- |" + " ---: |" * len(names) + " ---: | --- |"
              + " ---: |" * (len(names) + 2)]
    for m in rows:
        cores = f"{m['others_cpu_cores']:.2f}" if m.get("others_cpu_cores") is not None else "-"
        for r in m["in_flight"]:
            e = r["engines"]
            cells = [m["model"], str(r["n"]), m["aircc_mode"]]
            cells += [f"{e[n]['per_second']:.1f}" if n in e else "-" for n in names]
            cells += [f"{r['ratio']:.2f}" if "ratio" in r else "-",
                      SERVING_ENGINES.get(r.get("best_peer"), "-"),
                      f"{r['aircc_scaling']:.2f}" if "aircc_scaling" in r else "-"]
            cells += [f"{e[n]['p50_ms']:.2f} / {e[n]['p99_ms']:.2f}" if n in e else "-" for n in names]
            cells.append(cores)
            lines.append("| " + " | ".join(cells) + " |")
    failed = [(m["model"], k, v) for m in serving["models"] for k, v in m["errors"].items()]
    if failed:
        lines += ["", "Failed:"] + [f"- {m} [{k}]: {v}" for m, k, v in failed]
    return lines


def markdown(results: dict) -> str:
    """The results of ``run.py`` as the markdown that ``results.md`` holds."""
    if not results["models"] and results.get("serving"):          # --serving-only
        return "\n".join(_serving(results)[1:]) + "\n"
    lines = [_machine_line(results)]
    if (targets_line := _targets_line(results)) is not None:
        lines += ["", targets_line]
    targets = results.get("targets") or ["native"]
    models = results["models"]
    for suite in dict.fromkeys(r.get("suite") for r in models):
        rows = [r for r in models if r.get("suite") == suite]
        if suite:
            lines += ["", f"### {SUITE_TITLES.get(suite, suite).capitalize()}"]
        lines += [""] + _table(rows, targets)
        means = (results.get("geomean_ratio") or {}).get(suite or "", {})
        if suite == "light" and not means and results.get("light_geomean_ratio"):
            means = {targets[0]: results["light_geomean_ratio"]}
        if means:
            lines += ["", f"Geometric mean ratio over {SUITE_TITLES.get(suite, suite)}: " + ", ".join(
                f"{m:.2f}" if len(means) == 1 else f"{t} {m:.2f}" for t, m in means.items())]
        failed = [(r["model"], t, e) for r in rows for t, e in (r.get("errors") or {}).items()]
        if failed:
            lines += ["", "Failed:"] + [f"- {m} [{t}]: {e}" for m, t, e in failed]
    if not models and results.get("light_geomean_ratio"):
        lines += ["", f"Geometric mean ratio over the light models: {results['light_geomean_ratio']:.2f}"]
    lines += _contended(results)
    lines += _serving(results)
    if results.get("compile_scaling"):
        lines += _scaling(results)
    if results.get("load"):
        ld = results["load"]
        lines += ["", f"Loading a .om with {ld['weights_mb']} MB of weights: "
                      f"{1e3 * ld['load_s_median']:.0f} ms (median of 5)."]
    if results.get("ray"):
        ray = results["ray"]
        lines += ["", f"### Batch inference on Ray ({ray['model']}, {ray['rows']} rows, batch "
                      f"{ray['batch_size']}, {ray['actor_cpus']:g} CPU per actor)", "",
                  "| actors | rows/s | rows/s once the actors ran | speed-up | seconds |",
                  "| ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {r['actors']} | {r['rows_per_second']:.1f} | {r['rows_per_second_in_window']:.1f} "
                  f"| {r['speedup_in_window']:.2f}x | {r['seconds']:.2f} |" for r in ray["results"]]
    return "\n".join(lines) + "\n"

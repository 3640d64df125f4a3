"""The benchmark's figure, as a self-contained SVG (no plotting package needed).

Left: each model's latency ratio aircc / onnxruntime (below 1: aircc is faster),
on a log axis so that 0.5 and 2 sit equally far from parity.  Right: compile time
against graph size on log-log axes, one line per series of synthetic graphs, each
with its fitted growth exponent (1 is linear).

    python benchmarks/plot.py benchmarks/results.json benchmarks/results.svg
"""
from __future__ import annotations

import json
import math
import sys
from xml.sax.saxutils import escape

BAR_H, GAP, LABEL_W, PLOT_W = 18, 6, 150, 300
SCALE_W, SCALE_H = 300, 220
FONT = 'font-family="sans-serif" font-size="11"'


def growth_exponent(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of log(time) against log(size): t ~ size ** slope."""
    if len(points) < 2:
        raise ValueError("a growth exponent needs at least two sizes")
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("a growth exponent needs two different sizes")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def _text(x: float, y: float, s: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT} {extra}>{escape(s)}</text>'


def _ratio_panel(models: list[dict], x0: float, y0: float) -> tuple[list[str], float]:
    ratios = [m["ratio"] for m in models]
    lo = min(0.25, min(ratios) / 1.2)
    hi = max(4.0, max(ratios) * 1.2)

    def px(r: float) -> float:
        return x0 + LABEL_W + PLOT_W * (math.log(r) - math.log(lo)) / (math.log(hi) - math.log(lo))

    out = [_text(x0, y0 - 8, "latency ratio aircc / onnxruntime (log axis; < 1: aircc faster)",
                 extra='font-weight="bold"')]
    height = len(models) * (BAR_H + GAP)
    for tick in (0.25, 0.5, 1, 2, 4):
        if lo <= tick <= hi:
            x = px(tick)
            width = 1.5 if tick == 1 else 0.5
            out.append(f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y0 + height:.1f}" '
                       f'stroke="#444" stroke-width="{width}"/>')
            out.append(_text(x, y0 + height + 14, f"{tick:g}", "middle"))
    for i, m in enumerate(models):
        y = y0 + i * (BAR_H + GAP)
        r = m["ratio"]
        a, b = sorted((px(1.0), px(r)))
        color = "#2a7" if r <= 1 else "#d64"
        out.append(_text(x0 + LABEL_W - 6, y + BAR_H - 5, m["model"], "end"))
        out.append(f'<rect x="{a:.1f}" y="{y:.1f}" width="{max(b - a, 1):.1f}" height="{BAR_H}" '
                   f'fill="{color}"><title>{escape(m["model"])}: {r:.2f}</title></rect>')
        out.append(_text(b + 4 if r > 1 else a - 4, y + BAR_H - 5, f"{r:.2f}",
                         "start" if r > 1 else "end"))
    return out, height + 24


COLORS = ["#36c", "#c6c", "#3a9", "#c93"]


def _scaling_panel(series: dict[str, list[tuple[float, float]]], x0: float, y0: float) -> list[str]:
    every = [p for points in series.values() for p in points]
    (n_lo, n_hi) = (min(n for n, _ in every) / 1.5, max(n for n, _ in every) * 1.5)
    (t_lo, t_hi) = (min(t for _, t in every) / 2, max(t for _, t in every) * 2)

    def px(n: float) -> float:
        return x0 + 50 + SCALE_W * (math.log(n) - math.log(n_lo)) / (math.log(n_hi) - math.log(n_lo))

    def py(t: float) -> float:
        return y0 + SCALE_H * (1 - (math.log(t) - math.log(t_lo)) / (math.log(t_hi) - math.log(t_lo)))

    out = [_text(x0, y0 - 8, "compile time against graph size (log-log)", extra='font-weight="bold"'),
           f'<rect x="{x0 + 50:.1f}" y="{y0:.1f}" width="{SCALE_W}" height="{SCALE_H}" '
           f'fill="none" stroke="#444" stroke-width="0.5"/>']
    for n in sorted({n for n, _ in every}):
        out.append(_text(px(n), y0 + SCALE_H + 14, f"{n:,.0f}", "middle"))
    decade = 10.0 ** math.floor(math.log10(t_lo))
    while decade <= t_hi:
        for k in (1, 3):
            t = decade * k
            if t_lo <= t <= t_hi:
                out.append(f'<line x1="{x0 + 46:.1f}" y1="{py(t):.1f}" x2="{x0 + 50:.1f}" y2="{py(t):.1f}" '
                           f'stroke="#444"/>')
                out.append(_text(x0 + 44, py(t) + 4, f"{t:g} s", "end"))
        decade *= 10
    for k, (name, points) in enumerate(series.items()):
        color = COLORS[k % len(COLORS)]
        if k == 0:   # a line of slope 1 through the first series' smallest size
            (n0, t0), n1 = points[0], points[-1][0]
            out.append(f'<line x1="{px(n0):.1f}" y1="{py(t0):.1f}" x2="{px(n1):.1f}" '
                       f'y2="{py(t0 * n1 / n0):.1f}" stroke="#888" stroke-dasharray="4 3"/>')
            out.append(_text(px(n1) - 4, py(t0 * n1 / n0) + 16, "linear", "end", 'fill="#666"'))
        coords = " ".join(f"{px(n):.1f},{py(t):.1f}" for n, t in points)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        for n, t in points:
            out.append(f'<circle cx="{px(n):.1f}" cy="{py(t):.1f}" r="3" fill="{color}">'
                       f'<title>{escape(name)}, {n:,.0f} nodes: {t:.2f} s</title></circle>')
        out.append(_text(x0 + 58, y0 + 16 + 14 * k, f"{name}: t ~ n^{growth_exponent(points):.2f}",
                         extra=f'fill="{color}"'))
    out.append(_text(x0 + 50 + SCALE_W / 2, y0 + SCALE_H + 30, "nodes", "middle"))
    return out


def svg(results: dict) -> str:
    """The figure for a ``results.json`` (its models, and its compile scaling if present)."""
    models = results.get("models", [])
    if not models:
        raise ValueError("no models in the results: nothing to plot")
    parts, height = _ratio_panel(models, 10, 30)
    width = 10 + LABEL_W + PLOT_W + 60
    scaling: dict[str, list[tuple[float, float]]] = {}
    for c in results.get("compile_scaling", []):
        if c["compile_s"] > 0:
            scaling.setdefault(c.get("series", "synthetic"), []).append((c["nodes"], c["compile_s"]))
    scaling = {name: sorted(points) for name, points in scaling.items() if len({n for n, _ in points}) >= 2}
    if scaling:
        parts += _scaling_panel(scaling, width, 30)
        width += 50 + SCALE_W + 30
        height = max(height, SCALE_H + 40)
    machine = results.get("machine", {})
    caption = f"{machine.get('cpu', '?')}, {machine.get('cpus', '?')} CPUs; medians, interleaved in one process"
    parts.append(_text(10, 30 + height + 20, caption, extra='fill="#666"'))
    total_h = 30 + height + 30
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{total_h:.0f}" '
            f'viewBox="0 0 {width:.0f} {total_h:.0f}">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        results = json.load(f)
    with open(argv[1], "w") as f:
        f.write(svg(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What a verification found: per mode, per output, the first diverging node; as values,
as JSON and as the text ``aircc verify`` prints."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .compare import ValueCheck
from .inputs import FeedInfo

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "not applicable"
#: How a bisection ended: a culprit found, none found, or it could not run.
FOUND, NOT_FOUND, FAILED = "found", "not found", "failed"
#: What a bisection exposed: each ONNX node's outputs, or the compiled kernels' outputs.
EVERY_VALUE, KERNEL_OUTPUTS = "every value", "kernel outputs"
#: Names of kernel backends as people know them.
BACKEND_LABELS = {"dnnl": "oneDNN", "numpy": "numpy", "onnx-reference": "onnx reference (fallback)",
                  "host": "host"}


@dataclass(frozen=True)
class NodeValue:
    """An input of the culprit: its value name, dtype and shape, and where it comes from
    (``input``, ``initializer`` or the node that makes it)."""

    name: str
    dtype: str
    shape: list[int] | None
    source: str
    agrees: bool | None = None
    """Whether aircc's value agrees with the reference's (None: not compared, e.g. an
    input or a weight, the same on both sides)."""


@dataclass(frozen=True)
class Culprit:
    """The first node whose output diverges while its inputs agree."""

    node: str
    """Its ONNX name (a fused kernel's name when only the fused kernel diverges)."""
    op: str
    domain: str
    kernel: str
    """The compiled kernel that ran it where it was caught diverging."""
    backend: str
    """The kernel backend that ran it: ``dnnl`` (oneDNN), ``numpy``, ``onnx-reference``."""
    impl: str | None
    """The backend's implementation, where the tiling recorded one."""
    inputs: list[NodeValue]
    outputs: list[ValueCheck]
    fused_into: str | None = None
    """The kernel of the model as compiled (without exposed values) that runs this node
    together with others; None: it runs alone."""
    fused_nodes: list[str] = field(default_factory=list)
    """The ONNX nodes that kernel runs, in order."""

    @property
    def label(self) -> str:
        op = f"{self.domain}.{self.op}" if self.domain else self.op
        return f"node '{self.node}' ({op})"


@dataclass(frozen=True)
class Bisection:
    """The search for the first diverging node."""

    status: str
    """:data:`FOUND`, :data:`NOT_FOUND` or :data:`FAILED`."""
    culprit: Culprit | None = None
    compared: int = 0
    """Values compared."""
    exposure: str = EVERY_VALUE
    """What was exposed as outputs: ``every value`` (each ONNX node's outputs), or
    ``kernel outputs`` (those of the compiled model's kernels, its fusions kept)."""
    seconds: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class ModeResult:
    """One mode's verdict."""

    mode: str
    status: str
    """:data:`PASS`, :data:`FAIL` or :data:`NOT_APPLICABLE`."""
    outputs: list[ValueCheck] = field(default_factory=list)
    reason: str = ""
    """Why the mode does not apply."""
    bisection: Bisection | None = None
    compile_seconds: float = 0.0
    run_seconds: float = 0.0
    """Loading the compiled model on the device and one run."""


@dataclass(frozen=True)
class VerifyReport:
    """A whole verification (:func:`aircc.verify`)."""

    model: str
    reference: str
    """Which reference ran, and why when it is the fallback."""
    target: str
    inputs: list[FeedInfo]
    seed: int
    modes: list[ModeResult]

    @property
    def passed(self) -> bool:
        """No mode failed (a mode that does not apply does not fail)."""
        return all(m.status != FAIL for m in self.modes) and any(m.status == PASS for m in self.modes)

    def mode(self, name: str) -> ModeResult:
        return next(m for m in self.modes if m.mode == name)

    def to_dict(self) -> dict:
        """Everything, as plain JSON-able data."""
        out = dataclasses.asdict(self)
        out["passed"] = self.passed
        for m, mode in zip(out["modes"], self.modes):
            for o, check in zip(m["outputs"], mode.outputs):
                _check_dict(o, check)
            culprit = mode.bisection.culprit if mode.bisection is not None else None
            if culprit is not None:
                for o, check in zip(m["bisection"]["culprit"]["outputs"], culprit.outputs):
                    _check_dict(o, check)
        return _finite(out)

    def summary(self) -> str:
        """The one line that ends ``aircc verify``'s output."""
        parts = []
        for m in self.modes:
            if m.status == NOT_APPLICABLE:
                parts.append(f"{m.mode} not applicable")
                continue
            bad = [o for o in m.outputs if not o.passed]
            text = f"{m.mode} {len(m.outputs) - len(bad)}/{len(m.outputs)} outputs agree"
            b = m.bisection
            if b is not None and b.culprit is not None:
                text += f", first divergence {b.culprit.label}"
            parts.append(text)
        return f"{'PASS' if self.passed else 'FAIL'}: {'; '.join(parts)} (reference: " \
               f"{self.reference.split(' (')[0]})"


def _check_dict(out: dict, check: ValueCheck) -> None:
    out["passed"] = check.passed


def _finite(value):
    """JSON has no infinity: inf as the string ``"inf"``."""
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def backend_label(backend: str) -> str:
    return BACKEND_LABELS.get(backend, backend or "?")


def format_report(report: VerifyReport) -> str:
    """The text ``aircc verify`` prints: reference, inputs, each output per mode, the
    first diverging node of a failing mode, and the summary line."""
    lines = [f"model      {report.model}", f"reference  {report.reference}",
             f"target     {report.target}"]
    for f in report.inputs:
        how = f"generated, seed {report.seed}" if f.source == "generated" else "given"
        lines.append(f"input      {f.name}: {f.dtype}{f.shape if f.shape is not None else ''} ({how})")
    for m in report.modes:
        if m.status == NOT_APPLICABLE:
            lines.append(f"{m.mode:<10} not applicable: {m.reason}")
            continue
        lines.append(f"{m.mode:<10} compile {m.compile_seconds:.2f} s, "
                     f"load and run {m.run_seconds * 1e3:.1f} ms")
        lines += [f"  {format_check(o)}" for o in m.outputs]
        if m.bisection is not None:
            lines += format_bisection(m.mode, m.bisection)
    lines.append(report.summary())
    return "\n".join(lines)


def format_check(c: ValueCheck) -> str:
    """One value's line: type, errors, tolerance, verdict."""
    shape = c.shape if c.shape is not None else ""
    head = f"{c.name}: {c.dtype}{shape}"
    if c.problem:
        return f"{head}  {c.problem}  FAIL"
    figures = f"max abs {c.max_abs:.3g}, max rel {c.max_rel:.3g}"
    if c.mismatched:
        figures += f", {c.mismatched} of {c.elements} elements outside"
    if c.nan_inf_mismatched:
        figures += f" ({c.nan_inf_mismatched} NaN/inf)"
    return f"{head}  {figures} ({c.tolerance})  {'PASS' if c.passed else 'FAIL'}"


def format_bisection(mode: str, b: Bisection) -> list[str]:
    """A bisection's lines: the culprit, its kernel, inputs and errors."""
    head = f"  first divergence ({mode}, {b.compared} values compared with {b.exposure} " \
           f"exposed, {b.seconds:.1f} s):"
    if b.culprit is None:
        return [f"{head} {b.status}{': ' + b.note if b.note else ''}"]
    c = b.culprit
    kernel = f"kernel '{c.kernel}' on {backend_label(c.backend)}"
    if c.impl:
        kernel += f" ({c.impl})"
    if not c.kernel:
        kernel = "run by no kernel (folded into a constant at compile time, or removed)"
    lines = [f"{head} {c.label}, {kernel}"]
    for i in c.inputs:
        shape = i.shape if i.shape is not None else ""
        state = "" if i.agrees is None else (", agrees" if i.agrees else ", DIFFERS")
        lines.append(f"    input  {i.name}: {i.dtype}{shape} ({i.source}{state})")
    lines += [f"    output {format_check(o)}" for o in c.outputs]
    if b.exposure == KERNEL_OUTPUTS:
        lines.append(f"    the fused kernel runs ONNX nodes {', '.join(c.fused_nodes)}")
    elif c.fused_into:
        lines.append(f"    compiled without exposed values, it runs in kernel '{c.fused_into}' "
                     f"with {', '.join(n for n in c.fused_nodes if n != c.node)}")
    if b.note:
        lines.append(f"    note: {b.note}")
    return lines

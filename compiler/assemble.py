"""The end of a compile: the compile report, the model section and the .om in memory."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from aircc.formats import OmFile
from aircc.formats.kinds import Impl
from aircc.formats.model_section import IOSpec, ModelSection, OnnxRecord, TargetRecord
from aircc.ops import Trait, has_trait
from aircc.ops.precision import COMPUTE_DTYPE

from .ir.graph import Graph
from .passes.base import declared_stats
from .stages import Compilation, HostFacts, MemoryFacts

PRODUCER = "aircc 0.1.0"


@dataclass(frozen=True)
class FallbackNode:
    """A node whose kernel is the fallback: onnx's reference implementation."""

    node: str
    op: str
    domain: str = ""


@dataclass(frozen=True)
class CompileReport:
    """What a compile did: the passes' statistics, the schedule, the lowering's facts, the
    timings.  The .om keeps it as the plain map :meth:`to_payload` makes (the model
    section's ``compile_report``, which ``aircc inspect`` reads)."""

    mode: str
    target: str
    """The compile target's name."""
    imported_nodes: int
    kernels: int
    """Nodes after the optimisation pipeline."""
    stats: dict[str, int]
    """Every declared pass statistic by name (``fused_attention``, ...), 0 when not counted."""
    streams: int
    events: int
    fallback_nodes: list[FallbackNode]
    """Nodes (bodies included) run by the fallback kernel."""
    precision_mode: str
    ops_per_precision: dict[str, int]
    """Kernels (bodies included) by the floating-point type they write (others: not counted)."""
    memory: MemoryFacts | None
    """The memory plan (static mode and gears)."""
    host: HostFacts | None
    """The host work (dynamic mode)."""
    gears: list[int] | None
    """The batch sizes of a model with gears."""
    seconds: dict[str, float]
    """Wall time per stage and per pass."""
    total_seconds: float

    def to_payload(self) -> dict:
        """The report as the .om stores it: one flat map, statistics and facts as keys."""
        return {
            "mode": self.mode, "target": self.target, "imported_nodes": self.imported_nodes,
            "kernels": self.kernels, **self.stats, "streams": self.streams, "events": self.events,
            "fallback_nodes": [{"node": n.node, "op": n.op, **({"domain": n.domain} if n.domain else {})}
                               for n in self.fallback_nodes],
            "precision_mode": self.precision_mode, "ops_per_precision": self.ops_per_precision,
            **(asdict(self.memory) if self.memory else {}), **(asdict(self.host) if self.host else {}),
            **({"gears": self.gears} if self.gears is not None else {}),
            "seconds": self.seconds, "total_seconds": self.total_seconds,
        }


@dataclass
class CompiledModel:
    """What a compile gives: the optimised graph, the .om in memory, and the report."""

    graph: Graph
    om: OmFile
    report: CompileReport

    def save(self, path) -> int:
        from aircc.formats import save_om
        return save_om(self.om, path)


def io_specs(graph: Graph, names: list[str]) -> list[IOSpec]:
    """The inputs or outputs of ``graph`` as the model section lists them."""
    return [IOSpec(n, graph.types[n].dtype,
                   None if graph.types[n].shape is None else tuple(graph.types[n].shape))
            for n in names]


def compile_report(c: Compilation, t0: float) -> CompileReport:
    """What the compile did: every declared pass statistic, the schedule, the memory plan,
    the timings."""
    ctx, facts = c.ctx, c.facts
    return CompileReport(
        mode=c.mode, target=ctx.target.name, imported_nodes=facts.imported_nodes,
        kernels=facts.kernels, stats={stat: ctx.stats.get(stat, 0) for stat in declared_stats()},
        streams=c.graph.meta.get("streams", 1), events=c.graph.meta.get("events", 0),
        fallback_nodes=fallback_nodes(c.graph), precision_mode=ctx.options.precision_mode,
        ops_per_precision=ops_per_precision(c.graph), memory=facts.memory, host=facts.host,
        gears=facts.gears, seconds={k: round(v, 4) for k, v in ctx.seconds.items()},
        total_seconds=round(time.perf_counter() - t0, 4))


#: The floating-point types :func:`ops_per_precision` counts.
FLOAT_TYPES = ("float64", "float32", "float16", "bfloat16")


def ops_per_precision(graph: Graph) -> dict[str, int]:
    """Kernels (bodies included) by the floating-point type they compute in: their
    ``compute_dtype``, else their first output's."""
    counts: dict[str, int] = {}

    def count(region: Graph) -> None:
        for n in region.nodes:
            t = region.types.get(n.outputs[0]) if n.outputs else None
            if t is not None and t.dtype in FLOAT_TYPES and not has_trait(
                    n.op, Trait.DEVICE_TASK, n.domain):
                dtype = n.attrs.get(COMPUTE_DTYPE, t.dtype)      # a bfloat16 kernel's
                counts[dtype] = counts.get(dtype, 0) + 1
            for r in n.regions:
                count(r)
    count(graph)
    return dict(sorted(counts.items()))


def fallback_nodes(graph: Graph) -> list[FallbackNode]:
    """The nodes (bodies included) whose kernel is the fallback: onnx's reference
    implementation, because no native kernel covers the op or this use of it."""
    return [FallbackNode(n.name, n.op, n.domain)
            for n in graph.walk()
            if not has_trait(n.op, Trait.DEVICE_TASK, n.domain)
            and not has_trait(n.op, Trait.CONTROL_FLOW, n.domain)
            and (n.impl is Impl.FALLBACK or not n.definition.native)]


def onnx_record(metadata: dict | None, inputs: list[IOSpec],
                outputs: list[IOSpec]) -> OnnxRecord | None:
    """The ONNX model's own metadata (:mod:`.frontend.model_metadata`), its declared shapes
    kept for the model's inputs and outputs only."""
    if metadata is None:
        return None
    kept = {"input_shapes": {i.name for i in inputs}, "output_shapes": {o.name for o in outputs}}
    return OnnxRecord(**{k: ({n: s for n, s in v.items() if n in kept[k]} if k in kept else v)
                         for k, v in metadata.items()})


def finish(c: Compilation, t0: float, inputs: list[IOSpec], outputs: list[IOSpec]) -> CompiledModel:
    """The model section and the .om, from a compilation that ran its stages."""
    report = compile_report(c, t0)
    target = c.ctx.target
    model = ModelSection(
        name=c.graph.meta.get("model_name", "model"), mode=c.mode, producer=PRODUCER,
        opsets={k or "ai.onnx": v for k, v in c.graph.opsets.items()},
        inputs=inputs, outputs=outputs,
        target=TargetRecord(target.name, target.backend, target.vector_class),
        precision_mode=c.ctx.options.precision_mode,
        source_producer=c.graph.meta.get("producer", ""), compile_report=report.to_payload(),
        onnx=onnx_record(c.graph.meta.get("onnx"), inputs, outputs))
    payloads = {"model": model.to_payload(),
                **{name: s.to_payload() for name, s in c.sections.made().items()}}
    om = OmFile(mode=c.mode, sections=payloads, weights=c.weights)
    return CompiledModel(graph=c.graph, om=om, report=report)

"""Section ``gears``: one static plan per batch size (``--dynamic-batch``), in one model.

Each plan is a complete static model of its own (inputs and outputs at its
batch, task lists, memory plan, tiling); the plans share the weights region,
the streams and events, and one arena as large as the largest plan's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .checks import Checker
from .memory_plan import MemoryPlanSection
from .model_section import IOSpec
from .section_limits import PLAN_SLACK, task_counts
from .tasks import TasksSection, TilingSection

MIN_GEARS, MAX_GEARS = 2, 100


@dataclass
class GearPlan:
    """The static plan for one batch size."""

    batch: int
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    tasks: TasksSection
    memory_plan: MemoryPlanSection
    tiling: TilingSection

    def to_payload(self) -> dict:
        return {"batch": self.batch, "inputs": [i.to_payload() for i in self.inputs],
                "outputs": [o.to_payload() for o in self.outputs],
                "tasks": self.tasks.to_payload(), "memory_plan": self.memory_plan.to_payload(),
                "tiling": self.tiling.to_payload()}


@dataclass
class GearsSection:
    """Section ``gears``."""

    batch_inputs: list[str]
    """Inputs whose dim 0 is the batch."""
    sizes: list[int]
    plans: list[GearPlan]

    @staticmethod
    def parse(payload: Any) -> "GearsSection":
        c = Checker("gears")
        d = c.dict(payload, "")
        batch_inputs = c.strs(d, "batch_inputs", "")
        sizes = [c.int_value(b, f"sizes[{i}]", lo=1)
                 for i, b in enumerate(c.list(c.get(d, "sizes", ""), "sizes"))]
        if not MIN_GEARS <= len(sizes) <= MAX_GEARS or sorted(set(sizes)) != sizes:
            c.fail("sizes", f"must be {MIN_GEARS} to {MAX_GEARS} distinct batch sizes in "
                            f"increasing order, got {sizes}")
        plans = []
        for i, p in enumerate(c.list(c.get(d, "plans", ""), "plans")):
            w = f"plans[{i}]"
            pd = c.dict(p, w)
            batch = c.int(pd, "batch", w, lo=1)
            ios = {k: [IOSpec.parse(c, t, f"{w}.{k}[{j}]")
                       for j, t in enumerate(c.list(c.get(pd, k, w), f"{w}.{k}"))]
                   for k in ("inputs", "outputs")}
            plans.append(GearPlan(
                batch, ios["inputs"], ios["outputs"],
                TasksSection.parse(c.get(pd, "tasks", w), "gears", f"{w}.tasks"),
                MemoryPlanSection.parse(c.get(pd, "memory_plan", w), "gears", f"{w}.memory_plan",
                                        task_counts(pd.get("tasks"))[0] + PLAN_SLACK),
                TilingSection.parse(c.get(pd, "tiling", w), "gears", f"{w}.tiling")))
        if [p.batch for p in plans] != sizes:
            c.fail("plans", f"are for batches {[p.batch for p in plans]}, sizes say {sizes}")
        return GearsSection(batch_inputs, sizes, plans)

    def to_payload(self) -> dict:
        return {"batch_inputs": self.batch_inputs, "sizes": self.sizes,
                "plans": [p.to_payload() for p in self.plans]}

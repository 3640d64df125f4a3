"""Section ``gears``: one static plan per batch size (``--dynamic-batch``), in one model.

Each plan is a complete static model of its own (inputs and outputs at its
batch, task lists, memory plan, tiling); the plans share the weights region,
the streams and events, and one arena as large as the largest plan's.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checks import Checker, join
from .memory_plan import MemoryPlanSection
from .model_section import IOSpec
from .schema import Int, ListOf, Nested, Record, Section, Str, prefixed, wire
from .section_limits import PLAN_SLACK, task_counts
from .tasks import TasksSection, TilingSection

MIN_GEARS, MAX_GEARS = 2, 100


def _plan_memory(c: Checker, d: Mapping, where: str) -> MemoryPlanSection:
    """A plan's memory plan, its records bounded by the plan's tasks (:mod:`.section_limits`)."""
    return MemoryPlanSection.parse(c.get(d, "memory_plan", where), c.section,
                                   prefixed(c, join(where, "memory_plan")),
                                   task_counts(d.get("tasks"))[0] + PLAN_SLACK)


@dataclass
class GearPlan(Record):
    """The static plan for one batch size."""

    batch: int = wire(Int(lo=1))
    inputs: list[IOSpec] = wire(ListOf(Nested(IOSpec)))
    outputs: list[IOSpec] = wire(ListOf(Nested(IOSpec)))
    tasks: TasksSection = wire(Section(TasksSection, "tasks"))
    memory_plan: MemoryPlanSection = wire(Section(MemoryPlanSection, "memory_plan"),
                                          read=_plan_memory)
    tiling: TilingSection = wire(Section(TilingSection, "tiling"))


@dataclass
class GearsSection(Record):
    """Section ``gears``."""

    batch_inputs: list[str] = wire(ListOf(Str()))
    """Inputs whose dim 0 is the batch."""
    sizes: list[int] = wire(ListOf(Int(lo=1)))
    plans: list[GearPlan] = wire(ListOf(Nested(GearPlan)))

    @classmethod
    def parse(cls, payload: Any) -> "GearsSection":
        return cls.read(Checker("gears"), payload, "")

    def check(self, c: Checker, where: str) -> None:
        """2 to 100 distinct sizes in increasing order, one plan for each."""
        sizes = self.sizes
        if not MIN_GEARS <= len(sizes) <= MAX_GEARS or sorted(set(sizes)) != sizes:
            c.fail("sizes", f"must be {MIN_GEARS} to {MAX_GEARS} distinct batch sizes in "
                            f"increasing order, got {sizes}")
        if [p.batch for p in self.plans] != sizes:
            c.fail("plans", f"are for batches {[p.batch for p in self.plans]}, sizes say {sizes}")

"""What a dynamic model's runs read: the plan, made once at load, and the device context.

:class:`DynamicPlan` is the model as every run sees it and none changes: its signature,
its execute graph's nodes and host kernels, each node's resolved op, which streams use
each device value, where each launch sits in the host order, its constants and target.

:class:`DeviceContext` is what the model holds on its device for its runs: streams,
events and the count of records the host numbered on each, the weights in device
memory, the constants kernels derive from them, the caching allocator, the tiling
caches and the counters.  A run's :class:`~.host_pipeline.RunState` reads both and
holds no reference to the model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

import numpy as np

from aircc.executor.device.caching_allocator import CachingAllocator
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.prepared import PreparedConstants
from aircc.formats import ModelContract
from aircc.formats.exec_graph import ExecGraphSection, ExecNode, HostKernel
from aircc.formats.kinds import HostKernelKind, Placement
from aircc.formats.model_section import IOSpec
from aircc.ops import KernelBackend, Target
from aircc.ops.device import COPY_OPS, DOMAIN

from .resolved import ResolvedOp, resolve_op
from .tiling_cache import TilingCache


@dataclass(frozen=True)
class DynamicPlan:
    """A loaded dynamic model as its runs read it (see the module doc)."""

    name: str
    inputs: tuple[IOSpec, ...]
    outputs: tuple[IOSpec, ...]
    exec_graph: ExecGraphSection
    nodes: tuple[ExecNode, ...]
    kernels: tuple[HostKernel, ...]
    ops: tuple[ResolvedOp | None, ...]
    """Each node's op (None for a copy, which the host kernels do themselves)."""
    value_inputs: tuple[frozenset[int], ...]
    """Each node's inputs whose values (not only types) its shape rule or tiling reads."""
    host_values: Mapping[str, np.ndarray]
    """The constants, readable on the host."""
    users: Mapping[str, tuple[int, ...]]
    """Per device value: the streams whose kernels use it."""
    launch_position: Mapping[str, int]
    """Per device value: the position of the host kernel that puts it on the device."""
    has_control: bool
    """The graph has control flow (If, Loop, Scan), whose bodies rebind values per
    iteration: no reshape runs as a view and no run is recorded for replay."""
    target: Target

    @staticmethod
    def build(contract: ModelContract, weights: Mapping[str, np.ndarray],
              backend: KernelBackend, target: Target) -> DynamicPlan:
        """The plan of a contract's execute graph, its ops resolved on ``backend``."""
        eg = contract.exec_graph
        nodes, kernels = tuple(eg.nodes), tuple(eg.kernels)
        ops = tuple(None if n.domain == DOMAIN and n.op in COPY_OPS
                    else resolve_op(backend, n.op, n.version, n.domain, n.name, n.impl, n.attrs)
                    for n in nodes)
        users: dict[str, set[int]] = {}
        for n in nodes:
            if n.placement is Placement.DEVICE and n.stream is not None:
                for v in [*n.inputs, *n.outputs]:
                    if v:
                        users.setdefault(v, set()).add(n.stream)
        launch_position = {}
        for pos, kern in enumerate(kernels):
            if kern.kind in (HostKernelKind.LAUNCH, HostKernelKind.MEMCPY_H2D):
                for v in nodes[kern.node].outputs:
                    launch_position[v] = pos
        return DynamicPlan(
            name=contract.model.name, inputs=tuple(contract.model.inputs),
            outputs=tuple(contract.model.outputs), exec_graph=eg, nodes=nodes, kernels=kernels,
            ops=ops,
            value_inputs=tuple(frozenset(o.definition.value_inputs) if o else frozenset()
                               for o in ops),
            host_values=MappingProxyType(dict(weights)),
            users=MappingProxyType({v: tuple(sorted(s)) for v, s in users.items()}),
            launch_position=MappingProxyType(launch_position),
            has_control=any(k.kind is HostKernelKind.CONTROL for k in kernels), target=target)


@dataclass
class DeviceContext:
    """What a dynamic model holds on its device for its runs (see the module doc)."""

    device: VirtualDevice
    streams: list
    events: list
    device_weights: dict[str, np.ndarray]
    """Each constant's view in the weights region."""
    prepared: PreparedConstants
    allocator: CachingAllocator
    caches: list[TilingCache]
    """Each node's tiling cache."""
    event_counts: list[int] = field(default_factory=list)
    """Per event: the records the host numbered so far."""
    users: dict[str, list] = field(default_factory=dict)
    """The plan's users as this context's streams (bound again when streams are replaced)."""
    cube: object = None
    """The matrix engine its kernels take turns on (the device's, or its CPU group's)."""
    launches: int = 0
    """Host submissions of kernels, copies and event tasks (a replay counts none)."""
    copies: object = None
    """The :class:`~aircc.executor.device.copies.ModelCopies` of its runs."""

    def bind_users(self, plan: DynamicPlan) -> None:
        self.users = {v: [self.streams[s] for s in ss] for v, ss in plan.users.items()}

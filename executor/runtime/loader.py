"""Load an .om file (or bytes) onto a device and get a runnable model.

The file's sections are typed and checked (:meth:`aircc.formats.OmFile.parsed`),
then its compile target is checked against this machine: a model compiled for
a kernel backend or a vector class this machine lacks is refused with
:class:`~aircc.errors.TargetUnavailableError` naming both.
"""
from __future__ import annotations

import os
import time

from aircc.errors import ConfigError, DeviceError
from aircc.executor.device import threads
from aircc.executor.device.compute_units import check_priority
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.discovery import resolve_device
from aircc.formats import OmFile, load_om
from aircc.formats.alignment import RegionLayout
from aircc.log import get as get_log
from aircc.ops import check_precision, check_target, kernel_backend

from .loaded import LoadedModel
from .recovery import RecoveryPolicy
from .residency import Residency, SharedWeights
from .static_model import StaticModel, StaticModelPlan


def load_model(source: str | os.PathLike | bytes | OmFile,
               device: VirtualDevice | int | None = None,
               *, runtime_core_number: int | None = None, pad_to_gear: bool = False,
               replay: bool = True, timeout: float | None = None,
               recovery: RecoveryPolicy | None = None, priority: int | str = 0,
               contexts: int | None = None, hint: str = "latency") -> LoadedModel:
    """A runnable model for ``source`` on ``device`` (a device, a logical device id, or
    None: logical device 0).

    ``runtime_core_number`` (dynamic models): 1 runs the host kernels in one
    thread, 3 as a three-stage pipeline (default: $AIR_RUNTIME_CORE_NUMBER or 3).
    ``pad_to_gear`` (gear models): pad a batch with no gear up to the next gear.
    ``replay`` (dynamic models): after the first run with given input shapes, later runs
    with those shapes replay its launches as one device submission.
    ``timeout``: the deadline of each run in seconds (default ``$AIRCC_RUN_TIMEOUT``);
    ``recovery``: what to do when a run fails (default ``$AIRCC_RECOVERY``).
    ``priority``: the model's streams' priority on the device, in [-7, 7] or ``"low"``,
    ``"normal"``, ``"high"`` (added to what the compiler gave each stream).
    ``contexts``: execution contexts, the runs the model takes at once (each its own arena,
    streams and events; the weights held once per device).  ``hint``: ``"latency"`` (the
    default: one context whose kernels span every CPU) or ``"throughput"`` (a context per
    group of the device's CPUs, :func:`throughput_groups`, each context's workers and
    kernel teams on its own group); ``contexts`` given with it sets the number of groups.
    """
    om = source if isinstance(source, OmFile) else load_om(source)
    contract = om.parsed()
    target = check_target(contract.model.target, f"model '{contract.model.name}'")
    check_precision(contract.model.precision_mode, f"model '{contract.model.name}'")
    backend = kernel_backend(target.backend)
    device = resolve_device(device)
    try:
        priority = check_priority(priority)
    except ValueError as e:
        raise DeviceError(str(e)) from None
    groups = cpu_groups(device, hint, contexts)
    owner = f"model '{contract.model.name}'"
    if contract.mode == "static":
        plan = StaticModelPlan.build(contract, om.weights, target)
        weights = SharedWeights(lambda dev: Residency(dev, owner, plan.weight_offsets,
                                                      plan.weights_bytes, om.weights))

        def make(dev: VirtualDevice, context: int = 0):
            return StaticModel(om, plan, dev, backend, weights.acquire(dev),
                               pad_to_gear=pad_to_gear, priority=priority,
                               cpus=groups[context] if dev is device else None)
    else:
        from .control_flow import check_control_nodes
        from .dynamic_model import DynamicModel, runtime_core_number_of
        from .dynamic_plan import DynamicPlan

        cores = runtime_core_number_of(runtime_core_number)
        check_control_nodes(contract.exec_graph, om.weights)
        plan = DynamicPlan.build(contract, om.weights, backend, target)
        layout = RegionLayout()
        for name, arr in om.weights.items():
            layout.place(name, arr.nbytes)
        weights = SharedWeights(lambda dev: Residency(dev, owner, layout.offsets, layout.end,
                                                      om.weights))

        def make(dev: VirtualDevice, context: int = 0):
            return DynamicModel(om, plan, dev, weights.acquire(dev), runtime_core_number=cores,
                                replay=replay, priority=priority,
                                cpus=groups[context] if dev is device else None)
    t0 = time.perf_counter()
    model = LoadedModel(make, device, timeout=timeout, recovery=recovery,
                        name=contract.model.name, contexts=len(groups))
    get_log("load").info("model '%s' (%s) loaded on device %d in %.1f ms", model.name,
                         contract.mode, model.device.id, 1e3 * (time.perf_counter() - t0))
    return model


HINTS = ("latency", "throughput")


def cpu_groups(device: VirtualDevice, hint: str, contexts: int | None) -> list[frozenset[int] | None]:
    """Per execution context, the CPUs its streams' workers run on (None: the device's).

    ``latency``: ``contexts`` (default one) contexts, each on every CPU of the device.
    ``throughput``: the device's CPUs cut into ``contexts`` groups (default one group per
    CPU, at most :data:`MAX_THROUGHPUT_CONTEXTS`), as even as they can be, one context on
    each: requests in flight run side by side, each on fewer threads, none waiting for
    another's team.  More contexts than CPUs get one CPU each, in turn (those on one CPU
    take turns on its matrix engine)."""
    if hint not in HINTS:
        raise ConfigError(f"hint must be one of {', '.join(HINTS)}, got {hint!r}")
    if contexts is not None and (isinstance(contexts, bool) or not isinstance(contexts, int)
                                 or not 1 <= contexts <= MAX_CONTEXTS):
        raise ConfigError(f"contexts must be a whole number from 1 to {MAX_CONTEXTS}, "
                          f"got {contexts!r}")
    if hint == "latency":
        return [None] * (contexts or 1)
    cpus = sorted(device.cpus) if device.cpus else threads.available_cpus()
    n = contexts or min(len(cpus), MAX_THROUGHPUT_CONTEXTS)
    if n > len(cpus):            # more contexts than CPUs: one CPU each, in turn
        return [frozenset({cpus[k % len(cpus)]}) for k in range(n)]
    size, extra = divmod(len(cpus), n)
    groups, at = [], 0
    for k in range(n):
        take = size + (k < extra)
        groups.append(frozenset(cpus[at:at + take]))
        at += take
    return groups


#: The most execution contexts a model takes.
MAX_CONTEXTS = 64
#: Contexts the throughput hint makes by default, at most (one per CPU below that).
MAX_THROUGHPUT_CONTEXTS = 4

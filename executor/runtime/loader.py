"""Load an .om file (or bytes) onto a device and get a runnable model.

The file's sections are typed and checked (:meth:`aircc.formats.OmFile.parsed`),
then its compile target is checked against this machine: a model compiled for
a kernel backend or a vector class this machine lacks is refused with
:class:`~aircc.errors.TargetUnavailableError` naming both.
"""
from __future__ import annotations

import os
import time

from aircc.errors import DeviceError
from aircc.executor.device.compute_units import check_priority
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.discovery import resolve_device
from aircc.formats import OmFile, load_om
from aircc.log import get as get_log
from aircc.ops import check_target, kernel_backend

from .loaded import LoadedModel
from .recovery import RecoveryPolicy
from .static_model import StaticModel


def load_model(source: str | os.PathLike | bytes | OmFile,
               device: VirtualDevice | int | None = None,
               *, runtime_core_number: int | None = None, pad_to_gear: bool = False,
               replay: bool = True, timeout: float | None = None,
               recovery: RecoveryPolicy | None = None, priority: int | str = 0) -> LoadedModel:
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
    """
    om = source if isinstance(source, OmFile) else load_om(source)
    contract = om.parsed()
    target = check_target(contract.model.target, f"model '{contract.model.name}'")
    backend = kernel_backend(target.backend)
    device = resolve_device(device)
    try:
        priority = check_priority(priority)
    except ValueError as e:
        raise DeviceError(str(e)) from None
    if contract.mode == "static":
        def make(dev: VirtualDevice):
            return StaticModel(om, contract, dev, backend, target, pad_to_gear=pad_to_gear,
                               priority=priority)
    else:
        from .dynamic_model import DynamicModel, runtime_core_number_of

        cores = runtime_core_number_of(runtime_core_number)

        def make(dev: VirtualDevice):
            return DynamicModel(om, contract, dev, backend, target,
                                runtime_core_number=cores, replay=replay, priority=priority)
    t0 = time.perf_counter()
    model = LoadedModel(make, device, timeout=timeout, recovery=recovery,
                        name=contract.model.name)
    get_log("load").info("model '%s' (%s) loaded on device %d in %.1f ms", model.name,
                         contract.mode, model.device.id, 1e3 * (time.perf_counter() - t0))
    return model

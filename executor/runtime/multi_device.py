"""One model on several devices: a batch split across them, run at once, gathered in order.

``aircc.load(path, devices=[0, 1])`` (``airrun --devices 0,1``) loads the model once per
device: each copy has its own weights, arena, prepared constants and streams in its
own device's memory; they share only the read-only .om.  ``run(feeds)`` cuts the batch
(the first dim of the inputs that have it) into one contiguous part per device (a
static model's fixed batch B: parts of whole multiples of B), runs the parts
concurrently, one host thread per device, and concatenates each output in the
order of the batch.  The outputs are those one device would give for the whole batch.

With a recovery policy that fails over (``device_lost="failover"``), each copy fails
over to the group's other devices: a part whose device faults mid-run is run again
on a healthy one, and the run completes.
"""
from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from aircc.errors import DeviceError, InputError
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.discovery import resolve_device
from aircc.formats import OmFile, load_om

from .engine import MultiDeviceRunStats
from .loaded import LoadedModel
from .recovery import RecoveryPolicy, default_policy


class MultiDeviceModel:
    """A model loaded on each of ``devices`` (see the module doc)."""

    def __init__(self, source: str | os.PathLike | bytes | OmFile,
                 devices: list[VirtualDevice | int], *, recovery: RecoveryPolicy | None = None,
                 **load_options):
        from .loader import load_model

        self.devices = [resolve_device(d) for d in devices]
        if not self.devices:
            raise DeviceError("a model on several devices needs at least one device")
        if len({id(d) for d in self.devices}) != len(self.devices):
            raise DeviceError(f"devices {[d.id for d in self.devices]} name a device twice")
        om = source if isinstance(source, OmFile) else load_om(source)
        policy = recovery if recovery is not None else default_policy()
        self.models: list[LoadedModel] = []
        try:
            for dev in self.devices:
                own = policy
                if policy.device_lost == "failover" and not policy.failover_devices:
                    own = dataclasses.replace(policy, failover_devices=tuple(
                        d for d in self.devices if d is not dev))
                self.models.append(load_model(om, dev, recovery=own, **load_options))
        except BaseException:
            self.close()
            raise
        first = self.models[0]
        self.name, self.inputs, self.outputs = first.name, first.inputs, first.outputs
        self._threads = ThreadPoolExecutor(len(self.devices), thread_name_prefix="aircc-device")
        self.last_parts: list[tuple[int, int, int]] = []
        """The last run's parts: (device id, first row, rows)."""

    # ------------------------------------------------------------ splitting
    def _batch_inputs(self, feeds: dict) -> tuple[list[str], int, int]:
        """The inputs to split, the batch size fed, and the granule a part's size must be a
        multiple of (a static model's batch; 1 for a symbolic batch)."""
        specs = {i.name: i for i in self.inputs}
        lead = next((i for i in self.inputs if i.shape), None)
        if lead is None or lead.name not in feeds:
            raise InputError(f"a batch split across devices needs the model's first input "
                             f"with a batch dim; the inputs are {list(specs)}")
        dim0 = lead.shape[0]
        n = int(np.shape(feeds[lead.name])[0]) if np.ndim(feeds[lead.name]) else 0
        names = [k for k, v in feeds.items() if k in specs and specs[k].shape
                 and specs[k].shape[0] == dim0 and np.ndim(v) and np.shape(v)[0] == n]
        granule = dim0 if isinstance(dim0, int) else 1
        if n == 0 or n % granule:
            raise InputError(f"input '{lead.name}' has a batch of {n}: a static model of "
                             f"batch {granule} splits a batch of whole multiples of {granule}")
        return names, n, granule

    def split(self, feeds: dict) -> list[tuple[int, dict]]:
        """(model index, that model's feeds) per part, in batch order."""
        names, n, granule = self._batch_inputs(feeds)
        units = n // granule
        k = min(len(self.models), units)
        bounds = [-(-i * units // k) * granule for i in range(k + 1)]   # earlier parts get the extra
        parts = []
        for i in range(k):
            lo, hi = bounds[i], bounds[i + 1]
            parts.append((i, {name: (v[lo:hi] if name in names else v) for name, v in feeds.items()}))
        self.last_parts = [(self.devices[i].id, bounds[i], bounds[i + 1] - bounds[i])
                           for i in range(k)]
        return parts

    # ------------------------------------------------------------ running
    def _run_part(self, index: int, feeds: dict, output_names) -> dict:
        """Model ``index`` on its part: one run per ``granule`` rows of a static model."""
        model = self.models[index]
        lead = next(i for i in self.inputs if i.shape)
        dim0 = lead.shape[0]
        n = int(np.shape(feeds[lead.name])[0])
        if not isinstance(dim0, int) or dim0 == n:
            return model.run(feeds, output_names)
        names, _, _ = self._batch_inputs(feeds)
        outs = [model.run({k: (v[lo:lo + dim0] if k in names else v) for k, v in feeds.items()},
                          output_names) for lo in range(0, n, dim0)]
        return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}

    def run(self, feeds: dict, output_names: list[str] | None = None, *,
            device_outputs: bool | list[str] = False) -> dict:
        """The whole batch's outputs, as one device would give them (host arrays: a batch
        split across devices has no one device to leave them on)."""
        if device_outputs:
            raise InputError(f"model '{self.name}' runs split across devices "
                             f"{[d.id for d in self.devices]}: its outputs come back as host "
                             f"arrays; load it on one device for device_outputs")
        parts = self.split(feeds)
        futures = [self._threads.submit(self._run_part, i, part, output_names)
                   for i, part in parts]
        results = [f.result() for f in futures]
        out = {}
        for name in results[0]:
            pieces = [r[name] for r in results]
            rows = [p[2] for p in self.last_parts]
            if any(np.ndim(p) == 0 or np.shape(p)[0] != r for p, r in zip(pieces, rows)):
                raise InputError(f"output '{name}' has no batch dim (shapes "
                                 f"{[np.shape(p) for p in pieces]}), so a batch split across "
                                 f"devices cannot be gathered; run it on one device")
            out[name] = np.concatenate(pieces)
        return out

    def run_stats(self) -> MultiDeviceRunStats:
        return MultiDeviceRunStats(
            devices=[d.id for d in self.devices],
            parts=[{"device": d, "first_row": lo, "rows": n} for d, lo, n in self.last_parts],
            models=[m.run_stats() for m in self.models],
            recoveries=sum(len(m.recoveries) for m in self.models))

    @property
    def last_host_seconds(self) -> float:
        """Host CPU time of the last run, over every device's part."""
        return sum(m.last_host_seconds for m in self.models)

    @property
    def recoveries(self) -> list[dict]:
        return [r for m in self.models for r in m.recoveries]

    def close(self) -> None:
        for m in getattr(self, "models", []):
            m.close()
        threads = getattr(self, "_threads", None)
        if threads is not None:
            threads.shutdown(wait=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""A loaded model as users hold it: its lifecycle, its runs' deadlines and its recovery.

:func:`aircc.load` returns a :class:`LoadedModel`.  It owns an *engine* (a
:class:`~.static_model.StaticModel` or :class:`~.dynamic_model.DynamicModel` bound to
one device) and adds what every mode shares:

- **one run at a time**: runs from several threads take turns (a model's memory
  plan and streams serve one run), runs of different models go on at once;
- **a deadline for every run**: ``run(timeout=)``, else ``load(timeout=)``, else
  ``$AIRCC_RUN_TIMEOUT`` (600 s), counted from the call: the wait for the model, every
  attempt and every recovery action come out of it (:class:`~.recovery.RunDeadline`);
  past it the run fails with ``RunTimeoutError`` naming the stream and the task it is
  stuck in (or that it was still waiting for the model), and the model serves the next run;
- **a lifecycle**: ``run()`` on a closed model raises ``ModelClosedError`` at once;
  ``close()`` waits for a run in flight up to its bound, then cancels it, and never
  frees memory a kernel may still write (the engine quarantines it);
- **recovery** (:mod:`.recovery`): retry, release cached memory and retry on out of
  memory, retry with a longer deadline, reset a lost device or fail over to another.
"""
from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import replace
from typing import Callable

from aircc.config import settings
from aircc.errors import (ConfigError, DeviceLostError, DeviceOutOfMemoryError, KernelError,
                          ModelClosedError, RunTimeoutError)
from aircc.executor.device.device import CANCEL_GRACE, VirtualDevice
from aircc.executor.device.discovery import failover_candidates
from aircc.executor.device.health import DeviceState
from aircc.executor.device.stream import in_device_worker
from aircc.formats.model_section import IOSpec
from aircc.log import get as get_log

from .engine import Engine, RunStats
from .profiling import Profiler
from .recovery import RecoveryPolicy, RunDeadline, default_policy

#: Seconds ``close()`` waits for a run in flight before it cancels it.
CLOSE_TIMEOUT = 5.0


class LoadedModel:
    """A model loaded on a device (see the module doc).  ``with aircc.load(path) as m:``
    closes it when the block ends, also on an error."""

    def __init__(self, make: Callable[[VirtualDevice], Engine], device: VirtualDevice, *,
                 timeout: float | None = None, recovery: RecoveryPolicy | None = None,
                 name: str = ""):
        self._label = name or "model"
        """The model's name before its engine exists (for what a load's recovery logs)."""
        self.recovery = recovery if recovery is not None else default_policy()
        self.timeout = timeout
        self.recoveries: list[dict] = []
        """What the recovery policy did: one entry per failed attempt it handled."""
        self._make = make
        self._runs = 0
        self._lock = threading.Lock()          # one run at a time
        self._closing = self._closed = False
        self._close_pending = False
        self._unwatch: Callable[[], None] | None = None
        self._engine = self._load(make, device)
        self._watch(device)

    @property
    def timeout(self) -> float:
        """The deadline of each run in seconds, unless ``run()`` gives one (set it to change
        it; None: ``$AIRCC_RUN_TIMEOUT``)."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        self._timeout = settings().run_timeout if value is None else _seconds(value)

    def _load(self, make: Callable[[VirtualDevice], Engine], device: VirtualDevice) -> Engine:
        """``make(device)``; on out of memory, the policy may release cached blocks first."""
        try:
            return make(device)
        except DeviceOutOfMemoryError as e:
            if self.recovery.out_of_memory != "release_and_retry" or not device.release_cached():
                raise
            self._note(e, "released the device's cached blocks and loaded again")
            return make(device)

    def _watch(self, device: VirtualDevice) -> None:
        """Hear ``device``'s state changes (and no longer the previous device's)."""
        if self._unwatch is not None:
            self._unwatch()
        self._unwatch = device.on_state_change(self._device_changed)

    def _device_changed(self, device: VirtualDevice, old: DeviceState, new: DeviceState,
                        reason: str) -> None:
        """The device went to FAULT: stop the run in flight on it, which then recovers as
        the policy says (reset, fail over) or fails.  A fault raised by a kernel is
        raised by that kernel itself."""
        if new is not DeviceState.FAULT or in_device_worker():
            return
        engine = getattr(self, "_engine", None)
        if engine is not None and engine.device is device:
            engine.cancel(DeviceLostError(f"device {device.id} faulted during the run "
                                          f"({reason})"))

    # ------------------------------------------------------------ what it is
    @property
    def engine(self) -> Engine:
        """The mode's engine (StaticModel or DynamicModel) the model runs on now."""
        return self._engine

    @property
    def inputs(self) -> list[IOSpec]:
        return self._engine.inputs

    @property
    def outputs(self) -> list[IOSpec]:
        return self._engine.outputs

    @property
    def device(self) -> VirtualDevice:
        return self._engine.device

    @property
    def name(self) -> str:
        return self._engine.name

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_host_seconds(self) -> float:
        """Host CPU time of the last run: preparing, submitting, collecting (not the wait)."""
        return self._engine.last_host_seconds

    def release_cached(self) -> int:
        """Give back the device memory the model keeps cached (a dynamic model's recorded
        runs and free blocks), between runs; the bytes given back.  The next run takes what
        it needs."""
        with self._lock:
            return self._engine.release_cached()

    def run_stats(self) -> RunStats:
        """What the runs so far counted (:class:`~.engine.StaticRunStats` or
        :class:`~.engine.DynamicRunStats`), and the failed attempts recovery handled."""
        return replace(self._engine.run_stats(), recoveries=len(self.recoveries))

    # ------------------------------------------------------------ run
    def run(self, feeds: dict, output_names: list[str] | None = None,
            timeout: float | None = None) -> dict:
        """One inference: ``{input name: array}`` -> ``{output name: array}``.  ``timeout``:
        seconds before the run is cancelled (default: the model's, else
        ``$AIRCC_RUN_TIMEOUT``)."""
        deadline = RunDeadline.starting_now(self._timeout if timeout is None
                                            else _seconds(timeout))
        if self._closing:
            raise self._closed_error()
        if not self._lock.acquire(timeout=max(0.0, deadline.left())):
            if self._closing:
                raise self._closed_error()
            raise RunTimeoutError(f"model '{self.name}': the run passed its deadline of "
                                  f"{deadline.budget:g} s waiting for the model (its runs take "
                                  f"turns, and the runs before it held it all that time)")
        try:
            if self._closing:
                raise self._closed_error()
            self._runs += 1
            engine = self._engine
            device = engine.device
            if device.usable and engine.epoch == device.epoch:
                try:
                    return self._attempt(engine, feeds, output_names, deadline)
                except (DeviceLostError, DeviceOutOfMemoryError, RunTimeoutError,
                        KernelError) as e:
                    return self._recover(e, feeds, output_names, deadline)
            return self._recover(None, feeds, output_names, deadline)
        finally:
            if self._close_pending:        # close() gave up waiting: the last one out
                self._release()
            self._lock.release()

    def _attempt(self, engine, feeds: dict, output_names, deadline: RunDeadline,
                 after: BaseException | None = None) -> dict:
        """One run of the engine in what is left of the run's deadline (``after``: the
        failure the policy handled last)."""
        left = deadline.left()
        if left <= 0:
            why = f" again after {type(after).__name__}: {after}" if after is not None else ""
            raise RunTimeoutError(f"model '{self.name}': the run passed its deadline of "
                                  f"{deadline.budget:g} s before the model could run it{why}")
        try:
            outputs = engine.run(feeds, output_names, left, self._runs)
        except RunTimeoutError as e:
            raise deadline.restate(e, left) from None
        device = engine.device
        if device.epoch != engine.epoch:
            # The device lost its memory while the run was on it (and may be answering
            # again: a reset, a heartbeat's FAULT cleared): what the run read or wrote
            # after the loss is not to be trusted, even when no kernel failed.
            why = next((f.detail for f in reversed(device.faults) if f.kind != "reset"), "no answer")
            raise DeviceLostError(f"device {device.id} was lost while model '{self.name}' ran "
                                  f"on it ({why}); the run's outputs are not trusted")
        return outputs

    def _recover(self, error: BaseException | None, feeds: dict, output_names,
                 deadline: RunDeadline) -> dict:
        """After ``error`` (or with the device not ready: None), what the recovery policy
        says, then the run again, as long as the policy allows and the deadline leaves
        time (every action and attempt comes out of the run's deadline)."""
        policy, tries = self.recovery, Counter()
        last = error
        while True:
            engine = self._engine
            try:
                if error is not None:
                    raise error
                device = engine.device
                if not device.usable:
                    device.check_usable()          # a lost device: DeviceLostError
                if engine.epoch != device.epoch:
                    engine.restore()               # the device lost what was written
                return self._attempt(engine, feeds, output_names, deadline, last)
            except DeviceLostError as e:
                if tries["lost"] or policy.device_lost == "fail":
                    raise
                tries["lost"] += 1
                self._note(e, self._recover_lost(engine))
                last = e
            except DeviceOutOfMemoryError as e:
                if tries["oom"] or policy.out_of_memory != "release_and_retry":
                    raise
                tries["oom"] += 1
                pool = getattr(engine.device, "caching_allocator", None)
                freed = engine.release_cached() + (pool.release_cached() if pool else 0)
                self._note(e, f"released {freed} bytes of cached blocks and ran again")
                last = e
            except RunTimeoutError as e:
                if tries["timeout"] >= policy.timeout_retries or self._closing:
                    raise
                tries["timeout"] += 1
                deadline.extend(policy.timeout_factor)
                self._note(e, f"ran again with a deadline of {deadline.budget:g} s")
                last = e
            except KernelError as e:
                if tries["kernel"] >= policy.retries or self._closing:
                    raise
                tries["kernel"] += 1
                self._note(e, "ran again")
                last = e
            error = None

    def _recover_lost(self, engine) -> str:
        """Reset the lost device, or move to the next healthy failover device."""
        lost = engine.device
        if self.recovery.device_lost == "failover":
            for device in self.recovery.failover_devices or failover_candidates(lost):
                if device is lost or not device.usable:
                    continue
                try:
                    new = self._make(device)
                except DeviceOutOfMemoryError:
                    continue
                new.profiler = engine.profiler
                self._engine = new
                self._watch(device)
                engine.close()
                return f"failed over from device {lost.id} to device {device.id}"
        lost.reset()
        engine.restore()
        return f"reset device {lost.id}, wrote the weights again and ran again"

    def _note(self, error: BaseException, action: str) -> None:
        self.recoveries.append({"run": self._runs, "error": type(error).__name__,
                                "code": getattr(error, "code", None), "message": str(error),
                                "action": action})
        engine = getattr(self, "_engine", None)
        name = engine.name if engine is not None else self._label
        get_log("recovery").warning("model '%s' run %d: %s; %s", name, self._runs, error, action)

    # ------------------------------------------------------------ profiling
    def start_profiling(self) -> Profiler:
        """Record every run from now on into a new profile (:mod:`.profiling`): a Chrome
        trace of host threads, device streams, copies and events, and its summary."""
        prof = Profiler(self.name)
        self._engine.profiler = prof
        return prof

    @property
    def profiler(self) -> Profiler | None:
        """The profile recording now, or None."""
        return getattr(self._engine, "profiler", None)

    def end_profiling(self, path: str | os.PathLike | None = None) -> str:
        """Stop recording and write the trace (JSON) to ``path`` (default
        ``<model>_<date>_<time>.json`` in the working folder); returns the path, or ""
        when the model was not profiling (as onnxruntime's ``end_profiling``)."""
        prof = self.profiler
        if prof is None:
            return ""
        self._engine.profiler = None
        if path is None:
            path = f"{self.name}_{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        path = prof.write(path)
        get_log("profile").info("model '%s': profile of %d run(s) written to %s", self.name,
                                len(prof.runs), path)
        return path

    # ------------------------------------------------------------ close
    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Free the model's device memory and streams.  A run in flight gets ``timeout``
        seconds to finish, then is cancelled (it raises ``ModelClosedError``); memory a
        stuck kernel may still write is freed only when that kernel returns."""
        if self._closing:
            return
        self._closing = True
        got = self._lock.acquire(timeout=timeout)
        if not got:
            self._engine.cancel(self._closed_error("the model was closed during the run"))
            got = self._lock.acquire(timeout=4 * CANCEL_GRACE + 1.0)
        if got:
            try:
                self._release()
            finally:
                self._lock.release()
        else:
            self._close_pending = True          # the run in flight frees it when it returns
        self._closed = True

    def _release(self) -> None:
        self._close_pending = False
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        engine = self._engine
        if not isinstance(engine, _Closed):
            self._engine = _Closed(engine)
            engine.close()

    def _closed_error(self, why: str = "") -> ModelClosedError:
        name = self._engine.name
        return ModelClosedError(f"model '{name}' is closed{': ' + why if why else ''}; "
                                f"load it again to run it")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Closed:
    """What a closed model keeps of its engine: its description, not its resources."""

    def __init__(self, engine):
        self.name, self.inputs, self.outputs = engine.name, engine.inputs, engine.outputs
        self.device = engine.device
        self.streams: list = []
        self.profiler = None
        self.last_host_seconds = engine.last_host_seconds
        self._stats = engine.run_stats()

    def run_stats(self) -> RunStats:
        return self._stats

    def release_cached(self) -> int:
        return 0

    def close(self) -> None:
        pass

    def cancel(self, error: BaseException, wait: bool = True) -> None:
        pass


def _seconds(value) -> float:
    """A deadline in seconds (ConfigError unless it is a number > 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigError(f"timeout must be a number of seconds > 0, got {value!r}")
    return float(value)

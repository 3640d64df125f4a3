"""A loaded model as users hold it: its lifecycle, its runs' deadlines and its recovery.

:func:`aircc.load` returns a :class:`LoadedModel`.  It owns one *engine* per execution
context (a :class:`~.static_model.StaticModel` or :class:`~.dynamic_model.DynamicModel`
bound to one device: its own arena, streams and events, the weights shared with the
other contexts on the device) and adds what every mode shares:

- **N runs at once** (``load(..., contexts=N)``, default one): a run takes a free
  context, runs from more threads than contexts wait for one;
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
import time
import itertools
from collections import Counter
from concurrent.futures import Future
from dataclasses import replace
from typing import Callable, Sequence

from aircc.config import settings
from aircc.errors import (ConfigError, DeviceLostError, DeviceOutOfMemoryError, KernelError,
                          ModelClosedError, RunTimeoutError)
from aircc.executor.device.device import CANCEL_GRACE, VirtualDevice
from aircc.executor.device.discovery import failover_candidates
from aircc.executor.device.health import DeviceState
from aircc.executor.device.stream import in_device_worker
from aircc.formats.model_section import IOSpec
from aircc.log import get as get_log

from .contexts import ClosedEngine, ContextPool
from .engine import Engine, RunStats, combined
from .feeds import RunCall, device_output_names
from .profiling import Profiler
from .recovery import RecoveryPolicy, RunDeadline, default_policy, seconds
from .requests import Callback, RequestQueue

NONE: frozenset[str] = frozenset()

#: Seconds ``close()`` waits for a run in flight before it cancels it.
CLOSE_TIMEOUT = 5.0


class LoadedModel:
    """A model loaded on a device (see the module doc).  ``with aircc.load(path) as m:``
    closes it when the block ends, also on an error."""

    def __init__(self, make: Callable[..., Engine], device: VirtualDevice, *,
                 timeout: float | None = None, recovery: RecoveryPolicy | None = None,
                 name: str = "", contexts: int = 1):
        self._label = name or "model"
        """The model's name before its engine exists (for what a load's recovery logs)."""
        self.recovery = recovery if recovery is not None else default_policy()
        self.timeout = timeout
        self.recoveries: list[dict] = []
        """What the recovery policy did: one entry per failed attempt it handled."""
        self._make = make
        self._runs = itertools.count(1)
        self._closed = False
        self._unwatch: dict[int, Callable[[], None]] = {}
        self._last: Engine | None = None
        engines: list[Engine] = []
        self._contexts = ContextPool([])        # what a load's recovery sees: none yet
        try:
            for k in range(contexts):
                engines.append(self._load(make, device, k))
        except BaseException:
            for engine in engines:
                engine.close()
            raise
        self._contexts = ContextPool(engines)
        self._requests: RequestQueue | None = None
        self._max_in_flight = 2 * len(self._contexts)
        self._watch(device)

    @property
    def timeout(self) -> float:
        """The deadline of each run in seconds, unless ``run()`` gives one (set it to change
        it; None: ``$AIRCC_RUN_TIMEOUT``)."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        self._timeout = settings().run_timeout if value is None else seconds(value)

    def _load(self, make: Callable[..., Engine], device: VirtualDevice, context: int) -> Engine:
        """``make(device, context)``; on out of memory, the policy may release cached blocks
        first."""
        try:
            return make(device, context)
        except DeviceOutOfMemoryError as e:
            if self.recovery.out_of_memory != "release_and_retry" or not device.release_cached():
                raise
            self._note(e, "released the device's cached blocks and loaded again")
            return make(device, context)

    def _watch(self, device: VirtualDevice) -> None:
        """Hear ``device``'s state changes (and no longer those of devices no context is on)."""
        on = {id(e.device) for e in self._contexts}
        for key in [k for k in self._unwatch if k not in on]:
            self._unwatch.pop(key)()
        if id(device) not in self._unwatch:
            self._unwatch[id(device)] = device.on_state_change(self._device_changed)

    def _device_changed(self, device: VirtualDevice, old: DeviceState, new: DeviceState,
                        reason: str) -> None:
        """The device went to FAULT: stop the runs in flight on it, which then recover as
        the policy says (reset, fail over) or fail.  A fault raised by a kernel is raised
        by that kernel itself."""
        if new is not DeviceState.FAULT or in_device_worker():
            return
        for engine in list(self._contexts):
            if engine.device is device:
                engine.cancel(DeviceLostError(f"device {device.id} faulted during the run "
                                              f"({reason})"))

    # ------------------------------------------------------------ what it is
    @property
    def engine(self) -> Engine:
        """The engine of the first execution context (a StaticModel or a DynamicModel):
        the one a model of one context runs on."""
        return self._contexts[0]

    @property
    def contexts(self) -> int:
        """How many runs the model takes at once (``load(..., contexts=N)``)."""
        return len(self._contexts)

    @property
    def inputs(self) -> list[IOSpec]:
        return self._contexts[0].inputs

    @property
    def outputs(self) -> list[IOSpec]:
        return self._contexts[0].outputs

    @property
    def device(self) -> VirtualDevice:
        return self._contexts[0].device

    @property
    def name(self) -> str:
        return self._contexts[0].name

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_host_seconds(self) -> float:
        """Host time of the last run: preparing, submitting, collecting (not the wait)."""
        return (self._last or self._contexts[0]).last_host_seconds

    def release_cached(self) -> int:
        """Give back the device memory the model keeps cached (a dynamic model's recorded
        runs and free blocks), in every context no run holds; the bytes given back.  The
        next run takes what it needs."""
        return self._contexts.each_free(lambda engine: engine.release_cached())

    def run_stats(self) -> RunStats:
        """What the runs so far counted, over every context (:class:`~.engine.StaticRunStats`
        or :class:`~.engine.DynamicRunStats`), and the failed attempts recovery handled."""
        return replace(combined([e.run_stats() for e in self._contexts]),
                       recoveries=len(self.recoveries))

    # ------------------------------------------------------------ run
    def run(self, feeds: dict, output_names: list[str] | None = None,
            timeout: float | None = None, *,
            device_outputs: bool | Sequence[str] = False) -> dict:
        """One inference: ``{input name: array}`` -> ``{output name: array}``, in a free
        execution context (waiting for one while every context runs).  ``timeout``:
        seconds before the run is cancelled (default: the model's, else
        ``$AIRCC_RUN_TIMEOUT``).  A feed may be a device tensor (read on the device);
        ``device_outputs`` (True, or names) returns those outputs as device tensors."""
        deadline = RunDeadline.for_call(timeout, self._timeout)
        call = RunCall(feeds, output_names, device_output_names(
            self.outputs, device_outputs, output_names) if device_outputs else NONE)
        if self._contexts.closing:
            raise self._closed_error()
        k = self._contexts.take(deadline, self.name)
        if k is None:
            raise self._closed_error()
        try:
            if self._contexts.closing:
                raise self._closed_error()
            run_index = next(self._runs)
            engine = self._contexts[k]
            device = engine.device
            if device.usable and engine.epoch == device.epoch:
                try:
                    return self._attempt(k, engine, call, deadline, run_index)
                except (DeviceLostError, DeviceOutOfMemoryError, RunTimeoutError,
                        KernelError) as e:
                    return self._recover(k, e, call, deadline, run_index)
            return self._recover(k, None, call, deadline, run_index)
        finally:
            self._give(k)

    @property
    def max_in_flight(self) -> int:
        """Requests ``run_async`` holds at once, queued or running (default twice the
        contexts); one more waits for room."""
        return self._max_in_flight

    @max_in_flight.setter
    def max_in_flight(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"max_in_flight must be a whole number >= 1, got {value!r}")
        self._max_in_flight = value
        if self._requests is not None:
            self._requests.max_in_flight = value

    def run_async(self, feeds: dict, output_names: list[str] | None = None,
                  callback: Callback | None = None, timeout: float | None = None, *,
                  device_outputs: bool | Sequence[str] = False) -> Future:
        """Queue one inference and return at once: a :class:`concurrent.futures.Future` of
        its outputs (:mod:`.requests`).  The request runs in the next free context, in what
        is left of its deadline (``timeout``, else the model's, counted from this call);
        with :attr:`max_in_flight` requests queued or running, this call waits for room
        first.  ``callback(outputs, error)`` is called when it is done; ``future.cancel()``
        drops a request still queued.  ``device_outputs`` as for :meth:`run`."""
        deadline = RunDeadline.for_call(timeout, self._timeout)
        on_device = device_output_names(self.outputs, device_outputs, output_names)
        requests = self._requests
        if requests is None:
            with self._contexts.lock:
                if self._requests is None:
                    self._requests = RequestQueue(self.run, len(self._contexts),
                                                  self._max_in_flight, self.name)
                requests = self._requests
        if self._contexts.closing:
            requests.close()
        return requests.submit(feeds, output_names, deadline, callback, on_device)

    def _give(self, k: int) -> None:
        if self._contexts.give(k):          # close() gave up waiting: the last one out
            self._release()

    def _attempt(self, k: int, engine: Engine, call: RunCall, deadline: RunDeadline,
                 run_index: int, after: BaseException | None = None) -> dict:
        """One run of the engine in what is left of the run's deadline (``after``: the
        failure the policy handled last)."""
        left = deadline.left()
        if left <= 0:
            why = f" again after {type(after).__name__}: {after}" if after is not None else ""
            raise RunTimeoutError(f"model '{self.name}': the run passed its deadline of "
                                  f"{deadline.budget:g} s before the model could run it{why}")
        try:
            outputs = engine.run(call.feeds, call.output_names, left, run_index,
                                 call.device_outputs)
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
        self._last = engine
        return outputs

    def _recover(self, k: int, error: BaseException | None, call: RunCall,
                 deadline: RunDeadline, run_index: int) -> dict:
        """After ``error`` (or with the device not ready: None), what the recovery policy
        says, then the run again, as long as the policy allows and the deadline leaves
        time (every action and attempt comes out of the run's deadline)."""
        policy, tries = self.recovery, Counter()
        last = error
        while True:
            engine = self._contexts[k]
            try:
                if error is not None:
                    raise error
                device = engine.device
                if not device.usable:
                    device.check_usable()          # a lost device: DeviceLostError
                if engine.epoch != device.epoch:
                    engine.restore()               # the device lost what was written
                return self._attempt(k, engine, call, deadline, run_index, last)
            except DeviceLostError as e:
                if tries["lost"] or policy.device_lost == "fail":
                    raise
                tries["lost"] += 1
                self._note(e, self._recover_lost(k, engine), run_index)
                last = e
            except DeviceOutOfMemoryError as e:
                if tries["oom"] or policy.out_of_memory != "release_and_retry":
                    raise
                tries["oom"] += 1
                pool = getattr(engine.device, "caching_allocator", None)
                freed = engine.release_cached() + (pool.release_cached() if pool else 0)
                self._note(e, f"released {freed} bytes of cached blocks and ran again", run_index)
                last = e
            except RunTimeoutError as e:
                if tries["timeout"] >= policy.timeout_retries or self._contexts.closing:
                    raise
                tries["timeout"] += 1
                deadline.extend(policy.timeout_factor)
                self._note(e, f"ran again with a deadline of {deadline.budget:g} s", run_index)
                last = e
            except KernelError as e:
                if tries["kernel"] >= policy.retries or self._contexts.closing:
                    raise
                tries["kernel"] += 1
                self._note(e, "ran again", run_index)
                last = e
            error = None

    def _recover_lost(self, k: int, engine: Engine) -> str:
        """Reset the lost device (unless another context did already), or move this context
        to the next healthy failover device."""
        lost = engine.device
        if self.recovery.device_lost == "failover":
            for device in self.recovery.failover_devices or failover_candidates(lost):
                if device is lost or not device.usable:
                    continue
                try:
                    new = self._make(device, k)
                except DeviceOutOfMemoryError:
                    continue
                new.profiler = engine.profiler
                self._contexts[k] = new
                self._watch(device)
                engine.close()
                return f"failed over from device {lost.id} to device {device.id}"
        with self._contexts.lock:           # one context resets a device the others ran on too
            if not lost.usable:
                lost.reset()
        engine.restore()
        return f"reset device {lost.id}, wrote the weights again and ran again"

    def _note(self, error: BaseException, action: str, run_index: int = 0) -> None:
        self.recoveries.append({"run": run_index, "error": type(error).__name__,
                                "code": getattr(error, "code", None), "message": str(error),
                                "action": action})
        name = self._contexts[0].name if self._contexts else self._label
        get_log("recovery").warning("model '%s' run %d: %s; %s", name, run_index, error, action)

    # ------------------------------------------------------------ profiling
    def start_profiling(self) -> Profiler:
        """Record every run from now on into a new profile (:mod:`.profiling`): a Chrome
        trace of host threads, device streams, copies and events, and its summary."""
        prof = Profiler(self.name)
        for engine in self._contexts:
            engine.profiler = prof
        return prof

    @property
    def profiler(self) -> Profiler | None:
        """The profile recording now, or None."""
        return getattr(self._contexts[0], "profiler", None)

    def end_profiling(self, path: str | os.PathLike | None = None) -> str:
        """Stop recording and write the trace (JSON) to ``path`` (default
        ``<model>_<date>_<time>.json`` in the working folder); returns the path, or ""
        when the model was not profiling (as onnxruntime's ``end_profiling``)."""
        prof = self.profiler
        if prof is None:
            return ""
        for engine in self._contexts:
            engine.profiler = None
        if path is None:
            path = f"{self.name}_{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        path = prof.write(path)
        get_log("profile").info("model '%s': profile of %d run(s) written to %s", self.name,
                                len(prof.runs), path)
        return path

    # ------------------------------------------------------------ close
    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Free the model's device memory and streams.  Runs in flight get ``timeout``
        seconds to finish, then are cancelled (they raise ``ModelClosedError``); memory a
        stuck kernel may still write is freed only when that kernel returns."""
        if self._contexts.closing:
            return
        requests = self._requests
        self._contexts.closing = True
        if requests is not None:
            requests.close()                    # queued requests fail; running ones end below
        if self._contexts.close(timeout, lambda engine: engine.cancel(
                self._closed_error("the model was closed during the run"))):
            self._release()
        if requests is not None:
            requests.join(CANCEL_GRACE)
        self._closed = True

    def _release(self) -> None:
        self._contexts.close_pending = False
        for unwatch in self._unwatch.values():
            unwatch()
        self._unwatch.clear()
        for k in range(len(self._contexts)):
            engine = self._contexts[k]
            if not isinstance(engine, ClosedEngine):
                self._contexts[k] = ClosedEngine(engine)
                engine.close()

    def _closed_error(self, why: str = "") -> ModelClosedError:
        return ModelClosedError(f"model '{self.name}' is closed{': ' + why if why else ''}; "
                                f"load it again to run it")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


"""Fault injection: make a kernel fail, hang, run out of memory or lose its device, on
purpose, to see that a program (and aircc's recovery) survives it.

    from aircc import faults
    faults.inject("hang", node="conv1", seconds=2)    # the next run hangs in node conv1
    faults.inject("kernel_error", run=3)              # the 3rd run of a model: its first kernel fails
    faults.clear()                                    # remove every fault (hung kernels return)

or ``device`` (a logical device id) limits a fault to models running on that device.
Or from the environment, read once per process (``aircc.config``)::

    AIRCC_FAULTS="hang@node=conv1,seconds=2;device_lost@run=5,model=resnet"

A fault fires when a kernel of a matching node runs (``node``: a node name, as ``aircc
inspect`` shows them, or the name of the node a fused kernel starts with; none: the
first kernel of the run), in a matching run (``run``: the n-th run of a model, counted
from 1 per loaded model; none: any run) of a matching model (``model``: its name),
``times`` times (0: every time).  Kinds:

==================  ===========================================================
``kernel_error``    the kernel raises (the run fails with ``KernelError``)
``hang``            the kernel does not return for ``seconds`` (default 3600, or until
                    :func:`clear`); the run's deadline ends the run
``oom``             the node's memory cannot be had (``DeviceOutOfMemoryError``)
``device_lost``     the device stops answering and loses its memory contents
                    (``DeviceLostError``) until it is reset
``unresponsive``    the device stops answering: the kernel and the device's control
                    processor do not return for ``seconds`` (as ``hang``); its fault
                    detection (a heartbeat) puts it in FAULT, else the run's deadline
                    ends the run
``corrupt``         the kernel runs, then ``value`` (default 1.0) is added to the first
                    element of each of its outputs (an integer output: at least 1; a
                    bool: flipped): a wrong answer and no error, for testing a
                    verification (``aircc verify``)
==================  ===========================================================
"""
from __future__ import annotations

import enum
import threading
import weakref
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


class FaultKind(str, enum.Enum):
    KERNEL_ERROR = "kernel_error"
    HANG = "hang"
    OOM = "oom"
    DEVICE_LOST = "device_lost"
    CORRUPT = "corrupt"
    UNRESPONSIVE = "unresponsive"


class InjectedFault(RuntimeError):
    """What an injected ``kernel_error`` raises inside the kernel (reported as a
    ``KernelError`` naming the node, as any kernel failure is)."""


@dataclass(eq=False)
class Fault:
    """One armed fault (see the module doc for the fields)."""

    kind: FaultKind
    node: str | None = None
    run: int | None = None
    model: str | None = None
    times: int = 1
    seconds: float = 3600.0
    device: int | None = None
    value: float = 1.0
    """What a ``corrupt`` fault adds to the first element of each output."""
    fired: int = 0
    released: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set by :func:`clear` (or :meth:`release`): a hang in progress returns."""

    def matches(self, model: str, run: int, device: int | None = None) -> bool:
        return ((self.run is None or self.run == run) and (self.model is None or self.model == model)
                and (self.device is None or self.device == device))

    def release(self) -> None:
        self.released.set()

    def hang(self) -> None:
        """Block like a kernel that does not return, for ``seconds`` or until released."""
        self.released.wait(self.seconds)

    def corrupt(self, outputs: Sequence[np.ndarray | None]) -> None:
        """Perturb a kernel's ``outputs`` in place, as a ``corrupt`` fault does (the first
        element of each: ``value`` added, at least 1 for integers, a bool flipped)."""
        for out in outputs:
            if not isinstance(out, np.ndarray) or out.size == 0 or out.dtype == object:
                continue
            first = (0,) * out.ndim             # in place whatever the strides
            if out.dtype == np.bool_:
                out[first] = not out[first]
            elif out.dtype.kind in "iu":
                out[first] += max(1, int(self.value))
            else:
                out[first] = np.float64(out[first]) + self.value


_lock = threading.Lock()
_armed: list[Fault] = []
_spent: "weakref.WeakSet[Fault]" = weakref.WeakSet()   # fired their times: a hang may go on
_from_env = False


def inject(kind: str | FaultKind, *, node: str | None = None, run: int | None = None,
           model: str | None = None, times: int = 1, seconds: float | None = None,
           device: int | None = None, value: float | None = None) -> Fault:
    """Arm a fault (see the module doc); returns it (``fault.fired`` counts its firings)."""
    fault = _make(kind, node, run, model, times, seconds, device, value)
    with _lock:
        _armed.append(fault)
    return fault


def clear() -> None:
    """Remove every armed fault and let every hang in progress return."""
    global _from_env
    with _lock:
        for f in [*_armed, *_spent]:
            f.release()
        _armed.clear()
        _spent.clear()
        _from_env = True        # the environment's faults are cleared too, not re-read


def armed() -> list[Fault]:
    """The faults that can still fire."""
    _load_env()
    with _lock:
        return list(_armed)


def for_run(model: str, run: int, device: int | None = None) -> dict[str | None, Fault] | None:
    """The faults that may fire in run ``run`` of model ``model`` on logical device
    ``device``, by node name (None: the run's first kernel); None when there are none
    (the common case, one check per run)."""
    if not _armed and _from_env:
        return None
    _load_env()
    with _lock:
        plan = {f.node: f for f in _armed if f.matches(model, run, device)}
    return plan or None


def pick(plan: dict, node: str) -> Fault | None:
    """The fault of ``plan`` for the kernel of ``node``: its own, or that of the node it was
    made from (a fused kernel ``mul1/chain`` is node ``mul1``'s), or the run's first kernel's."""
    return plan.get(node) or plan.get(node.partition("/")[0]) or plan.get(None)


def fire(fault: Fault) -> bool:
    """Count one firing of ``fault``; False if it has fired its ``times`` already."""
    with _lock:
        if fault.times and fault.fired >= fault.times:
            return False
        fault.fired += 1
        if fault.times and fault.fired >= fault.times and fault in _armed:
            _armed.remove(fault)
            _spent.add(fault)           # clear() still lets its hang return
        return True


def parse(text: str) -> list[Fault]:
    """``"hang@node=conv1,seconds=2;kernel_error@run=3"`` -> faults (ValueError naming
    what is wrong)."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        kind, _, rest = part.partition("@")
        fields: dict[str, str] = {}
        for item in filter(None, (x.strip() for x in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq or key not in FIELDS:
                raise ValueError(f"'{item}' in fault '{part}' is not one of "
                                 f"{', '.join(f + '=' for f in FIELDS)}")
            fields[key] = value
        try:
            out.append(_make(kind.strip(), fields.get("node"),
                             int(fields["run"]) if "run" in fields else None, fields.get("model"),
                             int(fields.get("times", 1)),
                             float(fields["seconds"]) if "seconds" in fields else None,
                             int(fields["device"]) if "device" in fields else None,
                             float(fields["value"]) if "value" in fields else None))
        except ValueError as e:
            raise ValueError(f"fault '{part}': {e}") from None
    return out


#: The fields a fault's text may give (``kind@field=value,...``).
FIELDS = ("node", "run", "model", "times", "seconds", "device", "value")


def _make(kind, node, run, model, times, seconds, device=None, value=None) -> Fault:
    try:
        kind = FaultKind(kind)
    except ValueError:
        raise ValueError(f"unknown fault kind {kind!r}; known: "
                         f"{', '.join(k.value for k in FaultKind)}") from None
    if run is not None and run < 1:
        raise ValueError(f"run must be >= 1 (the n-th run of a model), got {run}")
    if times < 0:
        raise ValueError(f"times must be >= 0 (0: every time), got {times}")
    if seconds is not None and not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    if device is not None and device < 0:
        raise ValueError(f"device must be a logical device id >= 0, got {device}")
    if value is not None and not np.isfinite(value):
        raise ValueError(f"value must be a finite number, got {value}")
    return Fault(kind, node or None, run, model or None, times,
                 3600.0 if seconds is None else float(seconds), device=device,
                 value=1.0 if value is None else float(value))


def _load_env() -> None:
    """Arm ``$AIRCC_FAULTS`` once (through :mod:`aircc.config`, which reads the environment)."""
    if not _from_env:
        load_environment()


def load_environment() -> list[Fault]:
    """Arm the faults ``$AIRCC_FAULTS`` names (as :func:`aircc.config.settings` read it);
    done on first use, again only when asked (after :func:`aircc.config.reload`)."""
    global _from_env
    from aircc.config import settings

    env = settings().faults
    added = parse(env) if env else []
    with _lock:
        _armed.extend(added)
        _from_env = True
    return added

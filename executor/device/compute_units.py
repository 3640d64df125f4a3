"""The device's compute units, shared by its streams, served by priority.

On the device this project models, streams are queues in front of a fixed set of
compute units: a stream's next task runs when a unit is free, and when several
streams have a task ready the scheduler picks the stream of highest priority (a
communication stream is not starved behind a queue of kernels).  Here each stream's
worker thread holds a unit while it runs a task.  Waiting tasks are served by
``(priority, submission order)``: the higher priority first; among equal priorities
the task submitted first (every task is stamped with a device-wide sequence number
when it is queued), so that without priorities the device runs work in the order
the host gave it.

- A worker that finishes a task and has the next one queued keeps its unit unless a
  waiting task ranks before that next one (:meth:`ComputeUnits.pass_or_keep`).
- A long walk (a static model's task list is one queued task) offers its unit at
  each task boundary to a waiting task of *higher* priority (:meth:`yield_point`,
  one attribute read when nobody waits).
- A worker blocked in an event wait gives its unit back while it waits
  (:meth:`released_while`), so that the stream it waits for can run.
- A worker stuck in a kernel that the device gave up on has its unit written off
  (:meth:`forfeit`): the device gets a replacement unit until the kernel returns.

The free units never outnumber :attr:`ComputeUnits.count`: a unit given back by a
holder that took none is a :class:`ComputeUnitError` (a bug in aircc, not a state to
recover from).

Cost: an uncontended acquire or release is one lock round trip (well under a
microsecond); a contended one adds a wake-up of the thread served next.
"""
from __future__ import annotations

import contextlib
import heapq
import itertools
import threading

#: Stream priorities: an int in [PRIORITY_MIN, PRIORITY_MAX], higher is served first.
PRIORITY_MIN, PRIORITY_MAX, PRIORITY_DEFAULT = -7, 7, 0
PRIORITY_NAMES = {"low": PRIORITY_MIN, "normal": PRIORITY_DEFAULT, "high": PRIORITY_MAX}


class ComputeUnitError(RuntimeError):
    """The device's count of its units broke (a unit given back that was not taken): a bug
    in aircc, never a user's error."""


def check_priority(priority) -> int:
    """An int in [-7, 7] (or ``"low"``, ``"normal"``, ``"high"``); ValueError naming the
    allowed values otherwise."""
    if isinstance(priority, str) and priority.strip().lower() in PRIORITY_NAMES:
        return PRIORITY_NAMES[priority.strip().lower()]
    if isinstance(priority, bool) or not isinstance(priority, int) \
            or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(f"stream priority must be an int in [{PRIORITY_MIN}, {PRIORITY_MAX}] "
                         f"(higher runs first) or one of {', '.join(PRIORITY_NAMES)}, "
                         f"got {priority!r}")
    return priority


def stream_priority(base: int, compiled: list[int], index: int) -> int:
    """Stream ``index`` of a model loaded at priority ``base``: ``base`` plus what the
    compiler gave the stream, kept in range."""
    extra = compiled[index] if index < len(compiled) else 0
    return max(PRIORITY_MIN, min(PRIORITY_MAX, base + extra))


class Holder:
    """What a worker thread needs to hold a unit: its stream's priority and the
    sequence number of the task it runs (its place in the queue)."""

    __slots__ = ("priority", "seq", "holding", "forfeited", "grant")

    def __init__(self, priority: int):
        self.priority = priority
        self.seq = 0
        self.holding = False
        self.forfeited = False
        self.grant = threading.Lock()       # released by whoever hands this holder a unit
        self.grant.acquire()


class ComputeUnits:
    """``count`` compute units shared by a device's streams (see the module doc)."""

    def __init__(self, count: int):
        if count < 1:
            raise ValueError(f"a device needs at least one compute unit, got {count}")
        self.count = count
        self._free = count
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, int, Holder]] = []   # heap of (-prio, seq, tie, h)
        self._tie = itertools.count()
        self.top = None
        """The highest priority waiting now (None: nobody waits); read without the lock."""
        self.stats = {"grants": 0, "waits": 0, "handoffs": 0, "preemptions": 0,
                      "forfeited": 0}

    @property
    def busy(self) -> int:
        """Units held now."""
        return self.count - self._free

    @property
    def free(self) -> int:
        """Units free now (never more than :attr:`count`)."""
        return self._free

    # ------------------------------------------------------------ take and give back
    def acquire(self, h: Holder) -> None:
        """Take a unit for ``h`` (its ``priority`` and ``seq`` set), waiting for one if
        none is free or a task ranked before it waits."""
        with self._lock:
            self.stats["grants"] += 1
            if self._free and not self._waiting:
                self._free -= 1
                h.holding = True
                return
            self._enqueue(h)
        h.grant.acquire()

    def try_acquire(self, h: Holder) -> bool:
        """Take a unit for ``h`` if one is free and no task waits for one; False (nothing
        taken) otherwise.  Never waits."""
        with self._lock:
            if not self._free or self._waiting:
                return False
            self.stats["grants"] += 1
            self._free -= 1
            h.holding = True
            return True

    def release(self, h: Holder) -> None:
        """Give ``h``'s unit back (to the best waiting task, if any); ComputeUnitError if
        ``h`` holds none."""
        with self._lock:
            if not h.holding:
                raise ComputeUnitError(f"a unit given back by a holder not holding one "
                                       f"({self._free} of {self.count} units free)")
            h.holding = False
            if h.forfeited:                 # a replacement unit was lent meanwhile
                h.forfeited = False
                self.count -= 1
                return
            self._hand_on()

    def pass_or_keep(self, h: Holder, next_seq: int) -> None:
        """Between two tasks of ``h``'s stream: keep the unit for the next one (its
        sequence number ``next_seq``), unless a waiting task ranks before it."""
        h.seq = next_seq
        if self.top is None:
            return
        self._step_aside(h, "handoffs", lambda best: best[:2] <= (-h.priority, next_seq))

    def yield_point(self, h: Holder) -> None:
        """Inside a long task: let a waiting task of higher priority run first."""
        top = self.top
        if top is None or top <= h.priority:
            return
        self._step_aside(h, "preemptions", lambda best: -best[0] > h.priority)

    def _step_aside(self, h: Holder, stat: str, before) -> None:
        """Hand ``h``'s unit to the best waiting task if ``before(its heap entry)``, and
        wait for a unit in ``h``'s turn."""
        with self._lock:
            if not self._waiting or h.forfeited or not before(self._waiting[0]):
                return
            if not h.holding:
                raise ComputeUnitError("a unit handed on by a holder not holding one")
            self.stats[stat] += 1
            h.holding = False
            self._enqueue(h)
            self._hand_on()
        h.grant.acquire()

    @contextlib.contextmanager
    def released_while(self, h: Holder | None):
        """Give ``h``'s unit back for the block (a wait on another stream), then take
        one again in its place in the queue."""
        if h is None or not h.holding:
            yield
            return
        self.release(h)
        try:
            yield
        finally:
            self.acquire(h)

    def forfeit(self, h: Holder) -> None:
        """``h``'s worker is stuck in a kernel the device gave up on: lend the device a
        replacement unit until that worker gives its unit back."""
        with self._lock:
            if not h.holding or h.forfeited:
                return
            h.forfeited = True
            self.count += 1
            self.stats["forfeited"] += 1
            self._hand_on()

    # ------------------------------------------------------------ internals (lock held)
    def _enqueue(self, h: Holder) -> None:
        self.stats["waits"] += 1
        heapq.heappush(self._waiting, (-h.priority, h.seq, next(self._tie), h))
        self.top = -self._waiting[0][0]

    def _hand_on(self) -> None:
        """A unit just came free: give it to the best waiting task, else keep it."""
        if self._waiting:
            h = heapq.heappop(self._waiting)[3]
            self.top = -self._waiting[0][0] if self._waiting else None
            h.holding = True
            h.grant.release()
        elif self._free < self.count:
            self._free += 1
        else:
            raise ComputeUnitError(f"a unit came back to a device whose {self.count} units "
                                   f"are all free")

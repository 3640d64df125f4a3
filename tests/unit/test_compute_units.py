"""The device's compute units: a stream's worker gives back only the unit it took, so the
free units never outnumber the device's units, and the device's parallelism limit holds
after any number of tasks that took none (a Signal, a synchronize of an idle stream)."""
from __future__ import annotations

import threading
import time

import pytest

from aircc.executor.device.compute_units import ComputeUnitError, ComputeUnits, Holder
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.stream import Signal


def two_tasks_seconds(dev: VirtualDevice, seconds: float = 0.2) -> float:
    """How long one ``seconds``-long task on each of two new streams takes in all."""
    a, b = dev.create_stream(), dev.create_stream()
    t0 = time.perf_counter()
    a.submit(lambda: time.sleep(seconds))
    b.submit(lambda: time.sleep(seconds))
    a.synchronize(10)
    b.synchronize(10)
    return time.perf_counter() - t0


def test_tasks_that_take_no_unit_give_none_back():
    dev = VirtualDevice(1 << 20, compute_units=1)
    try:
        s = dev.create_stream()
        for _ in range(20):
            s.synchronize(5)                   # a Signal on an idle stream: no unit taken
            s.submit(Signal(lambda: None))
        s.synchronize(5)
        assert dev.units.free == 1 and dev.units.busy == 0
        assert two_tasks_seconds(dev) >= 0.38  # one unit: the two tasks run one after the other
        assert dev.units.free == 1
    finally:
        dev.close()


def test_giving_back_a_unit_not_taken_is_an_internal_error():
    units = ComputeUnits(2)
    idle = Holder(0)
    with pytest.raises(ComputeUnitError, match="not holding"):
        units.release(idle)
    busy = Holder(0)
    units.acquire(busy)
    units.release(busy)
    with pytest.raises(ComputeUnitError):
        units.release(busy)                    # twice
    assert units.free == 2 and units.busy == 0


def test_a_forfeited_unit_comes_back_once_and_the_count_holds():
    """A stuck worker's unit is lent to the device until it returns; then the device has
    its own units again, no more."""
    units = ComputeUnits(1)
    stuck, other = Holder(0), Holder(0)
    units.acquire(stuck)
    units.forfeit(stuck)                       # the device lends a unit meanwhile
    units.acquire(other)                       # the lent unit
    units.release(other)
    units.release(stuck)                       # the kernel returned: the loan ends
    assert units.count == 1 and units.free == 1
    waiter = threading.Thread(target=lambda: (units.acquire(other), units.release(other)))
    waiter.start()
    waiter.join(5)
    assert not waiter.is_alive() and units.free == 1

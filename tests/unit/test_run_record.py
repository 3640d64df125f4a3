"""The record of a program's execution, re-armed for every execution: a cancel from another
thread stops the execution it was meant for, never the next one, and is never lost.

Found by the chaos test (``test_chaos.py``): a device's FAULT callback cancelled the run it
had seen in flight while that run ended and the next one started on the same record; the
next run's walks stopped with no error and ``run()`` returned an output of None.
"""
from __future__ import annotations

import numpy as np
import pytest

from aircc.errors import DeviceError, DeviceLostError
from aircc.executor.device.device import VirtualDevice
from aircc.executor.device.run import DeviceProgram, Run

LOST = DeviceLostError("device 0 faulted during the run (test)")


def test_a_cancel_meant_for_the_last_execution_leaves_the_next_alone():
    run = Run(1)
    run.arm([], [None])
    seen = run.execution                  # what a canceller saw in flight
    run.arm([], [None])                   # that execution ended; the next one is armed
    assert run.fail(LOST, [], seen) is False
    assert run.error is None and not run.cancelled
    assert run.fail(LOST, [], run.execution) is True
    assert run.error is LOST and run.cancelled


def test_a_cancel_between_submission_and_the_first_task_is_kept():
    """The device side's start of the run clears nothing a cancel set: only the host's arm
    does, before anyone can see the execution."""
    run = Run(2)
    run.arm([], [None])
    assert run.fail(LOST, [], run.execution)
    run.start([])
    assert run.cancelled and run.error is LOST


def test_a_new_execution_starts_with_no_error_of_the_last():
    run = Run(1)
    run.arm([], [None])
    run.fail(LOST, [])
    run.arm([], [None])
    assert run.error is None and not run.cancelled


def test_a_run_that_ends_without_its_outputs_and_no_error_is_an_error():
    """By construction: the device never hands back an answer with a hole in it."""
    dev = VirtualDevice(1 << 20)
    try:
        stream = dev.create_stream()

        def copy_out(run):                    # a device-to-host copy that is skipped
            return None

        program = DeviceProgram([stream], [], [[(copy_out, {"kind": "memcpy_d2h"})]], name="holes")
        results = [np.zeros(2, np.float32), None]
        with pytest.raises(DeviceError, match="'holes'.*without copying out output 1"):
            dev.execute(program, [], results, timeout=5)
        results = [np.zeros(2, np.float32), np.ones(2, np.float32)]
        dev.execute(program, [], results, timeout=5)     # the next one is fine
    finally:
        dev.close()

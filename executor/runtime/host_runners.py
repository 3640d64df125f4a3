"""Who runs a dynamic run's host kernels: one thread in order, or three stage threads.

Pipelined, every kernel passes through the normal stage (this thread), the memory
stage and the launch stage in order, and each stage runs the kernels that are its own
(:data:`~aircc.formats.kinds.STAGE_OF`).  A failure cancels the run: the stages pass
the remaining kernels on without running them.
"""
from __future__ import annotations

import queue
import threading

from aircc.formats.kinds import STAGE_OF, HostStage

from ..device.threads import quiet_floating_point
from .host_pipeline import RunState

_DONE = object()


def run_sequential(state: RunState) -> None:
    """All host kernels in order, in the calling thread."""
    for position, kernel in enumerate(state.plan.kernels):
        if state.cancelled:
            break
        try:
            state.execute(position, kernel)
        except BaseException as e:
            state.fail(e)
            break
        state.mark_launched(position)


def run_pipelined(state: RunState) -> None:
    """Normal, memory and launch stages on three threads, connected by queues."""
    q_memory: queue.Queue = queue.Queue()
    q_launch: queue.Queue = queue.Queue()

    def stage(name: HostStage, inbox, outbox) -> None:
        quiet_floating_point()                 # this thread runs host kernels
        while True:
            item = inbox.get() if inbox is not None else None
            if item is _DONE:
                break
            position, kernel = item
            if not state.cancelled and STAGE_OF[kernel.kind] is name:
                try:
                    state.execute(position, kernel)
                except BaseException as e:
                    state.fail(e)
            if outbox is not None:
                outbox.put(item)
            else:
                state.mark_launched(position)
        if outbox is not None:
            outbox.put(_DONE)

    memory = threading.Thread(target=stage, args=(HostStage.MEMORY, q_memory, q_launch), daemon=True)
    launch = threading.Thread(target=stage, args=(HostStage.LAUNCH, q_launch, None), daemon=True)
    memory.start()
    launch.start()
    for position, kernel in enumerate(state.plan.kernels):   # the normal stage is this thread
        if not state.cancelled and STAGE_OF[kernel.kind] is HostStage.NORMAL:
            try:
                state.execute(position, kernel)
            except BaseException as e:
                state.fail(e)
        q_memory.put((position, kernel))
    q_memory.put(_DONE)
    memory.join()
    launch.join()

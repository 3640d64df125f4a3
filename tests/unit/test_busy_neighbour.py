"""OpenMP teams shrink while another process keeps a CPU busy (executor/device/threads:
``usable_cpus``) and grow back when it stops; ``AIRCC_ADAPT_THREADS=0`` keeps them whole;
a device worker's team follows."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from aircc.errors import ConfigError
from aircc.executor.device import threads

pytestmark = pytest.mark.skipif(len(threads.available_cpus()) < 2 or not os.path.exists("/proc/stat"),
                                reason="two CPUs and /proc/stat")


def _until(predicate, seconds: float = 8.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_spinning_neighbour_takes_a_cpu_from_the_teams_until_it_stops(aircc_env):
    from aircc.executor.kernels.dnnl_backend.common import worker_cpus

    cpus = len(threads.available_cpus())
    aircc_env("AIRCC_ADAPT_THREADS", "1")
    assert _until(lambda: threads.usable_cpus() == cpus)        # a quiet machine: all of them
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert _until(lambda: threads.usable_cpus() == cpus - 1), threads.others_load()
        assert threads.others_load() >= threads.TAKEN_AT
        seen = {}

        def in_worker():
            threads.mark_device_worker()
            seen["team"] = worker_cpus()

        worker = threading.Thread(target=in_worker)
        worker.start()
        worker.join()
        assert seen["team"] == cpus - 1                          # a device worker's team
        aircc_env("AIRCC_ADAPT_THREADS", "0")
        assert threads.usable_cpus() == cpus                     # kept whole on request
        aircc_env("AIRCC_ADAPT_THREADS", "1")
    finally:
        neighbour.kill()
        neighbour.wait()
    assert _until(lambda: threads.usable_cpus() == cpus), threads.others_load()


def test_a_bad_adapt_setting_is_refused(aircc_env):
    with pytest.raises(ConfigError, match="AIRCC_ADAPT_THREADS"):
        aircc_env("AIRCC_ADAPT_THREADS", "sometimes")

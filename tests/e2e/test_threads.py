"""One thread count for every pool aircc drives: set by the API, the environment or
``airrun --threads``; the device's workers kept within it."""
from __future__ import annotations

import threading

import pytest
from click.testing import CliRunner

import aircc
from aircc.cli.airrun_cmd import main as airrun
from aircc.errors import ConfigError
from aircc.executor.device import threads
from testdata import SAMPLES


@pytest.fixture(autouse=True)
def restore_threads():
    yield
    aircc.set_threads(None)


def test_one_thread_pins_the_device_workers_and_the_default_uses_every_cpu(aircc_env):
    cpus = threads.available_cpus()
    assert aircc.set_threads(None) == len(cpus)
    assert aircc.VirtualDevice(1 << 20).cpus is None
    if len(cpus) > 1:
        before = threads.generation()
        assert aircc.set_threads(1) == 1 and threads.generation() == before + 1
        dev = aircc.VirtualDevice(1 << 20)
        assert len(dev.cpus) == 1 and dev.cpus <= set(cpus)
        seen = []
        s = dev.create_stream()
        s.submit(lambda: seen.append(__import__("os").sched_getaffinity(0)))
        s.synchronize(5)
        assert seen == [set(dev.cpus)]
        dev.close()
    aircc_env("AIRCC_THREADS", "1")
    assert aircc.set_threads(None) == 1


@pytest.mark.parametrize("bad", [0, len(threads.available_cpus()) + 1, 1.5, True])
def test_a_thread_count_outside_the_cpus_is_refused(bad):
    with pytest.raises(ConfigError, match="threads must be a whole number from 1 to"):
        aircc.set_threads(bad)


def test_airrun_threads(tmp_path):
    om = tmp_path / "mlp.om"
    aircc.compile(f"{SAMPLES}/mlp.onnx", str(om), input_shapes={"input": [4, 784]})
    r = CliRunner().invoke(airrun, [str(om), "--random", "0", "--threads", "1", "--quiet"])
    assert r.exit_code == 0, r.output
    assert threads.threads() == 1
    r = CliRunner().invoke(airrun, [str(om), "--random", "0", "--threads", "0"])
    assert r.exit_code == 2 and r.stderr.startswith("error: [100001]")


PIN_ONE = """
import sys, aircc
aircc.set_threads(1)
print(sorted(aircc.VirtualDevice(1 << 20).cpus), flush=True)
sys.stdin.read()                   # hold the claim until told to end
"""


def test_processes_at_one_thread_pin_their_workers_to_different_cpus(tmp_path):
    """Two processes at one thread each: their devices' workers go to different CPUs, and a
    third, once every CPU is claimed, shares the first one."""
    import json
    import subprocess
    import sys

    cpus = threads.available_cpus()
    if len(cpus) < 2:
        pytest.fail("this test needs a machine with 2 CPUs or more")
    env = {**__import__("os").environ, "TMPDIR": str(tmp_path)}   # the claims' folder
    procs, pinned = [], []
    try:
        for _ in range(len(cpus) + 1):     # one after the other: each holds its claim
            procs.append(subprocess.Popen([sys.executable, "-c", PIN_ONE], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, text=True, env=env))
            pinned.append(json.loads(procs[-1].stdout.readline()))
    finally:
        for p in procs:
            p.communicate("", timeout=60)
    firsts = sorted(c for (c,) in pinned[:len(cpus)])
    assert firsts == sorted(cpus)                        # one CPU each, all different
    assert pinned[-1] == [cpus[0]]                       # every CPU claimed: the first, shared

"""How many threads aircc's work may use: one setting for every pool aircc drives.

On a small machine every thread pool that outnumbers the cores costs whole scheduler
ticks: a BLAS pool, an OpenMP team and the device's stream workers each sized to the
machine fight each other, and a spinning idle thread starves its neighbour.  One
number governs them all (:func:`threads`): ``aircc.set_threads(n)``, ``airrun
--threads N``, ``$AIRCC_THREADS``; by default the CPUs this process may use.

- numpy's OpenBLAS gets ``n`` threads (``openblas_set_num_threads``), or one once an
  OpenMP-based backend is in use (:func:`openmp_in_use`): its idle threads spin for a
  tenth of a second after every product and would take the cores OpenMP's team needs
  next (a 1.3 ms oneDNN matmul took 3-5x longer right after a numpy one);
- an OpenMP-based kernel backend sets ``n`` in each stream worker before it runs a
  kernel there (its OpenMP count is per calling thread): it compares
  :func:`generation` with the one it last applied;
- the device's stream workers are pinned to ``n`` of the process's CPUs when ``n`` is
  fewer than it may use (and the device was not given CPUs of its own), so that the
  pools they start stay within them.  Which ``n``: CPUs no other process has claimed,
  so that two processes at ``--threads 1`` do not both pin to the first CPU (a claim is
  an advisory lock on a file per CPU in the temporary folder, dropped by the kernel
  when the process ends); when every CPU is claimed, the first ``n``.

Busy neighbours.  An OpenMP team waits for its slowest thread at the end of every
parallel region, and a thread that shares its CPU with a busy process gets half of it:
with a neighbour spinning on one of the two CPUs, ResNet-50 ran 104 ms on a team of two
and 77 ms on a team of one (onnxruntime 86 ms).  So :func:`usable_cpus` watches how much
CPU other processes take (``/proc/stat`` less this process's own time, every
:data:`LOAD_INTERVAL` seconds, a moving average) and counts a CPU as taken from
:data:`TAKEN_AT` of a core on; an OpenMP-based backend sizes its teams to the CPUs left
(at least one), and goes back to the full team when the neighbour stops
(``AIRCC_ADAPT_THREADS=0``: always the full team).
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import tempfile
import threading
import time

import numpy as np

from aircc.config import settings
from aircc.errors import ConfigError

_lock = threading.Lock()
_threads: int | None = None
_generation = 0
_openmp = False

#: numpy's OpenBLAS thread-count setters, by the names its builds export.
_OPENBLAS_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                     "openblas_set_num_threads")


def available_cpus() -> list[int]:
    """The CPUs this process may run on, in order."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else list(range(os.cpu_count() or 1))


def threads() -> int:
    """The thread count in force (set, else ``$AIRCC_THREADS``, else the CPUs available)."""
    if _threads is None:
        set_threads(None)
    return _threads  # type: ignore[return-value]


def generation() -> int:
    """Bumped whenever the count changes (a backend re-applies it when it sees a new one)."""
    return _generation


def set_threads(n: int | None) -> int:
    """Use ``n`` threads (None: ``$AIRCC_THREADS``, else every CPU available); returns it.
    ConfigError unless ``n`` is a whole number from 1 to the CPUs available."""
    global _threads, _generation
    cpus = len(available_cpus())
    value = settings().threads if n is None else n
    value = cpus if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cpus:
        raise ConfigError(f"threads must be a whole number from 1 to {cpus} (the CPUs this "
                          f"process may use), got {value!r}")
    with _lock:
        if value != _threads:
            _threads = value
            _generation += 1
            _set_openblas(1 if _openmp else value)
    return value


def openmp_in_use() -> None:
    """An OpenMP-based kernel backend runs kernels in this process: numpy's OpenBLAS gets
    one thread from now on (see the module doc)."""
    global _openmp
    threads()                     # the setting is made (and applied) first
    with _lock:
        if not _openmp:
            _openmp = True
            _set_openblas(1)


#: Seconds between two looks at how much CPU other processes take (:func:`usable_cpus`).
LOAD_INTERVAL = 0.5
#: Cores of other processes' work (a moving average) from which a CPU counts as taken.
TAKEN_AT = 0.6

_load_lock = threading.Lock()
_load_at = 0.0
_load_busy: float | None = None       # the machine's busy CPU seconds then (/proc/stat)
_load_ours = 0.0                      # this process's CPU seconds then
_others = 0.0                         # other processes' cores, a moving average
_usable: int | None = None


def usable_cpus() -> int:
    """The CPUs this process may use less those other processes keep busy (at least one;
    see the module doc).  Cheap: it looks at the machine again only every
    :data:`LOAD_INTERVAL` seconds."""
    if time.monotonic() - _load_at >= LOAD_INTERVAL or _usable is None:
        _look_at_load()
    return _usable if settings().adapt_threads else len(available_cpus())  # type: ignore[return-value]


def others_load() -> float:
    """Cores other processes kept busy lately (a moving average; 0 where unknown)."""
    usable_cpus()
    return _others


def _look_at_load() -> None:
    global _load_at, _load_busy, _load_ours, _others, _usable
    if not _load_lock.acquire(blocking=False):
        if _usable is None:
            _usable = len(available_cpus())
        return
    try:
        now = time.monotonic()
        cpus = len(available_cpus())
        busy = _busy_seconds()
        times = os.times()
        ours = times.user + times.system
        if busy is not None and _load_busy is not None and now > _load_at:
            others = max(0.0, (busy - _load_busy) - (ours - _load_ours)) / (now - _load_at)
            _others = 0.5 * _others + 0.5 * min(others, float(cpus))
        _load_at, _load_busy, _load_ours = now, busy, ours
        _usable = max(1, cpus - int(_others + 1.0 - TAKEN_AT))
    finally:
        _load_lock.release()


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_seconds() -> float | None:
    """CPU seconds the machine has spent busy (user, nice, system, irq, softirq, steal),
    from ``/proc/stat``; None where there is none."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != b"cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS


#: Kernel calls that ran on an OpenMP team of more than one thread so far, counted by an
#: OpenMP-based backend (races may lose a count: it is only compared, before and after a
#: run, to see whether the run used more than one CPU).
parallel_calls = 0


def one_cpu_kernels() -> bool:
    """Do kernels outside an OpenMP backend (numpy's OpenBLAS) run on one thread?"""
    return _openmp or threads() == 1


_local = threading.local()


def mark_device_worker() -> None:
    """The calling thread is a device's stream worker (:class:`~.stream.Stream` calls this
    first): the threads whose kernels may use an OpenMP team of more than one thread.  Its
    kernels give IEEE results where ONNX wants them (log(0) = -inf, sqrt(-1) = NaN), so
    numpy's floating-point warnings are off in it (numpy's error state is the thread's own)."""
    _local.device_worker = True
    quiet_floating_point()


def quiet_floating_point() -> None:
    """numpy's floating-point warnings off in the calling thread, which runs kernels."""
    np.seterr(all="ignore")


def is_device_worker() -> bool:
    return getattr(_local, "device_worker", False)


#: Device workers that formed an OpenMP team of more than one thread (thread idents).
_teams: set[int] = set()


def team_formed() -> None:
    """The calling device worker now keeps an OpenMP team (an OpenMP-based backend says so
    when it first runs a kernel on more than one thread there)."""
    ident = threading.get_ident()
    if ident not in _teams:
        with _lock:
            _teams.add(ident)


def team_gone() -> None:
    """The calling thread's team, if it had one, ends with it (a worker that ends)."""
    with _lock:
        _teams.discard(threading.get_ident())


def lone_team() -> bool:
    """Is the calling thread's OpenMP team the only one in the process?"""
    ident = threading.get_ident()
    return ident in _teams and len(_teams) == 1


def worker_cpus() -> frozenset[int] | None:
    """The CPUs a device's stream workers should run on: :func:`threads` of the process's,
    claimed ones first (see the module doc), or None (no pinning) when that is all of
    them."""
    cpus = available_cpus()
    n = threads()
    if n >= len(cpus):
        return None
    with _lock:
        mine = [c for c in cpus if c in _claims]
        for c in cpus:
            if len(mine) >= n:
                break
            if c not in _claims and _claim(c):
                mine.append(c)
        if len(mine) < n:             # every CPU is claimed: share the first ones
            mine += [c for c in cpus if c not in mine][:n - len(mine)]
        return frozenset(sorted(mine)[:n])


#: CPU -> the open file whose lock claims it for this process.
_claims: dict[int, int] = {}


def _claim(cpu: int) -> bool:
    """Claim ``cpu`` for this process's device workers (False: another process has it,
    or the claim file cannot be had)."""
    path = os.path.join(tempfile.gettempdir(), f"aircc-cpu{cpu}.lock")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _claims[cpu] = fd
    return True


def _set_openblas(n: int) -> None:
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    try:
        handle = ctypes.CDLL(umath.__file__)
    except OSError:
        return
    for name in _OPENBLAS_SETTERS:
        fn = getattr(handle, name, None)
        if fn is not None:
            fn.restype = None
            fn.argtypes = [ctypes.c_int]
            fn(n)
            return

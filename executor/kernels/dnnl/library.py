"""libdnnl, oneDNN 3.2 from the ``onednn-cpu-gomp`` wheel, loaded through ctypes.

:func:`lib` loads it once per process (from the files the wheel's RECORD lists, then
``sys.prefix/lib``), declares the prototypes of :mod:`.capi` and checks its version;
:func:`available` says whether that works here and :func:`unavailable_reason` why not
(not x86-64 Linux, the wheel not installed, no system libgomp).  Every C call that
returns a status raises :class:`DnnlError` (:class:`DnnlUnimplemented` for
``dnnl_unimplemented``, so a caller can fall back to another kernel) naming the call.

:func:`engine` is the process's CPU engine; :func:`stream` the calling thread's
stream, made the first time the thread asks (a stream is never shared across threads).

Threads.  oneDNN runs its parallel regions on OpenMP (the system's libgomp).
:func:`set_threads` calls libgomp's ``omp_set_num_threads``, which sets the *calling
thread's* count: a thread that creates or executes primitives calls it itself, with
the same count for both (most implementations split their work when the primitive
descriptor is made, and the primitive cache keys on the count).  So create under
``with using_threads(n):`` and bind with ``threads=n`` (the :class:`~.primitive.Bound`
then sets the executing thread's count when it differs); the primitive itself is made
under the count its descriptor was made under, wherever it is bound.  A thread that
never sets it gets libgomp's default (``OMP_NUM_THREADS`` or the number of CPUs).  Even a 16-element
eltwise opens a parallel region: about 7 us with 2 threads against 1.4 us with 1.

Environment.  libgomp reads its wait policy once, when it is loaded: by default its
idle threads spin for a while after each parallel region, taking a core from whoever
runs next (on a 2-core machine, the numpy kernel or the stream worker that follows).
So just before loading the library, when neither ``OMP_WAIT_POLICY`` nor
``GOMP_SPINCOUNT`` is set, this module sets ``GOMP_SPINCOUNT`` to :data:`SPINCOUNT`
in the process environment (child processes inherit it).  That is the only environment
this module reads or writes (aircc's own variables are read by :mod:`aircc.config`);
:func:`spin_policy` says what was in force, and whether libgomp was already loaded by
someone else (then the setting came too late).  Measured with ``tools/dnnl_spin_bench.py``
on 2 vCPUs: a 256x256 numpy GEMM right after a oneDNN convolution took 4.2 ms with
libgomp's default (0.29 ms alone), 0.18 ms with this setting, while convolutions called
back to back kept their speed (``OMP_WAIT_POLICY=PASSIVE`` doubles them).

Fork.  libgomp is not fork-safe: a child forked after oneDNN ran a parallel region hangs
in its next one unless it first calls ``set_threads(1)`` and makes its own primitives.
Start worker processes with ``spawn``.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import os
import platform
import sys
import threading
from pathlib import Path

from . import capi
from .enums import VERSION, CpuIsa, EngineKind, Status

DISTRIBUTION = "onednn-cpu-gomp"
REQUIREMENT = f"{DISTRIBUTION}==2023.2.0"
LIBRARY_NAMES = ("libdnnl.so.3", "libdnnl.so.3.2", "libdnnl.so")
"""The wheel installs the same library under each name (wheels carry no symlinks)."""
GOMP = "libgomp.so.1"

SPINCOUNT = "10000"
"""``GOMP_SPINCOUNT`` set when the user set no wait policy: an idle OpenMP thread spins
this many rounds before it sleeps, instead of libgomp's 300000 (see the module doc)."""


class DnnlError(RuntimeError):
    """A oneDNN C call failed; ``call`` names it, ``status`` is its ``dnnl_status_t``."""

    def __init__(self, message: str, call: str = "", status: int | None = None):
        super().__init__(message)
        self.call = call
        self.status = status


class DnnlUnimplemented(DnnlError):
    """oneDNN has no implementation for the request (``dnnl_unimplemented``)."""


class DnnlUnavailable(DnnlError):
    """libdnnl cannot be loaded here (the message says why)."""


def status_name(status: int) -> str:
    """``dnnl_unimplemented`` for 3, and so on."""
    try:
        return f"dnnl_{Status(status).name}"
    except ValueError:
        return f"status {status}"


def error(status: int, call: str, detail: str = "") -> DnnlError:
    """The exception for a failed call (not raised)."""
    cls = DnnlUnimplemented if status == Status.unimplemented else DnnlError
    message = f"{call} returned {status_name(status)}" + (f": {detail}" if detail else "")
    return cls(message, call, status)


def check(status: int, call: str, detail: str = "") -> None:
    """Raise :class:`DnnlError` (or :class:`DnnlUnimplemented`) unless ``status`` is
    ``dnnl_success``; ``detail`` says what was asked."""
    if status != Status.success:
        raise error(status, call, detail)


def _errcheck(result: int, func, _args):
    if result != Status.success:
        raise error(result, func.__name__)
    return result


class Library:
    """The loaded libdnnl: ``dll`` (every prototype of :mod:`.capi` declared, status
    checked), ``hot`` (the per-execution functions, unchecked), ``gomp``, ``engine``."""

    def __init__(self, path: Path, dll: ctypes.CDLL, gomp: ctypes.CDLL, spin: dict):
        self.path = path
        self.dll = dll
        self.hot = capi.declare(dll, _errcheck)
        self.gomp = gomp
        self.gomp.omp_set_num_threads.argtypes = [ctypes.c_int]
        self.gomp.omp_set_num_threads.restype = None
        self.gomp.omp_get_max_threads.argtypes = []
        self.gomp.omp_get_max_threads.restype = ctypes.c_int
        self.spin = spin
        self.engine = ctypes.c_void_p()


_lock = threading.Lock()
_loaded: Library | None = None
_reason: str | None = None
_tls = threading.local()


def library_candidates() -> list[Path]:
    """Where libdnnl may be, best first: the files the wheel's RECORD lists, then
    ``lib/`` under the interpreter's prefixes."""
    found: list[Path] = []
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
        by_name = {Path(str(f)).name: f for f in dist.files or ()}
        found += [Path(str(dist.locate_file(by_name[n]))).resolve()
                  for n in LIBRARY_NAMES if n in by_name]
    except importlib.metadata.PackageNotFoundError:
        pass
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix)):
        found += [Path(prefix) / "lib" / n for n in LIBRARY_NAMES]
    return [p for p in dict.fromkeys(found) if p.is_file()]


def _gomp_loaded() -> bool:
    try:
        return "/libgomp" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def _set_spin_policy() -> dict:
    """Set ``GOMP_SPINCOUNT`` unless the user chose a wait policy (see the module doc)."""
    already = _gomp_loaded()
    user = {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ}
    if not user and not already:
        os.environ["GOMP_SPINCOUNT"] = SPINCOUNT
    return {"set_by": "user" if user else ("too late" if already else "aircc"),
            "OMP_WAIT_POLICY": user.get("OMP_WAIT_POLICY"),
            "GOMP_SPINCOUNT": user.get("GOMP_SPINCOUNT", None if user or already else SPINCOUNT),
            "gomp_loaded_before": already}


def _load() -> Library:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise DnnlUnavailable(f"the oneDNN backend needs x86-64 Linux, this is "
                              f"{sys.platform} on {platform.machine()}")
    candidates = library_candidates()
    if not candidates:
        raise DnnlUnavailable(f"libdnnl not found: {DISTRIBUTION} is not installed "
                              f"(pip install '{REQUIREMENT}')")
    spin = _set_spin_policy()
    try:
        gomp = ctypes.CDLL(GOMP, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise DnnlUnavailable(f"{GOMP}, the GNU OpenMP runtime libdnnl needs, cannot be "
                              f"loaded (install the system package libgomp1): {exc}") from None
    errors = []
    for path in candidates:
        try:
            dll = ctypes.CDLL(str(path))
            break
        except OSError as exc:
            errors.append(f"{path}: {exc}")
    else:
        raise DnnlUnavailable("libdnnl cannot be loaded: " + "; ".join(errors))
    loaded = Library(path, dll, gomp, spin)
    v = loaded.dll.dnnl_version().contents
    if (v.major, v.minor) != VERSION[:2]:
        raise DnnlUnavailable(f"{path} is oneDNN {v.major}.{v.minor}.{v.patch}; the binding "
                              f"is generated for {VERSION[0]}.{VERSION[1]} ({REQUIREMENT})")
    if loaded.dll.dnnl_engine_get_count(EngineKind.cpu) < 1:
        raise DnnlUnavailable(f"{path} has no CPU engine")
    loaded.dll.dnnl_engine_create(ctypes.byref(loaded.engine), EngineKind.cpu, 0)
    return loaded


def lib() -> Library:
    """The loaded library (loading it the first time); :class:`DnnlUnavailable` when
    it cannot be loaded here."""
    global _loaded, _reason
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is None:
            if _reason is not None:
                raise DnnlUnavailable(_reason)
            try:
                _loaded = _load()
            except DnnlUnavailable as exc:
                _reason = str(exc)
                raise
    return _loaded


def available() -> bool:
    """Whether oneDNN can be used in this process (loads it the first time)."""
    try:
        lib()
        return True
    except DnnlUnavailable:
        return False


def unavailable_reason() -> str | None:
    """Why :func:`available` is False (None when it is True)."""
    return None if available() else _reason


def engine() -> ctypes.c_void_p:
    """The process's CPU engine."""
    return lib().engine


class ThreadState:
    """The calling thread's oneDNN state: its stream and the OpenMP thread count it set."""

    __slots__ = ("stream", "threads", "_set", "_destroy", "__weakref__")

    def __init__(self, library: Library):
        self.stream = ctypes.c_void_p()
        self.threads: int | None = None
        """The count :func:`set_threads` last set on this thread (None: libgomp's default)."""
        self._set = library.gomp.omp_set_num_threads
        self._destroy = library.dll.dnnl_stream_destroy
        library.dll.dnnl_stream_create(ctypes.byref(self.stream), library.engine, 0x1)

    def set_threads(self, n: int) -> None:
        self._set(n)
        self.threads = n

    def __del__(self):
        try:
            self._destroy(self.stream)
        except Exception:                       # interpreter shutting down
            pass


def thread_state() -> ThreadState:
    """The calling thread's :class:`ThreadState` (made on first use)."""
    state = getattr(_tls, "state", None)
    if state is None:
        state = _tls.state = ThreadState(lib())
    return state


def stream() -> ctypes.c_void_p:
    """The calling thread's in-order stream on the CPU engine (made on first use)."""
    return thread_state().stream


def set_threads(n: int) -> None:
    """OpenMP threads for oneDNN calls made *by the calling thread* (see the module doc)."""
    if n < 1:
        raise ValueError(f"set_threads({n}): the thread count must be at least 1")
    thread_state().set_threads(int(n))


def max_threads() -> int:
    """The OpenMP thread count of the calling thread's next oneDNN call."""
    return lib().gomp.omp_get_max_threads()


@contextlib.contextmanager
def using_threads(n: int):
    """``with using_threads(n):`` the calling thread's oneDNN calls use ``n`` OpenMP threads
    (create a primitive with the count it will run with), then the count before."""
    before = thread_state().threads
    previous = max_threads()
    set_threads(n)
    try:
        yield
    finally:
        thread_state().set_threads(previous)
        thread_state().threads = before


def spin_policy() -> dict:
    """What decided OpenMP's wait policy: ``set_by`` (``user``, ``aircc`` or ``too
    late``: libgomp was loaded before this module), the variables in force."""
    return dict(lib().spin)


def version() -> str:
    """oneDNN's version, e.g. ``3.2.0 (40112196287e)``."""
    v = lib().dll.dnnl_version().contents
    return f"{v.major}.{v.minor}.{v.patch} ({v.hash.decode()[:12]})"


def effective_isa() -> str:
    """The instruction set oneDNN's JIT kernels use here (e.g. ``avx512_core``)."""
    isa = lib().dll.dnnl_get_effective_cpu_isa()
    try:
        return CpuIsa(isa).name
    except ValueError:
        return hex(isa)

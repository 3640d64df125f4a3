"""Device discovery: the configured virtual devices, probed at start, given logical ids.

After the runtime this project models (probe, check, map, activate):

1. **Configuration.** ``$AIR_DEVICE_CONFIG`` names a JSON file that describes each
   virtual device (docs/runtime.md)::

       {"probe_timeout_ms": 1000,
        "devices": [{"id": 0, "memory": "2G", "compute_units": 2, "cpus": "0-1",
                     "health": "ok", "response_ms": 1,
                     "pool": {"initial_bytes": 0, "growth_bytes": "2M", "reuse": true}}]}

   Without it there is one device sized from the host (``$AIR_DEVICE_MEMORY``, the
   CPUs this process may use).  ``$AIR_VISIBLE_DEVICES`` (physical ids, e.g. ``2,0``)
   narrows and reorders the devices before anything is probed, as
   ``ASCEND_RT_VISIBLE_DEVICES`` and ``CUDA_VISIBLE_DEVICES`` do.
2. **Probe.** Every visible device is created and answers a bounded handshake at
   once, all in parallel: a task on its control processor that takes the device's
   simulated ``response_ms``, checks its ``health`` and writes and reads back a test
   pattern in its memory.  A device that reports a problem, fails the memory test or
   does not answer within ``probe_timeout_ms`` is UNAVAILABLE and never used.
3. **Logical ids.** The devices that answered get contiguous logical ids 0, 1, ... in
   the visible order (configuration order, by physical id, when nothing narrows it):
   the same configuration gives the same ids on every start.
4. **Fault detection.** With ``$AIR_FAULT_DETECTION_MS`` set, each device that answered
   gets a periodic heartbeat from then on (:mod:`.heartbeat`).

Cost: one thread hand-off per device, plus the slowest answering device's
``response_ms``, bounded by ``probe_timeout_ms``.
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from aircc.config import parse_bytes, settings
from aircc.errors import ConfigError, DeviceError
from aircc.log import get as get_log

from .caching_allocator import PoolOptions
from .cpus import parse_cpus
from .device import VirtualDevice

DEFAULT_PROBE_TIMEOUT_MS = 1000.0
#: The host's own device (no configuration) simulates no delay: it is given long enough
#: that a busy machine does not make it look dead.
HOST_PROBE_TIMEOUT_MS = 30_000.0
#: Bytes of the test pattern each device writes and reads back when probed.
PROBE_PATTERN_BYTES = 4096
HEALTHY_WORDS = ("ok", "healthy")

_DEVICE_KEYS = {"id", "name", "memory", "compute_units", "cpus", "health", "response_ms", "pool"}
_POOL_KEYS = {"initial_bytes", "growth_bytes", "reuse"}


@dataclass(frozen=True)
class DeviceSpec:
    """One configured device (a ``devices`` entry of the configuration)."""

    physical_id: int
    name: str
    memory_bytes: int
    compute_units: int | None = None
    cpus: str | None = None
    health: str = "ok"
    """``ok``, or what is wrong with it (``ecc_error``, ``overheated``, ...)."""
    response_ms: float = 0.0
    """How long the device takes to answer its probe (simulated)."""
    pool: PoolOptions = field(default_factory=PoolOptions)


@dataclass(frozen=True)
class DeviceConfig:
    devices: tuple[DeviceSpec, ...]
    probe_timeout_ms: float = DEFAULT_PROBE_TIMEOUT_MS
    source: str = "the host"


@dataclass(frozen=True)
class DeviceInfo:
    """What discovery found of one visible device (``aircc.devices()``)."""

    logical_id: int | None
    """None for an UNAVAILABLE device."""
    physical_id: int
    name: str
    state: str
    memory_bytes: int
    compute_units: int
    cpus: str
    probe_ms: float | None
    """How long its probe took (None: no answer in time)."""
    reason: str = ""
    """Why it is unavailable."""


# ---------------------------------------------------------------- configuration
def host_config() -> DeviceConfig:
    """One device sized from the host: ``$AIR_DEVICE_MEMORY``, ``$AIR_DEVICE_CPUS``."""
    s = settings()
    return DeviceConfig((DeviceSpec(0, "dev0", s.device_memory, cpus=s.device_cpus),),
                        HOST_PROBE_TIMEOUT_MS)


def load_config(source: str | os.PathLike | dict) -> DeviceConfig:
    """A configuration from a JSON file (path) or an already-parsed dict; ConfigError
    naming the file and the field when something is wrong."""
    where = "device configuration"
    if isinstance(source, dict):
        raw = source
    else:
        where = f"device configuration {os.fspath(source)!r}"
        try:
            with open(source, encoding="utf-8") as f:
                raw = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"{where} does not exist (AIR_DEVICE_CONFIG)") from None
        except (OSError, ValueError) as e:
            raise ConfigError(f"{where} cannot be read as JSON: {e}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("devices"), list) or not raw["devices"]:
        raise ConfigError(f"{where}: expected an object with a non-empty list 'devices'")
    unknown = set(raw) - {"devices", "probe_timeout_ms"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)} (allowed: devices, "
                          f"probe_timeout_ms)")
    timeout = _number(raw.get("probe_timeout_ms", DEFAULT_PROBE_TIMEOUT_MS), where,
                      "probe_timeout_ms", positive=True)
    specs = [_spec(d, i, where) for i, d in enumerate(raw["devices"])]
    ids = [s.physical_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{where}: device ids must be unique, got {ids}")
    return DeviceConfig(tuple(sorted(specs, key=lambda s: s.physical_id)), timeout, where)


def _spec(d, i: int, where: str) -> DeviceSpec:
    w = f"{where}: devices[{i}]"
    if not isinstance(d, dict):
        raise ConfigError(f"{w} must be an object")
    unknown = set(d) - _DEVICE_KEYS
    if unknown:
        raise ConfigError(f"{w}: unknown keys {sorted(unknown)} (allowed: {', '.join(sorted(_DEVICE_KEYS))})")
    pid = d.get("id", i)
    if isinstance(pid, bool) or not isinstance(pid, int) or pid < 0:
        raise ConfigError(f"{w}.id must be an int >= 0, got {pid!r}")
    units = d.get("compute_units")
    if units is not None and (isinstance(units, bool) or not isinstance(units, int) or units < 1):
        raise ConfigError(f"{w}.compute_units must be an int >= 1, got {units!r}")
    cpus = d.get("cpus")
    if cpus is not None:
        try:
            parse_cpus(str(cpus))
        except DeviceError as e:
            raise ConfigError(f"{w}.cpus: {e.message}") from None
        cpus = str(cpus)
    health = d.get("health", "ok")
    if not isinstance(health, str) or not health:
        raise ConfigError(f"{w}.health must be 'ok' or a word saying what is wrong, got {health!r}")
    return DeviceSpec(pid, str(d.get("name", f"dev{pid}")), _bytes(d.get("memory", "1G"), w, "memory"),
                      units, cpus, health,
                      _number(d.get("response_ms", 0), w, "response_ms"),
                      _pool(d.get("pool", {}), w))


def _pool(p, w: str) -> PoolOptions:
    if not isinstance(p, dict) or set(p) - _POOL_KEYS:
        raise ConfigError(f"{w}.pool must be an object with keys among {sorted(_POOL_KEYS)}, got {p!r}")
    try:
        return PoolOptions(initial_bytes=_bytes(p.get("initial_bytes", 0), w, "pool.initial_bytes", zero=True),
                           growth_bytes=_bytes(p.get("growth_bytes", 2 << 20), w, "pool.growth_bytes"),
                           reuse=p.get("reuse", True))
    except DeviceError as e:
        raise ConfigError(f"{w}: {e.message}") from None


def _bytes(v, w: str, key: str, zero: bool = False) -> int:
    if zero and v == 0:
        return 0
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v
    try:
        return parse_bytes(str(v))
    except ValueError as e:
        raise ConfigError(f"{w}.{key}: {e}") from None


def _number(v, w: str, key: str, positive: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (positive and v == 0):
        raise ConfigError(f"{w}: {key} must be a number >= 0{' and > 0' if positive else ''}, got {v!r}")
    return float(v)


# ---------------------------------------------------------------- probing
class _Probe:
    """One device's handshake: a control-processor task that answers after the device's
    response time with its health and a memory test."""

    def __init__(self, device: VirtualDevice, spec: DeviceSpec):
        self.device, self.spec = device, spec
        self.answered = threading.Event()
        self.problem = ""
        self.seconds: float | None = None
        self._t0 = time.perf_counter()
        device.run_on_control(self._answer)

    def _answer(self) -> None:
        if self.spec.response_ms:
            time.sleep(self.spec.response_ms / 1e3)
        try:
            if self.spec.health.lower() not in HEALTHY_WORDS:
                self.problem = f"reports {self.spec.health!r}"
            else:
                self.problem = _memory_test(self.device)
        except Exception as e:         # a device that cannot even run its probe
            self.problem = f"probe failed: {type(e).__name__}: {e}"
        self.seconds = time.perf_counter() - self._t0
        self.answered.set()


def _memory_test(device: VirtualDevice) -> str:
    """Write a pattern into device memory and read it back ("" when it matches)."""
    mem = device.memory
    n = min(PROBE_PATTERN_BYTES, mem.capacity)
    off = mem.malloc(n, "probe pattern")
    try:
        view = mem.view(off, np.uint8, (n,))
        pattern = (np.arange(n, dtype=np.uint32) * 2654435761 >> 24).astype(np.uint8)
        view[:] = pattern
        if not np.array_equal(view, pattern):
            return "failed the memory test (read back differs)"
        return ""
    finally:
        mem.free(off)
        mem.reset_peaks()


class DeviceRegistry:
    """The devices one discovery found: every visible one, and the usable ones by
    logical id (see the module doc)."""

    def __init__(self, config: DeviceConfig, visible: tuple[int, ...] | None = None):
        self.config = config
        known = [s.physical_id for s in config.devices]
        if visible is None:
            specs = list(config.devices)
        else:
            missing = [v for v in visible if v not in known]
            if missing:
                raise ConfigError(f"AIR_VISIBLE_DEVICES names devices {missing} that "
                                  f"{config.source} does not have (its ids: {known})")
            by_id = {s.physical_id: s for s in config.devices}
            specs = [by_id[v] for v in visible]
        self.infos: list[DeviceInfo] = []
        self._devices: list[VirtualDevice] = []
        probes = []
        for spec in specs:
            dev = VirtualDevice(spec.memory_bytes, 0, spec.cpus, compute_units=spec.compute_units,
                                pool=spec.pool, name=spec.name)
            dev.physical_id = spec.physical_id
            probes.append(_Probe(dev, spec))
        deadline = time.perf_counter() + config.probe_timeout_ms / 1e3
        for p in probes:
            p.answered.wait(max(0.0, deadline - time.perf_counter()))
        for p in probes:
            dev, spec = p.device, p.spec
            ok = p.answered.is_set() and not p.problem
            if ok:
                dev.id = len(self._devices)
                self._devices.append(dev)
            else:
                reason = p.problem or (f"did not answer its probe within "
                                       f"{config.probe_timeout_ms:g} ms")
                dev.mark_unavailable(f"device {spec.physical_id} ({spec.name}) {reason}")
                dev.close(wait=False)
            log = get_log("devices")
            if ok:
                log.info("device %d (%s): logical %d, %s, probe %.2f ms", spec.physical_id,
                         spec.name, dev.id, config.source, 1e3 * (p.seconds or 0))
            else:
                log.warning("device %d (%s) is unavailable: %s", spec.physical_id, spec.name,
                            reason)
            self.infos.append(DeviceInfo(dev.id if ok else None, spec.physical_id, spec.name,
                                         dev.state.value, spec.memory_bytes, dev.units.count,
                                         ",".join(map(str, sorted(dev.cpus))) if dev.cpus else "any",
                                         None if p.seconds is None or not p.answered.is_set()
                                         else round(p.seconds * 1e3, 3), "" if ok else reason))
        if settings().fault_detection is not None:      # $AIR_FAULT_DETECTION_MS
            for dev in self._devices:
                dev.enable_fault_detection(settings().fault_detection)

    def __len__(self) -> int:
        return len(self._devices)

    def get(self, logical_id: int) -> VirtualDevice:
        """The device of ``logical_id``; DeviceError naming the ids there are."""
        if isinstance(logical_id, bool) or not isinstance(logical_id, int) \
                or not 0 <= logical_id < len(self._devices):
            have = f"0-{len(self._devices) - 1}" if self._devices else "none"
            raise DeviceError(f"no device {logical_id!r}: the logical devices are {have} "
                              f"({len(self.infos) - len(self._devices)} unavailable; "
                              f"see airrun --list-devices)")
        dev = self._devices[logical_id]
        if dev.closed:
            raise DeviceError(f"device {logical_id} is closed")
        return dev

    @property
    def devices(self) -> list[VirtualDevice]:
        return list(self._devices)

    def close(self) -> None:
        for d in self._devices:
            d.close()


_registry: DeviceRegistry | None = None
_registry_lock = threading.Lock()


def discover(config: str | os.PathLike | dict | DeviceConfig | None = None,
             visible: str | tuple[int, ...] | None = None) -> DeviceRegistry:
    """Probe the devices of ``config`` (a path, a dict or a :class:`DeviceConfig`;
    default ``$AIR_DEVICE_CONFIG``, else one device sized from the host), narrowed by
    ``visible`` (default ``$AIR_VISIBLE_DEVICES``).  A new registry, apart from the
    process's own (:func:`registry`)."""
    if config is None:
        config = settings().device_config
    cfg = config if isinstance(config, DeviceConfig) else \
        host_config() if config is None else load_config(config)
    if visible is None:
        visible = settings().visible_devices
    elif isinstance(visible, str):
        try:
            visible = tuple(int(x) for x in visible.replace(" ", "").split(",") if x)
        except ValueError:
            raise ConfigError(f"visible devices {visible!r}: expected ids like 0,1") from None
    return DeviceRegistry(cfg, visible)


def registry() -> DeviceRegistry:
    """The process's devices, discovered on first use."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = discover()
        return _registry


def rediscover() -> DeviceRegistry:
    """Close the process's devices and discover them again (after the configuration or
    the environment changed on purpose)."""
    global _registry
    with _registry_lock:
        old, _registry = _registry, None
    if old is not None:
        old.close()
    return registry()



def resolve_device(device: VirtualDevice | int | None) -> VirtualDevice:
    """A device given as itself, as a logical id, or None (logical device 0)."""
    if device is None:
        return registry().get(0)
    if isinstance(device, VirtualDevice):
        return device
    return registry().get(device)


def failover_candidates(lost: VirtualDevice) -> list[VirtualDevice]:
    """The process's other usable logical devices, in order, when ``lost`` is one of
    them (a device made apart from discovery has no such neighbours)."""
    reg = _registry
    if reg is None or lost not in reg.devices:
        return []
    return [d for d in reg.devices if d is not lost and d.usable]

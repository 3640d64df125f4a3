"""aircc.Checkpoint: host arrays and device tensors of every dtype aircc stores saved and
restored byte for byte; every flipped byte, every cut and forged sizes refused with a
CheckpointError and without allocating what the file declares; saves are atomic."""
from __future__ import annotations

import os
import struct
import tracemalloc
import zlib

import ml_dtypes
import numpy as np
import pytest

import aircc
from aircc.errors import CheckpointError, DeviceLostError, DeviceOutOfMemoryError
from aircc.executor.device.device import VirtualDevice
from aircc.executor.runtime import checkpoint_format as fmt
from aircc.executor.runtime.checkpoint import DeviceTensor
from aircc.formats.checks import DTYPES, dtype_from_name

SHAPES = [(), (0, 3), (2, 3, 4)]


def random_array(dtype: np.dtype, shape: tuple, seed: int) -> np.ndarray:
    """Random bytes seen as ``dtype`` (NaNs, infinities and odd patterns included)."""
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes (NaN payloads included)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture
def dev():
    d = VirtualDevice(4 << 20)
    yield d
    d.close()


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_host_arrays_and_device_tensors_of_every_dtype_round_trip(name, dev, tmp_path):
    dtype = dtype_from_name(name)
    ck = aircc.Checkpoint({"step": 7, "dtype": name})
    used = dev.memory.used
    for k, shape in enumerate(SHAPES):
        host = random_array(dtype, shape, k)
        ck.add(f"host{k}", host)
        t = DeviceTensor.allocate(dev, dtype, shape)
        t.write(random_array(dtype, shape, 10 + k))
        ck.add(f"device{k}", t)
    ck.save(tmp_path / "c.ckpt")
    back = aircc.Checkpoint.load(tmp_path / "c.ckpt")
    assert back.meta == {"step": 7, "dtype": name} and back.names() == ck.names()
    for k, shape in enumerate(SHAPES):
        assert same(back[f"host{k}"], random_array(dtype, shape, k)), (name, shape)
        assert same(back[f"device{k}"], random_array(dtype, shape, 10 + k)), (name, shape)
        assert back.spec(f"device{k}") == (dtype, shape)
    restored = back.restore(dev)                  # new allocations
    assert all(same(t.numpy(), back[n]) for n, t in restored.items())
    into = {n: DeviceTensor.allocate(dev, *back.spec(n)) for n in back}
    assert back.restore(into=into) == into        # into given device memory
    assert all(same(into[n].view(), back[n]) for n in back)
    for t in [*restored.values(), *into.values(), *(ck.tensor(f"device{k}")
                                                  for k in range(len(SHAPES)))]:
        t.free()
    assert dev.memory.used == used


def test_arrays_of_any_layout_and_byte_order_are_stored_as_their_values(tmp_path):
    a = np.arange(24, dtype=">f4").reshape(4, 6)          # big-endian
    ck = aircc.Checkpoint()
    ck.add("big_endian", a)
    ck.add("strided", np.arange(40, dtype=np.int64).reshape(5, 8)[::2, 1::3])
    ck.add("scalar", np.float64(2.5))
    ck.add("bool", np.array([True, False, True]))
    ck.add("complex", np.array([1 + 2j, -3.5j], np.complex64))
    ck.save(tmp_path / "c.ckpt")
    back = aircc.Checkpoint.load(tmp_path / "c.ckpt")
    assert back["big_endian"].dtype == np.dtype("<f4")
    assert np.array_equal(back["big_endian"], a)
    assert np.array_equal(back["strided"], np.arange(40).reshape(5, 8)[::2, 1::3])
    assert back["scalar"].shape == () and back["scalar"] == 2.5
    assert back["bool"].tolist() == [True, False, True]
    assert back["complex"].tolist() == [1 + 2j, -3.5j]


@pytest.mark.parametrize("value", [np.array(["a", "bc"]), np.array([b"x"]),
                                   np.array([{"k": 1}], object),
                                   np.array(["2024-01-01"], "datetime64[D]"),
                                   np.zeros(2, [("a", "i4"), ("b", "f4")])],
                         ids=["str", "bytes", "object", "datetime", "record"])
def test_strings_objects_dates_and_records_are_refused_naming_the_tensor(value):
    with pytest.raises(CheckpointError, match=r"tensor 'labels': dtype .* cannot be stored in "
                                              r"a checkpoint \(strings, objects, records"):
        aircc.Checkpoint().add("labels", value)


def test_bad_names_meta_and_values_are_refused(tmp_path):
    ck = aircc.Checkpoint({"nested": {"a": 1}})
    ck.add("x", np.zeros(2))
    with pytest.raises(CheckpointError, match="keys must be str and values str, int, float"):
        ck.save(tmp_path / "c.ckpt")
    ck.meta = {"loss": float("nan")}
    with pytest.raises(CheckpointError, match="NaN and infinities are refused"):
        ck.save(tmp_path / "c.ckpt")
    with pytest.raises(CheckpointError, match="tensor 'x' is already in the checkpoint"):
        ck.add("x", np.ones(2))
    with pytest.raises(CheckpointError, match="expected a numpy array or a DeviceTensor, got list"):
        ck.add("y", [1, 2])
    with pytest.raises(CheckpointError, match="the checkpoint has no tensor 'z'"):
        ck["z"]
    ck = aircc.Checkpoint()
    ck.add("", np.zeros(1))
    with pytest.raises(CheckpointError, match="a tensor name must be a non-empty str"):
        ck.save(tmp_path / "c.ckpt")
    assert not os.listdir(tmp_path)


def small_file(tmp_path) -> tuple[str, bytes]:
    ck = aircc.Checkpoint({"step": 3, "what": "test"})
    ck.add("a", np.arange(5, dtype=np.float32))
    ck.add("b", np.ones((2, 3), ml_dtypes.bfloat16))
    ck.add("empty", np.zeros((0, 4), np.int8))
    path = str(tmp_path / "c.ckpt")
    ck.save(path)
    with open(path, "rb") as f:
        return path, f.read()


def test_every_flipped_bit_of_a_file_is_refused(tmp_path):
    """Header, index, data and the alignment padding: every byte is checked."""
    path, raw = small_file(tmp_path)
    accepted = []
    for i in range(len(raw)):
        for bit in (0x01, 0x80):
            damaged = bytearray(raw)
            damaged[i] ^= bit
            with open(path, "wb") as f:
                f.write(damaged)
            try:
                aircc.Checkpoint.load(path)
                accepted.append((i, bit))
            except CheckpointError as e:
                assert path in e.message
    assert accepted == []


def test_a_file_cut_anywhere_or_grown_is_refused(tmp_path):
    path, raw = small_file(tmp_path)
    for n in [*range(len(raw)), len(raw) + 1]:
        with open(path, "wb") as f:
            f.write((raw + b"\0")[:n])
        with pytest.raises(CheckpointError, match="truncated|trailing bytes"):
            aircc.Checkpoint.load(path)


def forge(path: str, index: bytes, count: int, meta_size: int = 0, *, version: int = 1,
          index_size: int | None = None, data: bytes = b"") -> None:
    """A file with valid checksums (as an attacker would write it) declaring ``index``."""
    size = fmt.HEADER_SIZE + len(index) + len(data)
    header = fmt.HEADER.pack(fmt.MAGIC, version, 0, size, fmt.HEADER_SIZE,
                              len(index) if index_size is None else index_size, count,
                              zlib.crc32(index), meta_size)
    with open(path, "wb") as f:
        f.write(header + struct.pack("<I", zlib.crc32(header)) + index + data)


def entry(name: str, dtype: str, shape: list[int], offset: int, nbytes: int) -> bytes:
    n, d = name.encode(), dtype.encode()
    return (struct.pack("<H", len(n)) + n + struct.pack("<B", len(d)) + d
            + struct.pack(f"<B{len(shape)}Q", len(shape), *shape)
            + struct.pack("<QQI", offset, nbytes, 0))


@pytest.mark.parametrize("case, message", [
    ("tensor of 8 TiB", "not where the file's layout puts them"),
    ("dims overflowing", "has more elements than an array can hold"),
    ("size not the shape's", "nbytes is 8 but shape"),
    ("2**31 tensors", "does not fit the file"),
    ("index of 2**60 bytes", "does not fit the file"),
    ("meta nested 60000 deep", "its meta is not JSON"),
    ("unknown dtype", "unknown dtype 'float128'"),
    ("version 2", "checkpoint version 2; this aircc reads version 1"),
])
def test_forged_sizes_are_refused_before_anything_large_is_allocated(case, message, tmp_path):
    path = str(tmp_path / "forged.ckpt")
    e = {"tensor of 8 TiB": entry("w", "float64", [1 << 40], 128, 8 << 40),
         "dims overflowing": entry("w", "float64", [1 << 62, 1 << 62], 128, 0),
         "size not the shape's": entry("w", "float64", [2, 2], 128, 8),
         "unknown dtype": entry("w", "float128", [1], 128, 16)}
    if case in e:
        forge(path, e[case], 1, data=bytes(64))
    elif case == "2**31 tensors":
        forge(path, b"", 1 << 31)
    elif case == "index of 2**60 bytes":
        forge(path, b"", 0, index_size=1 << 60)
    elif case == "meta nested 60000 deep":
        forge(path, b"[" * 60000, 0, 60000)
    else:
        forge(path, b"", 0, version=2)
    small_file(tmp_path)                      # imports and caches warm, outside the count
    aircc.Checkpoint.load(str(tmp_path / "c.ckpt"))
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match=message):
            aircc.Checkpoint.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < (1 << 20), f"{peak} bytes allocated refusing a forged file"


def test_files_that_are_not_checkpoints_are_refused(tmp_path):
    (tmp_path / "model.om").write_bytes(b"AIRCCOM\0" + bytes(100))
    with pytest.raises(CheckpointError, match="not an aircc checkpoint"):
        aircc.Checkpoint.load(tmp_path / "model.om")
    with pytest.raises(CheckpointError, match="cannot be read"):
        aircc.Checkpoint.load(tmp_path / "missing.ckpt")


def test_a_save_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, dev):
    path, raw = small_file(tmp_path)
    t = DeviceTensor.allocate(dev, np.float32, (1000,))
    ck = aircc.Checkpoint()
    ck.add("x", np.ones(10))
    ck.add("on_device", t)
    dev.inject_fault("test")                   # its memory contents are gone: not saved
    with pytest.raises(DeviceLostError):
        ck.save(path)
    with open(path, "rb") as f:
        assert f.read() == raw
    assert os.listdir(tmp_path) == ["c.ckpt"]
    dev.reset()

    def dies_half_way():                        # a writer killed mid-write, as far as the
        yield memoryview(np.zeros(4, np.uint8))  # target can tell
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        fmt.write_checkpoint(path, [("x", np.dtype(np.uint8), (8,), dies_half_way)], {})
    with open(path, "rb") as f:
        assert f.read() == raw
    assert os.listdir(tmp_path) == ["c.ckpt"]


def test_a_restore_that_does_not_fit_gives_back_what_it_allocated(tmp_path):
    dev = VirtualDevice(1 << 20)
    try:
        ck = aircc.Checkpoint()
        ck.add("a", np.ones((600 << 10) // 4, np.float32))
        ck.add("b", np.ones((600 << 10) // 4, np.float32))
        used = dev.memory.used
        with pytest.raises(DeviceOutOfMemoryError):
            ck.restore(dev)
        assert dev.memory.used == used
        t = DeviceTensor.allocate(dev, np.float32, (3,))
        with pytest.raises(CheckpointError, match=r"the checkpoint holds float32 of shape "
                                                  r"\[153600\], the target is float32 of "
                                                  r"shape \[3\]"):
            ck.restore(into={"a": t})
        with pytest.raises(CheckpointError, match="give a device for new allocations"):
            ck.restore(names=["a"])
    finally:
        dev.close()


def test_a_view_of_device_memory_is_added_as_a_device_tensor(dev, tmp_path):
    t = DeviceTensor.allocate(dev, np.int32, (4, 4))
    t.write(np.arange(16, dtype=np.int32).reshape(4, 4))
    ck = aircc.Checkpoint()
    ck.add("view", t.view(), device=dev)
    assert ck.tensor("view") == t
    t.view()[0, 0] = 99                         # read at save, not when added
    ck.save(tmp_path / "c.ckpt")
    assert aircc.Checkpoint.load(tmp_path / "c.ckpt")["view"][0].tolist() == [99, 1, 2, 3]
    with pytest.raises(CheckpointError, match="not a contiguous view of device"):
        ck.add("host", np.zeros(3), device=dev)
    t.free()

"""The bytes of a checkpoint file: named tensors with their dtype, shape and a checksum
each, written atomically and read back with every size checked before it is allocated.

Layout (little-endian):

* header, 64 bytes: magic ``AIRCKPT\\0``, version u32, flags u32 (0), file size u64,
  index offset u64 (64), index size u64, tensor count u32, index crc32 u32, meta size
  u32, 8 reserved zero bytes, header crc32 u32 (over the 60 bytes before it);
* index at offset 64: ``meta size`` bytes of JSON (a flat object of strings, numbers and
  booleans), then one entry per tensor: name length u16 and the name (UTF-8), dtype
  name length u8 and the name (``formats.checks.DTYPES``), rank u8 and the dims u64
  each, data offset u64, data size u64, data crc32 u32;
* each tensor's bytes (C order, little-endian, ml_dtypes' narrow types one byte or two
  per element as numpy holds them) at a 64-byte-aligned offset, in index order.

A writer fills a temporary file beside the target, fsyncs it, renames it over the target
and fsyncs the folder: a reader sees the old file or the new one, never half of one.  A
reader checks the header, then that the index fits in the file and every tensor's
offset and size in the data that follows, and only then reads a tensor, into an array of
exactly its size, and checks its crc32 (:func:`read_index`, :func:`read_tensor`).
"""
from __future__ import annotations

import json
import math
import os
import struct
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from aircc.errors import CheckpointError
from aircc.formats.alignment import align_up
from aircc.formats.checks import DTYPES, MAX_RANK, array_spec, dtype_name

MAGIC = b"AIRCKPT\x00"
VERSION = 1
HEADER_SIZE, ALIGN = 64, 64
#: Most tensors one file may hold, longest name (bytes), largest index and meta.
MAX_TENSORS = 1 << 16
MAX_NAME = 1024
MAX_INDEX = 16 << 20
MAX_META = 64 << 10
#: Bytes read or written at a time: a save or a check never holds more than this much
#: of a tensor beyond the tensor itself.
CHUNK = 8 << 20

HEADER = struct.Struct("<8sIIQQQIII8x")        # 60 bytes, then the header crc32
_CRC = struct.Struct("<I")
_ENTRY_TAIL = struct.Struct("<QQI")              # offset, size, crc32
#: The fewest bytes an index entry takes (a one-byte name and dtype name, rank 0).
MIN_ENTRY = 2 + 1 + 1 + 1 + 1 + _ENTRY_TAIL.size
assert HEADER.size + _CRC.size == HEADER_SIZE


@dataclass(frozen=True)
class Entry:
    """One tensor of a checkpoint file, as its index describes it."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    crc: int


@dataclass(frozen=True)
class Index:
    """What a checkpoint file holds: its tensors in file order, and its meta."""

    entries: list[Entry]
    meta: dict


def storable_dtype(dtype: np.dtype, what: str) -> str:
    """The stored name of ``dtype``; CheckpointError naming ``what`` when no checkpoint
    can hold it (strings, Python objects, records, dates)."""
    name = dtype_name(dtype)
    if name is None:
        raise CheckpointError(f"{what}: dtype {dtype} cannot be stored in a checkpoint (strings, "
                              f"objects, records and dates are refused; encode them as bytes "
                              f"in a uint8 array); it holds {', '.join(sorted(DTYPES))}")
    return name


def check_name(name: object) -> bytes:
    """``name`` as UTF-8; CheckpointError when it is not a non-empty str of at most
    :data:`MAX_NAME` bytes."""
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"a tensor name must be a non-empty str, got {name!r}")
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise CheckpointError(f"tensor name {name!r} is not valid UTF-8: {e}") from None
    if len(raw) > MAX_NAME:
        raise CheckpointError(f"tensor name {name[:40]!r}... is {len(raw)} bytes; at most "
                              f"{MAX_NAME}")
    return raw


def encode_meta(meta: dict) -> bytes:
    """The meta as JSON; CheckpointError unless it is a flat object of strings, numbers
    and booleans of at most :data:`MAX_META` bytes."""
    bad = [k for k, v in meta.items() if not isinstance(k, str)
           or not isinstance(v, (str, int, float, bool)) or v is None]
    if bad:
        raise CheckpointError(f"checkpoint meta {bad[:3]}: keys must be str and values str, "
                              f"int, float or bool")
    try:
        raw = json.dumps(meta, sort_keys=True, allow_nan=False).encode()
    except ValueError as e:
        raise CheckpointError(f"checkpoint meta: {e} (NaN and infinities are refused)") from None
    if len(raw) > MAX_META:
        raise CheckpointError(f"checkpoint meta is {len(raw)} bytes; at most {MAX_META}")
    return raw


# ---------------------------------------------------------------- writing
#: What a writer gets for each tensor: name, dtype, shape, and a function yielding its
#: bytes in order (chunks of at most :data:`CHUNK`).
Source = tuple[str, np.dtype, tuple[int, ...], Callable[[], Iterable[memoryview]]]


def write_checkpoint(path: str | os.PathLike, sources: list[Source], meta: dict) -> int:
    """Write ``sources`` (:data:`Source`) and ``meta`` to ``path`` atomically; returns the
    file's size.  CheckpointError for a name, dtype or meta it cannot store, or when the
    file cannot be written (the target is then untouched)."""
    path = os.fspath(path)
    meta_raw = encode_meta(meta)
    if len(sources) > MAX_TENSORS:
        raise CheckpointError(f"{len(sources)} tensors; a checkpoint holds at most {MAX_TENSORS}")
    heads, seen = [], set()
    for name, dtype, shape, _ in sources:
        raw = check_name(name)
        if name in seen:
            raise CheckpointError(f"tensor '{name}' is added twice")
        seen.add(name)
        dname = storable_dtype(dtype, f"tensor '{name}'").encode()
        if len(shape) > MAX_RANK:
            raise CheckpointError(f"tensor '{name}' has {len(shape)} dims; at most {MAX_RANK}")
        heads.append(struct.pack("<H", len(raw)) + raw + struct.pack("<B", len(dname)) + dname
                     + struct.pack(f"<B{len(shape)}Q", len(shape), *shape))
    index_size = len(meta_raw) + sum(len(h) + _ENTRY_TAIL.size for h in heads)
    if index_size > MAX_INDEX:
        raise CheckpointError(f"the index is {index_size} bytes; at most {MAX_INDEX}")
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            at = end = align_up(HEADER_SIZE + index_size, ALIGN)
            tails = []
            for (name, dtype, shape, chunks), head in zip(sources, heads):
                f.seek(at)
                crc, size = 0, 0
                for chunk in chunks():
                    crc = zlib.crc32(chunk, crc)
                    size += f.write(chunk)
                expect = math.prod(shape) * dtype.itemsize
                if size != expect:
                    raise CheckpointError(f"tensor '{name}' gave {size} bytes; its shape "
                                          f"{list(shape)} of {dtype} needs {expect}")
                tails.append(_ENTRY_TAIL.pack(at, size, crc))
                end, at = at + size, align_up(at + size, ALIGN)
            index = meta_raw + b"".join(h + t for h, t in zip(heads, tails))
            header = HEADER.pack(MAGIC, VERSION, 0, end, HEADER_SIZE, len(index), len(heads),
                                  zlib.crc32(index), len(meta_raw))
            f.seek(0)
            f.write(header + _CRC.pack(zlib.crc32(header)) + index)
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise CheckpointError(f"checkpoint {path!r} cannot be written: "
                              f"{e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    sync_folder(folder)
    return end


def sync_folder(folder: str) -> None:
    """fsync ``folder`` so that a rename in it survives a crash (where the OS allows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)




# ---------------------------------------------------------------- reading
def read_index(f: BinaryIO, where: str) -> Index:
    """The checked header and index of the open checkpoint ``f`` (``where`` names it in
    errors).  Nothing is allocated beyond the header until the index's size is checked
    against the file's; every tensor's offset and size are checked against the file."""
    size = os.fstat(f.fileno()).st_size
    if size < HEADER_SIZE:
        raise CheckpointError(f"{where}: truncated: {size} bytes, shorter than the "
                              f"{HEADER_SIZE}-byte header")
    f.seek(0)
    header = f.read(HEADER_SIZE)
    (magic, version, _flags, declared, index_at, index_size, count, index_crc,
     meta_size) = HEADER.unpack_from(header)
    if magic != MAGIC:
        raise CheckpointError(f"{where}: not an aircc checkpoint (magic {magic!r}, expected "
                              f"{MAGIC!r})")
    if version != VERSION:
        raise CheckpointError(f"{where}: checkpoint version {version}; this aircc reads "
                              f"version {VERSION} (save it again with this aircc)")
    stored, = _CRC.unpack_from(header, HEADER.size)
    if zlib.crc32(header[:HEADER.size]) != stored:
        raise CheckpointError(f"{where}: the header's checksum does not match (the file "
                              f"is damaged)")
    if declared != size:
        cut = "truncated" if declared > size else "has trailing bytes"
        raise CheckpointError(f"{where}: {cut}: the header says {declared} bytes, the file "
                              f"has {size}")
    if (index_at != HEADER_SIZE or index_size > min(MAX_INDEX, size - HEADER_SIZE)
            or meta_size > min(MAX_META, index_size) or count > MAX_TENSORS
            or count * MIN_ENTRY > index_size - meta_size):
        raise CheckpointError(f"{where}: the header's index ({index_size} bytes at "
                              f"{index_at}, {count} tensors, meta {meta_size} bytes) does "
                              f"not fit the file's {size} bytes")
    index = f.read(index_size)
    if len(index) != index_size or zlib.crc32(index) != index_crc:
        raise CheckpointError(f"{where}: the index's checksum does not match (the file is "
                              f"damaged)")
    meta = _parse_meta(index[:meta_size], where)
    entries = _parse_entries(memoryview(index), meta_size, count, HEADER_SIZE + index_size,
                             size, where)
    _check_padding(f, entries, HEADER_SIZE + index_size, where)
    return Index(entries, meta)


def _check_padding(f: BinaryIO, entries: list[Entry], data_start: int, where: str) -> None:
    """The alignment gaps (each under :data:`ALIGN` bytes) must be zero: with the header,
    index and tensor checksums, every byte of the file is checked."""
    end = data_start
    for e in entries:
        if e.offset > end:
            f.seek(end)
            if f.read(e.offset - end).strip(b"\0"):
                raise CheckpointError(f"{where}: the padding before tensor '{e.name}' is not "
                                      f"zero (the file is damaged)")
        end = e.offset + e.nbytes


def _parse_meta(raw: bytes, where: str) -> dict:
    try:
        meta = json.loads(raw) if raw else {}
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{where}: its meta is not JSON: {e}") from None
    if not isinstance(meta, dict) or any(isinstance(v, (dict, list)) for v in meta.values()):
        raise CheckpointError(f"{where}: its meta must be a flat JSON object")
    return meta


def _parse_entries(index: memoryview, at: int, count: int, data_start: int, size: int,
                   where: str) -> list[Entry]:
    entries, names, end = [], set(), data_start
    if not count and size != align_up(data_start, ALIGN):
        raise CheckpointError(f"{where}: {size} bytes, but an index of no tensor ends the "
                              f"file at {align_up(data_start, ALIGN)}")
    for i in range(count):
        try:
            name_len, = struct.unpack_from("<H", index, at)
            name = bytes(index[at + 2:at + 2 + name_len]).decode("utf-8")
            at += 2 + name_len
            dtype_len, = struct.unpack_from("<B", index, at)
            dtype = bytes(index[at + 1:at + 1 + dtype_len]).decode("ascii")
            at += 1 + dtype_len
            rank, = struct.unpack_from("<B", index, at)
            shape = list(struct.unpack_from(f"<{rank}Q", index, at + 1))
            at += 1 + 8 * rank
            offset, nbytes, crc = _ENTRY_TAIL.unpack_from(index, at)
            at += _ENTRY_TAIL.size
        except (struct.error, UnicodeDecodeError) as e:
            raise CheckpointError(f"{where}: index entry {i} is cut off or garbled: "
                                  f"{e}") from None
        what = f"{where}: tensor {name!r} (index entry {i})"
        if not name or len(name.encode()) > MAX_NAME or name in names or rank > MAX_RANK:
            raise CheckpointError(f"{what}: an empty, duplicate or too long name, or rank "
                                  f"{rank} over {MAX_RANK}")
        try:
            dt, shape_t = array_spec(dtype, shape, nbytes)
        except ValueError as e:
            raise CheckpointError(f"{what}: {e}") from None
        last = i == count - 1
        if offset != align_up(end, ALIGN) or offset + nbytes > size or (last and offset + nbytes != size):
            raise CheckpointError(f"{what}: its {nbytes} bytes at offset {offset} are not "
                                  f"where the file's layout puts them (at {align_up(end, ALIGN)}, "
                                  f"the last ending the file's {size} bytes)")
        names.add(name)
        end = offset + nbytes
        entries.append(Entry(name, dt, shape_t, offset, nbytes, crc))
    if at != len(index):
        raise CheckpointError(f"{where}: the index has {len(index) - at} bytes after its "
                              f"{count} entries")
    return entries


def read_tensor(f: BinaryIO, entry: Entry, where: str) -> np.ndarray:
    """The tensor ``entry`` of the open checkpoint ``f``, its crc32 checked (its size was
    checked against the file's by :func:`read_index`)."""
    data = np.empty(entry.nbytes, np.uint8)
    f.seek(entry.offset)
    got = f.readinto(memoryview(data)) if entry.nbytes else 0
    if got != entry.nbytes:
        raise CheckpointError(f"{where}: tensor '{entry.name}' is cut off ({got} of "
                              f"{entry.nbytes} bytes; the file changed while it was read)")
    if zlib.crc32(data) != entry.crc:
        raise CheckpointError(f"{where}: tensor '{entry.name}' fails its checksum (the file "
                              f"is damaged)")
    return data.view(entry.dtype).reshape(entry.shape)


def host_chunks(array: np.ndarray) -> Callable[[], Iterator[memoryview]]:
    """A :data:`Source`'s byte function for a host array (little-endian, C order)."""
    def chunks() -> Iterator[memoryview]:
        a = array
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        flat = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        for start in range(0, flat.size, CHUNK):
            yield memoryview(flat[start:start + CHUNK])
    return chunks

"""Writer and reader of aircc offline model files (.om).

Layout (little-endian), modelled on the CANN offline model:

* header, 64 bytes: magic ``AIRCCOM\\0``, major u16, minor u16, flags u32
  (bit 0 = dynamic), header size u32, section count u32, section table offset
  u64, total file size u64, header crc32 u32 (over the header with this field
  zeroed), payload schema revision u32 (:data:`~.contract.SCHEMA_VERSION`), zero padding
  to 64;
* section table at offset 64: one 32-byte entry per section: kind u32, entry
  flags u32 (bit 0 = optional, may be skipped), offset u64, size u64, crc32 u32,
  reserved u32;
* sections, each at a 64-byte-aligned offset (weights at 4096), msgpack
  payloads in kind order, then the raw weights data.
"""
from __future__ import annotations

import contextlib
import os
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aircc.errors import ModelFormatError

from .alignment import align_up
from .checks import DTYPES, dtype_name
from .contract import (SCHEMA_VERSION, SECTION_NAMES, ModelContract, missing_sections,
                       parse_sections, validate_section)
from .payload import decode_payload, encode_payload
from .section_limits import section_limits
from .weight_table import validate_weight_table

MAGIC = b"AIRCCOM\x00"
FORMAT_MAJOR, FORMAT_MINOR = 1, 2
HEADER_SIZE, ENTRY_SIZE = 64, 32
SECTION_ALIGN, WEIGHTS_ALIGN, TENSOR_ALIGN = 64, 4096, 64
FLAG_DYNAMIC = 1      # header flags bit 0: dynamic-mode model
ENTRY_OPTIONAL = 1    # table entry flags bit 0: a reader that does not know the kind may skip it

MODEL_DEF, WEIGHTS_DATA, WEIGHT_TABLE, TASK_INFO = 1, 2, 3, 4
MEMORY_PLAN, TILING_DATA, EXEC_GRAPH, GEARS = 5, 6, 7, 8
SECTION_KINDS: dict[str, int] = {
    "model": MODEL_DEF, "weights": WEIGHTS_DATA, "weight_table": WEIGHT_TABLE,
    "tasks": TASK_INFO, "memory_plan": MEMORY_PLAN, "tiling": TILING_DATA,
    "exec_graph": EXEC_GRAPH, "gears": GEARS}
KIND_NAMES: dict[int, str] = {k: n for n, k in SECTION_KINDS.items()}

_HEADER = struct.Struct("<8sHHIIIQQII")  # 48 bytes; the rest of the 64 is reserved (zero)
_CRC_AT = 40
_ENTRY = struct.Struct("<IIQQII")
assert _HEADER.size <= HEADER_SIZE and _ENTRY.size == ENTRY_SIZE


@dataclass(repr=False)
class OmFile:
    """An offline model: mode, msgpack-able sections by name, and named weights.

    :meth:`parsed` gives the sections typed and checked against each other
    (:class:`~aircc.formats.contract.ModelContract`): the reader has made it already,
    a model built in memory makes it on first use.
    """

    mode: str
    sections: dict[str, Any] = field(default_factory=dict)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    buffer: Any = field(default=None, compare=False)
    """The bytes a loaded model's weights are views of (kept alive with them)."""
    contract: ModelContract | None = field(default=None, compare=False)

    def parsed(self) -> ModelContract:
        """The sections, typed and checked (ModelFormatError naming the section and field)."""
        if self.contract is None:
            self.contract = parse_sections(self.mode, self.sections, self.weights)
        return self.contract

    def __repr__(self) -> str:
        nbytes = sum(int(getattr(a, "nbytes", 0)) for a in self.weights.values())
        return (f"OmFile(mode={self.mode!r}, sections={list(self.sections)}, "
                f"weights={len(self.weights)} tensors / {nbytes} bytes)")




# ------------------------------------------------------------------ writer
def assemble(flags: int, sections: list[tuple[int, int, list[Any]]]) -> tuple[int, list[Any]]:
    """Lay out a container: ``sections`` is ``(kind, entry_flags, chunks)`` in table order.

    Returns the file size and the list of byte chunks (header, table, padding,
    section data) whose concatenation is the file.  No schema checks: the
    writer checks before calling this, and tests use it to forge files.
    """
    table_end = HEADER_SIZE + ENTRY_SIZE * len(sections)
    order = sorted(range(len(sections)), key=lambda i: sections[i][0] == WEIGHTS_DATA)
    placed: dict[int, tuple[int, int, int]] = {}  # table index -> (offset, size, crc)
    pos = table_end
    for i in order:  # file order: as given, but the weights last
        kind, _, chunks = sections[i]
        off = align_up(pos, WEIGHTS_ALIGN if kind == WEIGHTS_DATA else SECTION_ALIGN)
        size, crc = 0, 0
        for ch in chunks:
            crc = zlib.crc32(ch, crc)
            size += memoryview(ch).nbytes
        placed[i] = (off, size, crc)
        pos = off + size
    total = pos
    table = b"".join(_ENTRY.pack(kind, eflags, *placed[i], 0)
                     for i, (kind, eflags, _) in enumerate(sections))
    header = bytearray(HEADER_SIZE)
    _HEADER.pack_into(header, 0, MAGIC, FORMAT_MAJOR, FORMAT_MINOR, flags, HEADER_SIZE,
                      len(sections), HEADER_SIZE, total, 0, SCHEMA_VERSION)
    struct.pack_into("<I", header, _CRC_AT, zlib.crc32(header))
    out: list[Any] = [bytes(header), table]
    pos = table_end
    for i in order:
        off, size, _ = placed[i]
        if off > pos:
            out.append(bytes(off - pos))
        out.extend(sections[i][2])
        pos = off + size
    return total, out


def weight_chunks(weights: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The weight table and the byte chunks of the weights section (each weight 64-aligned,
    little-endian); TypeError naming a weight the format cannot store."""
    table, chunks, pos = [], [], 0
    for name, arr in weights.items():
        if not isinstance(name, str):
            raise TypeError(f"weight names must be str, got {type(name).__name__} {name!r}")
        if isinstance(arr, np.generic):
            arr = np.asarray(arr)
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"weight '{name}' must be a numpy.ndarray, "
                            f"got {type(arr).__module__}.{type(arr).__qualname__}")
        dname = dtype_name(arr.dtype)
        if dname is None:
            raise TypeError(f"weight '{name}' has unsupported dtype {arr.dtype} "
                            f"(supported: {', '.join(sorted(DTYPES))})")
        off = align_up(pos, TENSOR_ALIGN)
        if off > pos:
            chunks.append(bytes(off - pos))
        le = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        chunks.append(memoryview(le.reshape(-1).view(np.uint8)))
        table.append({"name": name, "dtype": dname, "shape": [int(d) for d in arr.shape],
                      "offset": off, "nbytes": int(arr.nbytes)})
        pos = off + arr.nbytes
    return table, chunks


def _build(om: OmFile) -> tuple[int, list[Any]]:
    if not isinstance(om, OmFile):
        raise TypeError(f"expected an OmFile, got {type(om).__name__}")
    for name in om.sections:
        if name not in SECTION_NAMES:
            validate_section(name, None)  # raises 'unknown section'
    encoded, decoded = {}, {}
    for name in sorted(om.sections, key=SECTION_KINDS.__getitem__):
        encoded[name] = encode_payload(name, om.sections[name])
        limits = section_limits(name, len(encoded[name]), decoded)
        try:
            decoded[name] = decode_payload(name, encoded[name], limits)
        except ModelFormatError as exc:
            if exc.__cause__ is None:          # past a limit the reader holds it to
                raise
            raise TypeError(f"section '{name}' does not survive a msgpack round trip "
                            f"(e.g. a list or tuple used as a dict key): {exc.__cause__}") from exc
    om.contract = parse_sections(om.mode, decoded, om.weights)
    table, wchunks = weight_chunks(om.weights)
    validate_weight_table(table, sum(memoryview(ch).nbytes for ch in wchunks), TENSOR_ALIGN)
    encoded["weight_table"] = encode_payload("weight_table", table)
    sections = [(SECTION_KINDS[n], 0, [b]) for n, b in encoded.items()]
    sections.append((WEIGHTS_DATA, 0, wchunks))
    sections.sort(key=lambda s: s[0])
    return assemble(FLAG_DYNAMIC if om.mode == "dynamic" else 0, sections)


def dump_om(om: OmFile) -> bytes:
    """Serialise ``om`` to the bytes of a .om file (deterministic)."""
    _, chunks = _build(om)
    return b"".join(chunks)


def save_om(om: OmFile, path: str | os.PathLike) -> int:
    """Write ``om`` to ``path`` atomically (temp file + os.replace); returns bytes written."""
    total, chunks = _build(om)
    path = os.fspath(path)
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)),
                       f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            for ch in chunks:
                f.write(ch)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return total


# ------------------------------------------------------------------ reader
def _label(kind: int) -> str:
    return KIND_NAMES.get(kind, f"kind {kind}")


def _cut_sections(buf: memoryview, toff: int, count: int) -> str:
    """Explain which part of a truncated file is cut off."""
    n = len(buf)
    if toff + count * ENTRY_SIZE > n:
        return "the section table is cut off"
    cut = []
    for i in range(count):
        kind, _, off, size, _, _ = _ENTRY.unpack_from(buf, toff + i * ENTRY_SIZE)
        if off + size > n:
            cut.append(f"section '{_label(kind)}'")
    return (", ".join(cut) + " cut off") if cut else "no section is cut off"


def _read_table(buf: memoryview) -> tuple[int, dict[str, tuple[int, int, int]]]:
    """Check the header and table; return flags and {name: (offset, size, crc)}."""
    n = len(buf)
    if n < HEADER_SIZE:
        raise ModelFormatError(f"truncated: file is {n} bytes, shorter than the "
                               f"{HEADER_SIZE}-byte header")
    magic, major, minor, flags, hsize, count, toff, fsize, hcrc, schema = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise ModelFormatError(f"bad magic: found {magic!r}, expected {MAGIC!r} "
                               f"(not an aircc .om model)")
    if major != FORMAT_MAJOR:
        raise ModelFormatError(f"unsupported format version {major}.{minor} "
                               f"(this reader supports major {FORMAT_MAJOR})")
    if hsize < HEADER_SIZE or hsize > n:
        what = "truncated: " if hsize > n else ""
        raise ModelFormatError(f"{what}header size {hsize} is invalid "
                               f"(minimum {HEADER_SIZE}, file is {n} bytes)")
    header = bytearray(buf[:hsize])
    header[_CRC_AT:_CRC_AT + 4] = bytes(4)
    crc = zlib.crc32(header)
    if crc != hcrc:
        raise ModelFormatError(f"header checksum mismatch: stored 0x{hcrc:08x}, "
                               f"computed 0x{crc:08x}")
    check_schema_version(schema)
    if fsize > n:
        raise ModelFormatError(f"truncated: the header says the file is {fsize} bytes but "
                               f"only {n} are present ({_cut_sections(buf, toff, count)})")
    if fsize < n:
        raise ModelFormatError(f"size mismatch: {n - fsize} trailing bytes after the "
                               f"{fsize} bytes the header declares")
    if toff + count * ENTRY_SIZE > n:
        raise ModelFormatError(f"truncated: the section table ({count} entries at offset "
                               f"{toff}) extends past the end of the file ({n} bytes)")
    regions = [(0, hsize, "the header"), (toff, toff + count * ENTRY_SIZE, "the section table")]
    found: dict[str, tuple[int, int, int]] = {}
    first_entry: dict[int, int] = {}
    for i in range(count):
        kind, eflags, off, size, scrc, _ = _ENTRY.unpack_from(buf, toff + i * ENTRY_SIZE)
        label = _label(kind)
        if kind not in KIND_NAMES and not eflags & ENTRY_OPTIONAL:
            raise ModelFormatError(f"unknown section kind {kind} (table entry {i}) is not "
                                   f"marked optional; this reader ({FORMAT_MAJOR}."
                                   f"{FORMAT_MINOR}) cannot skip it")
        if kind in first_entry:
            raise ModelFormatError(f"duplicate section '{label}' (table entries "
                                   f"{first_entry[kind]} and {i})")
        first_entry[kind] = i
        if off + size > n:
            raise ModelFormatError(f"truncated: section '{label}' (offset {off}, {size} bytes)"
                                   f" extends past the end of the file ({n} bytes)")
        align = WEIGHTS_ALIGN if kind == WEIGHTS_DATA else SECTION_ALIGN
        if off % align:
            raise ModelFormatError(f"section '{label}' at offset {off} is not aligned to "
                                   f"{align} bytes")
        if size:
            regions.append((off, off + size, f"section '{label}'"))
        if kind in KIND_NAMES:
            found[label] = (off, size, scrc)
    regions.sort()
    for (_, end_a, a), (start_b, _, b) in zip(regions, regions[1:]):
        if start_b < end_a:
            raise ModelFormatError(f"{a} and {b} overlap (byte {start_b} < {end_a})")
    return flags, found


def check_schema_version(version: int) -> None:
    """Refuse payloads of another schema revision than this reader's: a newer one may hold
    fields or meanings it does not know, and it knows no older one (format 1.1 wrote none)."""
    if version == SCHEMA_VERSION:
        return
    if version == 0:
        raise ModelFormatError(f"the file records no payload schema revision (written by an "
                               f"aircc older than format 1.2); recompile the model with this "
                               f"aircc (schema revision {SCHEMA_VERSION})")
    if version > SCHEMA_VERSION:
        raise ModelFormatError(f"the file's payload schema is revision {version}, newer than "
                               f"revision {SCHEMA_VERSION} that this aircc reads: upgrade aircc "
                               f"to load it")
    raise ModelFormatError(f"the file's payload schema is revision {version}, older than "
                           f"revision {SCHEMA_VERSION} that this aircc reads: recompile the "
                           f"model with this aircc")


def _parse(buf: memoryview, keep: Any, verify: bool) -> OmFile:
    flags, found = _read_table(buf)
    if verify:
        for name, (off, size, crc) in found.items():
            actual = zlib.crc32(buf[off:off + size])
            if actual != crc:
                raise ModelFormatError(f"checksum mismatch in section '{name}': stored "
                                       f"0x{crc:08x}, computed 0x{actual:08x}")
    mode = "dynamic" if flags & FLAG_DYNAMIC else "static"

    def data(name: str) -> memoryview:
        off, size, _ = found[name]
        return buf[off:off + size]

    if "model" not in found:
        raise ModelFormatError("missing section 'model'")
    sections: dict[str, Any] = {}

    def decode(name: str) -> Any:
        return decode_payload(name, data(name), section_limits(name, found[name][1], sections))

    model = decode("model")
    validate_section("model", model)
    if model["mode"] != mode:
        raise ModelFormatError(f"header flags say the model is {mode} (flags bit 0 = "
                               f"{flags & FLAG_DYNAMIC}) but section 'model' has mode "
                               f"'{model['mode']}'")
    for name in (*missing_sections(mode, found), "weights", "weight_table"):
        if name not in found:
            raise ModelFormatError(f"missing section '{name}' (required for {mode} models)")
    sections["model"] = model
    for name in sorted(found, key=SECTION_KINDS.__getitem__):
        if name in ("model", "weights", "weight_table"):
            continue
        sections[name] = decode(name)
    table = validate_weight_table(decode("weight_table"), found["weights"][1], TENSOR_ALIGN)
    wdata = data("weights")
    weights: dict[str, np.ndarray] = {}
    for name, dtype, shape, off, nbytes in table:
        if nbytes:
            arr = np.frombuffer(wdata, dtype, nbytes // dtype.itemsize, off).reshape(shape)
        else:
            arr = np.empty(shape, dtype)
        arr.flags.writeable = False
        weights[name] = arr
    om = OmFile(mode, sections, weights, buffer=keep)
    om.contract = parse_sections(mode, sections, weights)
    return om


def load_om(source: str | os.PathLike | bytes | bytearray | memoryview, *,
            verify: bool = True) -> OmFile:
    """Read a .om model from a path or from bytes.

    A path is read whole into memory, so that changing or deleting the file afterwards
    cannot touch the model (a mapping of the file would see it, or fault).  Weights are
    read-only views into those bytes (or the given bytes: no copy).  With ``verify``
    (default) every section's crc32 is checked.  Every problem with the data raises
    ModelFormatError.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        keep: Any = source
        buf = memoryview(source)
        if buf.ndim != 1 or buf.format != "B":
            buf = buf.cast("B")
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                keep = bytearray(size)
                if f.readinto(keep) != size:
                    raise OSError(f"the file changed size while it was read ({size} bytes before)")
        except (OSError, ValueError) as exc:
            raise ModelFormatError(f"cannot read model file '{path}': {exc}") from exc
        buf = memoryview(keep)
    else:
        raise TypeError(f"load_om() takes a path or bytes, got {type(source).__name__}")
    try:
        return _parse(buf, keep, verify)
    except ModelFormatError:
        raise
    except Exception as exc:
        raise ModelFormatError(f"malformed model file: {type(exc).__name__}: {exc}") from exc

"""Shapes and sizes given on a command line: ``--input-shape NAME:D1,D2,...``,
``--device-memory 2G``."""
from __future__ import annotations

from aircc.errors import CommandLineError


def parse_input_shapes(specs: tuple[str, ...]) -> dict[str, list]:
    """``("data:1,3,224,224", "mask:1,128")`` -> {name: dims}; dims may be symbols."""
    shapes: dict[str, list] = {}
    for spec in specs:
        for part in filter(None, (p.strip() for p in spec.split(";"))):
            name, sep, dims = part.rpartition(":")
            if not sep or not name:
                raise CommandLineError(f"--input-shape: '{part}' is not NAME:D1,D2,...")
            shapes[name] = [int(d) if d.strip().lstrip("-").isdigit() else d.strip()
                            for d in dims.split(",") if d.strip()]
    return shapes


def parse_device_memory(text: str | None) -> int | None:
    """``--device-memory``: ``"2G"`` -> bytes (None when not given)."""
    if not text:
        return None
    from aircc.config import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as e:
        raise CommandLineError(f"--device-memory: {e}") from None

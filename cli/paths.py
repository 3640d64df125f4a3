"""Files the command-line tools write: checked before any work, written whole or not at all."""
from __future__ import annotations

import contextlib
import os
from typing import BinaryIO, Callable

from aircc.errors import CommandLineError


def check_output_path(path: str, option: str = "--output") -> str:
    """``path`` as given, if a file can be written there; else CommandLineError naming it."""
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    if os.path.isdir(full):
        raise CommandLineError(f"{option} {path!r} is a folder; give a file name")
    if not os.path.exists(folder):
        raise CommandLineError(f"{option} {path!r}: folder {folder!r} does not exist")
    if not os.path.isdir(folder):
        raise CommandLineError(f"{option} {path!r}: {folder!r} is not a folder")
    if not _can_create_in(folder):
        raise CommandLineError(f"{option} {path!r}: folder {folder!r} is not writable")
    if os.path.exists(full) and not os.access(full, os.W_OK):
        raise CommandLineError(f"{option} {path!r} exists and is not writable")
    return path


def _can_create_in(folder: str) -> bool:
    """Whether a file can be made in ``folder``: tried, not guessed from permission bits
    (which say yes to root on a folder no one can write into, such as /proc)."""
    probe = os.path.join(folder, f".aircc-probe.{os.getpid()}.{os.urandom(4).hex()}")
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return True


def write_atomically(path: str, write: Callable[[BinaryIO], None], option: str = "--output") -> None:
    """Write ``path`` through ``write`` into a temporary file next to it, then put it in
    place; on failure nothing is left behind and the error is a CommandLineError naming
    ``path``."""
    full = os.path.abspath(path)
    tmp = os.path.join(os.path.dirname(full),
                       f".{os.path.basename(full)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, full)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise CommandLineError(f"cannot write {option} {path!r}: {e.strerror or e}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

"""Load an .om file (or bytes) onto a device and get a runnable model."""
from __future__ import annotations

import os

from aircc.errors import ModelFormatError
from aircc.executor.device.device import VirtualDevice, default_device
from aircc.formats import OmFile, load_om

from .static_model import StaticModel


def load_model(source: str | os.PathLike | bytes | OmFile, device: VirtualDevice | None = None):
    """A runnable model for ``source`` on ``device`` (the default device if None)."""
    om = source if isinstance(source, OmFile) else load_om(source)
    device = device or default_device()
    if om.mode == "static":
        return StaticModel(om, device)
    raise ModelFormatError(f"models in {om.mode!r} mode cannot be run by this build; "
                           f"it runs static models")

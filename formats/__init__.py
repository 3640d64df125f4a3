"""The .om offline model file format: bytes, sections and their schemas."""
from __future__ import annotations

from .om import (FORMAT_MAJOR, FORMAT_MINOR, KIND_NAMES, SECTION_KINDS, OmFile, dump_om,
                 load_om, save_om)
from .schema import (REQUIRED_SECTIONS, SCHEMA_VERSION, SECTION_NAMES, validate_section,
                     validate_sections)

__all__ = ["OmFile", "save_om", "dump_om", "load_om", "FORMAT_MAJOR", "FORMAT_MINOR",
           "SECTION_KINDS", "KIND_NAMES", "SECTION_NAMES", "REQUIRED_SECTIONS",
           "SCHEMA_VERSION", "validate_section", "validate_sections"]

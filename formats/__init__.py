"""The .om offline model file: the container (header, section table, checksummed
sections, aligned weights) and the typed contract of its sections."""
from __future__ import annotations

from .contract import (REQUIRED_SECTIONS, SCHEMA_VERSION, SECTION_NAMES, ModelContract,
                       StaticPlan, parse_sections, validate_section)
from .om import (FORMAT_MAJOR, FORMAT_MINOR, KIND_NAMES, SECTION_KINDS, OmFile, dump_om,
                 load_om, save_om)

__all__ = ["OmFile", "save_om", "dump_om", "load_om", "FORMAT_MAJOR", "FORMAT_MINOR",
           "SECTION_KINDS", "KIND_NAMES", "SECTION_NAMES", "REQUIRED_SECTIONS",
           "SCHEMA_VERSION", "ModelContract", "StaticPlan", "parse_sections",
           "validate_section"]

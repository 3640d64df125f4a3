"""The documentation keeps up with the code: every error class, its code and exit code in
docs/errors.md, every environment variable aircc reads in the README and its docs, every
field of every .om section in docs/om-format.md with the type its description gives it."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import aircc.errors as errors
from aircc.config import VARIABLES
from aircc.formats.contract import SECTION_TYPES
from aircc.formats.model_section import OnnxRecord
from aircc.formats.schema import Record, field_rows

ROOT = Path(__file__).resolve().parents[2]


def error_classes() -> list[type]:
    return [c for c in vars(errors).values()
            if isinstance(c, type) and issubclass(c, errors.AirccError)]


def test_every_error_class_is_in_the_table_with_its_code_and_exit_code():
    text = (ROOT / "docs" / "errors.md").read_text()
    rows = {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^\| `(\w+)` \| (\d+) \| (\d+) \|", text, re.M)}
    assert len(error_classes()) >= 20
    for cls in error_classes():
        assert rows.get(cls.__name__) == (cls.code, cls.exit_code), cls.__name__
    assert len({c.code for c in error_classes()}) == len(error_classes()), "codes are unique"


def test_every_environment_variable_is_documented():
    readme = (ROOT / "README.md").read_text()
    docs = readme + (ROOT / "docs" / "errors.md").read_text()
    for name in VARIABLES:
        assert f"`{name}`" in docs, name
    assert (ROOT / "README.md").read_text().count("\n") <= 160


def doc_table(text: str, heading: str) -> dict[str, str]:
    """Field -> type of the first table after the heading that starts with ``heading``
    (a row naming several fields gives each the row's type)."""
    at = re.search(rf"^#+ {re.escape(heading)}.*$", text, re.M)
    assert at, f"no heading {heading}"
    lines = text[at.end():].split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("| field |"))
    out = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        names, kind = line.split(" | ")[:2]
        for name in re.findall(r"`(\w+)`", names):
            out[name] = kind
    return out


#: Each documented record: its section's types, and the records with a table of their own.
DOCUMENTED = {f"`{name}`": t for name, t in SECTION_TYPES.items()} | {"`onnx`:": OnnxRecord}


@pytest.mark.parametrize("heading", DOCUMENTED)
def test_om_format_tables_match_the_section_descriptions(heading):
    """A declared section's table lists each of its fields with the type its description
    gives (and no other field); a section read by hand lists its dataclass's fields."""
    table = doc_table((ROOT / "docs" / "om-format.md").read_text(), heading)
    cls = DOCUMENTED[heading]
    if issubclass(cls, Record):
        assert table == dict(field_rows(cls))
    else:
        assert set(table) == {f.name for f in dataclasses.fields(cls)}

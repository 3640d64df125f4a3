"""The documentation keeps up with the code: every error class, its code and exit code in
docs/errors.md, every environment variable aircc reads in the README and its docs."""
from __future__ import annotations

import re
from pathlib import Path

import aircc.errors as errors
from aircc.config import VARIABLES

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

"""Sections described once (formats/schema.py): a record's reading, writing, summary and doc
row follow from its field declarations, and a new field is one declaration."""
from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from aircc.cli.aircc_cmd import main as aircc_cli
from aircc.errors import ModelFormatError
from aircc.formats import OmFile, contract, load_om, save_om
from aircc.formats.checks import Checker
from aircc.formats.memory_plan import MemoryPlanSection
from aircc.formats.model_section import ModelSection
from aircc.formats.schema import (Int, ListOf, MapOf, Nested, Optional, Record, Str, field_rows,
                                  summary, wire)
from aircc.formats.summary import summarize
from test_format import sections as raw_sections
from test_format import weights


def sections() -> dict:
    """The small valid model of test_format, as the reader decodes it (lists, not tuples)."""
    s = raw_sections()
    s["model"]["compile_report"] = {"passes": ["fold", "fuse"]}
    return s


@dataclasses.dataclass
class LicensedModel(ModelSection):
    """The model section with one field more: all a new field takes (and its doc row)."""

    licence: str = wire(Str(), "")


def test_a_field_declared_once_round_trips_through_write_read_and_inspect(tmp_path, monkeypatch):
    monkeypatch.setitem(contract.PARSERS, "model", LicensedModel.parse)
    s = sections()
    s["model"] = dataclasses.replace(LicensedModel.parse(s["model"]), licence="CC-BY-4.0").to_payload()
    path = tmp_path / "licensed.om"
    save_om(OmFile("static", s, weights()), path)

    assert load_om(path).parsed().model.licence == "CC-BY-4.0"
    r = CliRunner().invoke(aircc_cli, ["inspect", str(path), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["licence"] == "CC-BY-4.0"
    r = CliRunner().invoke(aircc_cli, ["inspect", str(path)])
    assert r.exit_code == 0, r.output
    assert "\nlicence    CC-BY-4.0\n" in r.output

    monkeypatch.undo()                  # the format as it is: the key is not read, not shown
    assert "licence" not in summarize(load_om(path))
    # an older file, without the key, reads as the default
    del s["model"]["licence"]
    assert LicensedModel.parse(s["model"]).licence == ""


@dataclasses.dataclass(frozen=True)
class Point(Record):
    x: int = wire(Int(lo=0, hi=10))
    label: str = wire(Str(("a", "b")), "a")
    tags: dict[str, int] = wire(MapOf(Int()), {})


@dataclasses.dataclass(frozen=True)
class Shape(Record, closed=True):
    points: list[Point] = wire(ListOf(Nested(Point)))
    scale: int | None = wire(Optional(Int()), None)


def _read(cls, payload):
    return cls.read(Checker("demo"), payload, "")


@pytest.mark.parametrize("payload,message", [
    ({"points": [{"x": 10}], "scale": None}, "section 'demo': points[0].x must be an int in [0, 10), got int 10"),
    ({"points": [{"x": True}], "scale": None}, "points[0].x must be an int in [0, 10), got bool True"),
    ({"points": [{}], "scale": None}, "section 'demo': points[0] is missing key 'x'"),
    ({"points": [{"x": 1, "label": "c"}], "scale": None}, "points[0].label must be 'a' or 'b', got 'c'"),
    ({"points": [{"x": 1, "tags": {"k": "v"}}], "scale": None},
     "points[0].tags must map str to int, got str 'k' -> str 'v'"),
    ({"points": {}, "scale": None}, "points must be a list, got dict {}"),
    ({"points": [], "scale": "2"}, "scale must be an int, got str '2'"),
    ({"points": []}, "section 'demo': missing key 'scale'"),                # closed: every key
    ({"points": [], "scale": 1, "more": 1}, "has unknown keys ['more'] (known: ['points', 'scale'])"),
])
def test_reading_is_strict_and_names_the_field(payload, message):
    with pytest.raises(ModelFormatError) as e:
        _read(Shape, payload)
    assert message in str(e.value)


def test_a_record_reads_what_it_writes_and_absent_keys_read_as_their_default():
    shape = _read(Shape, {"points": [{"x": 3}, {"x": 4, "label": "b", "tags": {"t": 1}}],
                          "scale": None})
    assert shape == Shape([Point(3), Point(4, "b", {"t": 1})])
    assert shape.to_payload() == {"points": [{"x": 3, "label": "a", "tags": {}},
                                             {"x": 4, "label": "b", "tags": {"t": 1}}],
                                  "scale": None}       # closed: written even when nil
    assert _read(Shape, shape.to_payload()) == shape
    plan = MemoryPlanSection.parse(sections()["memory_plan"])
    assert MemoryPlanSection.parse(plan.to_payload()) == plan
    model = ModelSection.parse(sections()["model"])
    assert "onnx" not in model.to_payload()            # an optional record that is nil: left out
    assert "source_producer" not in summary(model)     # not shown by aircc inspect


def test_the_doc_types_follow_the_declarations():
    assert field_rows(Shape) == [("points", "list of {`x`, `label`, `tags`}"),
                                 ("scale", "int or nil")]
    assert field_rows(Point) == [("x", "int in [0, 10)"), ("label", "`a` \\| `b`; absent: `\"a\"`"),
                                 ("tags", "map str -> int; absent: `{}`")]

"""The reader's table of onnx's operator signatures is the installed onnx's own
(``tools/gen_onnx_signatures.py`` writes it again after an onnx upgrade)."""
from __future__ import annotations

import onnx.defs

from aircc.formats import node_signature
from aircc.formats.node_signature import SCHEMA_DOMAINS, schema_signature, signature
from aircc.formats.node_signature import SIGNATURES
from aircc.formats.onnx_signatures import OPSETS


def test_the_table_gives_what_onnx_gives_at_every_opset():
    ops = {("" if s.domain == "ai.onnx" else s.domain, s.name)
           for s in onnx.defs.get_all_schemas_with_history()
           if s.domain in SCHEMA_DOMAINS}
    assert ops == set(SIGNATURES), "regenerate: python tools/gen_onnx_signatures.py"
    differ = [(domain, op, v) for domain, op in sorted(ops) for v in range(0, OPSETS[domain] + 1)
              if signature(domain, op, v) != schema_signature(domain, op, v)]
    assert not differ, f"regenerate: python tools/gen_onnx_signatures.py ({differ[:3]} differ)"


def test_the_table_covers_the_installed_onnxs_newest_opsets():
    versions = onnx.defs.C.schema_version_map()
    assert OPSETS == {d: versions[d][1] for d in OPSETS}
    assert set(OPSETS) == SCHEMA_DOMAINS - {"ai.onnx"}


def test_an_opset_newer_than_the_table_asks_onnx(monkeypatch):
    # as after an onnx upgrade: the table stops at opset 1, so opset 13 is onnx's answer
    monkeypatch.setattr(node_signature, "OPSETS", {"": 1})
    node_signature.signature.cache_clear()
    try:
        assert signature("", "Add", 13) == schema_signature("", "Add", 13)
        assert signature("", "Add", 13).since == 13
        assert signature("", "NoSuchOp", 13) is None
    finally:
        node_signature.signature.cache_clear()

"""Generate ``formats/onnx_signatures.py`` from the installed onnx's operator schemas.

The .om reader checks every node against its op's signature (:mod:`aircc.formats.node_signature`).
It reads them from that generated table, not from ``onnx.defs``, so that loading an .om
does not import onnx.  Run this after upgrading onnx::

    python tools/gen_onnx_signatures.py

``tests/unit/test_onnx_signatures.py`` fails while the table and the installed onnx disagree.
"""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import onnx.defs

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "formats" / "onnx_signatures.py"


def table() -> tuple[dict[str, int], dict[tuple[str, str], list[tuple]]]:
    """(newest opset per domain, every schema's signature by (domain, op), oldest first)."""
    from aircc.formats.node_signature import SCHEMA_DOMAINS, schema_signature

    domains = {d for d in SCHEMA_DOMAINS if d != "ai.onnx"}
    opsets = {d: last for d, (_, last) in onnx.defs.C.schema_version_map().items() if d in domains}
    history: dict[tuple[str, str], list[tuple]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        domain = "" if s.domain == "ai.onnx" else s.domain
        if domain in domains:
            sig = schema_signature(domain, s.name, s.since_version)
            history.setdefault((domain, s.name), []).append(tuple(sig.__dict__.values()))
    return opsets, {k: sorted(v, key=lambda sig: sig[0]) for k, v in sorted(history.items())}


def main() -> None:
    opsets, history = table()
    rows = ",\n".join(json.dumps([domain, op, sigs], separators=(",", ":"))
                      for (domain, op), sigs in history.items())
    OUT.write_text(
        '"""onnx\'s operator signatures (written by tools/gen_onnx_signatures.py from onnx '
        f'{onnx.__version__}; do not edit).\n\n'
        "``OPSETS``: the newest opset of each domain the table covers (a newer one is read from\n"
        "the installed onnx); ``TABLE``: JSON, one row per op, ``[domain, op, [signature, ...]]``\n"
        "with one list of :class:`.node_signature.Signature`'s fields per version, oldest first\n"
        '(JSON text, not Python literals: it loads in a millisecond, compiled or not)."""\n'
        f"ONNX_VERSION = {onnx.__version__!r}\n"
        f"OPSETS = {opsets!r}\n"
        f'TABLE = r"""[\n{rows}\n]"""\n')
    print(f"{OUT}: {sum(map(len, history.values()))} schemas of {len(history)} ops")


if __name__ == "__main__":
    main()

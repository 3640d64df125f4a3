"""Print the corpus's results table: one line per model and mode, PASS or FAIL with the
error's first line or the largest differences.

    python tests/corpus/table.py                 # every model
    python tests/corpus/table.py bert gpt2-dynamo  # those whose name starts so
    python tests/corpus/table.py --fast          # the default suite's subset

Exports are cached as ``$AIRCC_CORPUS_CACHE`` says (tests/corpus/cache.py).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from corpus.harness import MODES, header, run_mode  # noqa: E402
from corpus.models import ENTRIES, FAST  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="run the models whose name starts with one of these")
    parser.add_argument("--fast", action="store_true", help="only the default suite's subset")
    parser.add_argument("--mode", choices=MODES, action="append", help="only this mode (repeatable)")
    args = parser.parse_args(argv)
    names = [n for n in (FAST if args.fast else ENTRIES)
             if not args.names or any(n.startswith(p) for p in args.names)]
    print(f"# {header()}", flush=True)
    failed = 0
    for name in names:
        for mode in args.mode or MODES:
            outcome = run_mode(ENTRIES[name], mode, ENTRIES)
            failed += not outcome.passed
            print(outcome.line(), flush=True)
    print(f"{len(names) * len(args.mode or MODES) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every model of the export corpus (corpus.models; docs/corpus.md) keeps onnxruntime's
outputs through aircc, compiled in static mode at one fixed shape (run twice) and in dynamic
mode (run at two shapes, then the first again): each output's name, dtype, shape and values
(corpus.harness), with no node on the fallback kernel unless the model says why.  The default suite runs the fast subset
(``FAST``, one model of each exporter family); ``--corpus`` runs them all."""
from __future__ import annotations

from pathlib import Path

from corpus.entry import Family
from corpus.harness import run_mode
from corpus.known import KNOWN
from corpus.models import ENTRIES, FAST


def test_corpus_model_matches_onnxruntime(corpus_case, corpus_results, device):
    name, mode = corpus_case
    outcome = run_mode(ENTRIES[name], mode, ENTRIES, device)
    corpus_results.append(outcome)
    assert outcome.passed, f"{name} ({mode}): {outcome.detail}"


def test_the_corpus_covers_every_family_and_the_subset_each():
    """40 models at least, of every family, and the fast subset one of each family."""
    assert len(ENTRIES) >= 40
    assert {e.family for e in ENTRIES.values()} == set(Family)
    assert {ENTRIES[n].family for n in FAST} == set(Family)
    assert all(name in ENTRIES and mode in ("static", "dynamic") for name, mode in KNOWN)


def test_every_export_has_two_dynamic_shapes_and_a_static_one():
    """Each torch, onnxruntime and shipped entry feeds the same inputs at its three shapes,
    names every input's dynamic axes, and its two dynamic shapes differ (unless the file
    fixes every input's shape: a shipped model may)."""
    for name, entry in ENTRIES.items():
        if entry.family is Family.SKL2ONNX:
            continue
        feeds = [entry.feeds(dims, 0) for dims in (*entry.shapes, entry.static)]
        assert set(feeds[0]) == set(feeds[1]) == set(feeds[2]) <= set(entry.axes), name
        shapes = [{k: v.shape for k, v in f.items()} for f in feeds]
        fixed = entry.family is Family.SHIPPED and not any(entry.axes.values())
        assert (shapes[0] == shapes[1]) if fixed else (shapes[0] != shapes[1]), name


def test_docs_corpus_md_names_every_model_and_every_known_failure():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "corpus.md").read_text()
    assert [n for n in ENTRIES if f"`{n}`" not in docs] == []
    assert f"{len(ENTRIES)} models in {len(Family)} families" in docs
    for reason in set(KNOWN.values()):
        assert f"**{reason.split(':')[0]}**" in docs, reason

"""Every model of the corpus, by name (docs/corpus.md lists them with what each exercises)."""
from __future__ import annotations

from corpus.entry import Entry
from corpus.hf_text import text_entries
from corpus.hf_vision import vision_entries
from corpus.ort_tools import derived_entries
from corpus.shipped import shipped_entries
from corpus.sklearn_corpus import sklearn_entries


def _entries() -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for entry in [*text_entries(), *vision_entries(), *sklearn_entries(), *shipped_entries()]:
        assert entry.name not in out, f"two corpus entries are named {entry.name!r}"
        out[entry.name] = entry
    for entry in derived_entries(out):
        assert entry.name not in out, f"two corpus entries are named {entry.name!r}"
        out[entry.name] = entry
    return out


ENTRIES: dict[str, Entry] = _entries()
#: The default suite's subset: one model of each family, quick to export and to run.
FAST = ("bert-eager-torchscript",                 # torchscript
        "gpt2-dynamo",                            # dynamo
        "bert-eager-torchscript-ortopt",          # ort-optimizer: Attention, EmbedLayerNormalization
        "bert-torchscript-qdynamic",              # ort-quant-dynamic
        "resnet-torchscript-qdq",                 # ort-quant-qdq
        "resnet-torchscript-qop",                 # ort-quant-qop
        "llama-torchscript-int4",                 # ort-matmulnbits
        "skl-scaler-logistic-3-classes",          # skl2onnx
        "paddleocr-cls")                          # shipped: PaddleOCR's, from paddle2onnx

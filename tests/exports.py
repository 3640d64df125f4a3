"""Attention models as real exporters write them: torch.nn.MultiheadAttention,
torch.nn.TransformerEncoder and Hugging Face BERT, built from configs with random
weights (nothing downloaded) and exported with torch.onnx, by the TorchScript exporter
(``legacy``) and by the default one (``dynamo``), with dynamic batch and sequence axes.

    path = exported("bert-sdpa-dynamo")     # exported once per process, into a temp dir
    feeds = inputs("bert-sdpa-dynamo", batch=2, seq=7)

:data:`MODELS` names every model (``...-legacy17``: the TorchScript exporter at opset 17,
which spells GELU out with Erf); ``MODELS[name].blocks`` is its number of attention
blocks.  ``MINILM`` is the benchmark's configuration (6 layers, hidden 384, 12 heads);
the tests use small ones (2 layers, hidden 64).  ``masked-fill-...`` is attention as
Hugging Face wrote it before transformers 5 (a ``masked_fill`` of the scores).

The TorchScript exporter writes torch.nn.MultiheadAttention's key length, as traced,
into a Reshape target: those exports run at that sequence length only
(:func:`fixed_seq`), with any batch.
"""
from __future__ import annotations

import atexit
import contextlib
import io
import logging
import os
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

EXPORTERS = ("legacy", "dynamo")

#: BERT's configuration, small (tests) and MiniLM-like (the benchmark).
SMALL_BERT = dict(vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, max_position_embeddings=128)
MINILM = dict(vocab_size=1000, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536, max_position_embeddings=512)

EMBED, HEADS, FFN = 64, 4, 128      # the torch.nn models' sizes
EXAMPLE = (2, 5)                    # batch and sequence length of the traced example


@dataclass(frozen=True)
class Spec:
    """How to build one model, its input names and which of them are masks."""

    build: Callable
    inputs: tuple[str, ...]
    blocks: int                       # attention blocks (one fused_attention each)
    kind: str                         # "mha", "encoder", "bert"
    options: dict = field(default_factory=dict)


def _randomize(module, seed: int) -> None:
    """Random biases and LayerNorm parameters too (torch initialises them to 0 and 1, and the
    dynamo exporter would merge the equal ones into one initializer)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if name.endswith("bias"):
                p.copy_(noise * 0.1)
            elif p.ndim == 1:                       # a LayerNorm's scale
                p.copy_(1 + noise * 0.1)
            else:
                p.copy_(noise * (1.0 / p.shape[-1]) ** 0.5)


def _mha(batch_first: bool, mask: str):
    import torch

    class MHA(torch.nn.Module):
        """Self-attention; ``mask``: none, key padding (bool), causal (float -inf), or both."""

        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(EMBED, HEADS, batch_first=batch_first)

        def forward(self, x, pad=None):
            seq = x.shape[1] if batch_first else x.shape[0]
            causal = torch.nn.Transformer.generate_square_subsequent_mask(seq) \
                if mask in ("causal", "both") else None
            kpm = pad if mask in ("pad", "both") else None
            return self.attn(x, x, x, key_padding_mask=kpm, attn_mask=causal, need_weights=False)[0]

    return MHA()


def _encoder(norm_first: bool, activation: str, mask: str):
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layer = torch.nn.TransformerEncoderLayer(EMBED, HEADS, FFN, dropout=0.0, activation=activation,
                                                     batch_first=True, norm_first=norm_first)
            self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

        def forward(self, x, pad=None):
            return self.enc(x, src_key_padding_mask=pad if mask == "pad" else None)

    return Encoder()


def _masked_fill():
    import math

    import torch

    class MaskedFill(torch.nn.Module):
        """Self-attention as Hugging Face wrote it before transformers 5 (DistilBERT): Q
        scaled before the product, the padding mask expanded to the scores' shape and
        filled in with finfo.min."""

        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (torch.nn.Linear(EMBED, EMBED) for _ in range(4))

        def forward(self, x, keep):
            b, s, _ = x.shape
            d = EMBED // HEADS

            def heads(t):
                return t.view(b, -1, HEADS, d).transpose(1, 2)

            q, k, v = heads(self.q(x)) / math.sqrt(d), heads(self.k(x)), heads(self.v(x))
            scores = q @ k.transpose(2, 3)
            mask = (keep == 0).view(b, 1, 1, s).expand_as(scores)
            scores = scores.masked_fill(mask, torch.tensor(torch.finfo(scores.dtype).min))
            context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, -1, EMBED)
            return self.o(context)

    return MaskedFill()


def _bert(impl: str, config: dict):
    import torch
    from transformers import BertConfig, BertModel

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            cfg = BertConfig(**config, attn_implementation=impl)
            self.bert = BertModel(cfg, add_pooling_layer=False)

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return Bert()


def _models() -> dict[str, Spec]:
    out: dict[str, Spec] = {
        "encoder-post-gelu-none-legacy17": Spec(lambda: _encoder(False, "gelu", "none"), ("x",), 2, "encoder",
                                                dict(exporter="legacy", batch_first=True, mask="none",
                                                     opset=17)),
        "bert-eager-legacy17": Spec(lambda: _bert("eager", SMALL_BERT), ("input_ids", "attention_mask"), 2,
                                    "bert", dict(exporter="legacy", config=SMALL_BERT, opset=17))}
    for exporter in EXPORTERS:
        for bf in (True, False):
            for mask in ("none", "pad", "causal", "both"):
                name = f"mha-{'bf' if bf else 'sf'}-{mask}-{exporter}"
                out[name] = Spec(lambda bf=bf, mask=mask: _mha(bf, mask),
                                 ("x", "pad") if mask in ("pad", "both") else ("x",), 1, "mha",
                                 dict(exporter=exporter, batch_first=bf, mask=mask))
        for nf in (False, True):
            for act in ("relu", "gelu"):
                for mask in ("none", "pad"):
                    name = f"encoder-{'pre' if nf else 'post'}-{act}-{mask}-{exporter}"
                    out[name] = Spec(lambda nf=nf, act=act, mask=mask: _encoder(nf, act, mask),
                                     ("x", "pad") if mask == "pad" else ("x",), 2, "encoder",
                                     dict(exporter=exporter, batch_first=True, mask=mask))
        out[f"masked-fill-{exporter}"] = Spec(_masked_fill, ("x", "keep"), 1, "custom",
                                              dict(exporter=exporter, batch_first=True, mask="keep"))
        for impl in ("eager", "sdpa"):
            out[f"bert-{impl}-{exporter}"] = Spec(lambda impl=impl: _bert(impl, SMALL_BERT),
                                                  ("input_ids", "attention_mask"), 2, "bert",
                                                  dict(exporter=exporter, config=SMALL_BERT))
            out[f"minilm-{impl}-{exporter}"] = Spec(lambda impl=impl: _bert(impl, MINILM),
                                                    ("input_ids", "attention_mask"), 6, "bert",
                                                    dict(exporter=exporter, config=MINILM))
    return out


MODELS: dict[str, Spec] = _models()


def fixed_seq(name: str) -> int | None:
    """The one sequence length model ``name`` runs at, if its exporter fixed it."""
    spec = MODELS[name]
    return EXAMPLE[1] if spec.kind in ("mha", "encoder") and spec.options["exporter"] == "legacy" else None


def inputs(name: str, batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random feeds for model ``name``: padding masks keep at least one position per row."""
    spec = MODELS[name]
    rng = np.random.default_rng(seed)
    keep = np.ones((batch, seq), bool)
    for b in range(1, batch):                   # the first row unpadded, the others padded
        keep[b, max(1, seq - 1 - (b * 3) % seq):] = False
    if spec.kind == "bert":
        vocab = spec.options["config"]["vocab_size"]
        return {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64),
                "attention_mask": keep.astype(np.int64)}
    shape = (batch, seq, EMBED) if spec.options["batch_first"] else (seq, batch, EMBED)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    if "pad" in spec.inputs:
        feeds["pad"] = ~keep
    if "keep" in spec.inputs:
        feeds["keep"] = keep.astype(np.int64)
    return feeds


def _example(name: str):
    import torch

    return tuple(torch.from_numpy(v) for v in inputs(name, *EXAMPLE).values())


def _dynamic_axes(name: str) -> dict:
    spec = MODELS[name]
    seq_first = spec.kind == "mha" and not spec.options["batch_first"]
    axes = {}
    for i in spec.inputs:
        axes[i] = {0: "S", 1: "B"} if seq_first and i == "x" else {0: "B", 1: "S"}
    return axes


def export(name: str, path: str) -> str:
    """Build model ``name`` (random weights, eval mode) and export it to ``path``."""
    import torch

    spec = MODELS[name]
    torch.manual_seed(0)
    model = spec.build().eval()
    _randomize(model, seed=sum(map(ord, name)) % 1000)
    args = _example(name)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            if spec.options["exporter"] == "dynamo":
                torch.onnx.export(model, args, path, input_names=list(spec.inputs), output_names=["y"],
                                  dynamic_axes=_dynamic_axes(name), dynamo=True, external_data=False)
            else:
                torch.onnx.export(model, args, path, input_names=list(spec.inputs), output_names=["y"],
                                  dynamic_axes=_dynamic_axes(name), dynamo=False,
                                  opset_version=spec.options.get("opset"))
        finally:
            logging.disable(logging.NOTSET)
    return path


_DIR: list[str] = []
_DONE: dict[str, str] = {}
_LOCK = threading.Lock()


def exported(name: str) -> str:
    """The path of model ``name`` as exported (once per process, into a temp dir removed
    when the process ends)."""
    with _LOCK:
        if name not in _DONE:
            if not _DIR:
                _DIR.append(tempfile.mkdtemp(prefix="aircc-exports-"))
                atexit.register(shutil.rmtree, _DIR[0], ignore_errors=True)
            _DONE[name] = export(name, os.path.join(_DIR[0], f"{name}.onnx"))
        return _DONE[name]

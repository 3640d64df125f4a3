"""Small torch models written the way users write them, for tests/e2e/test_user_exports.py.

``decoder``: a GPT-like causal decoder (token and position embeddings, two self-attention
layers masked by ``torch.triu`` of a bool tensor and ``masked_fill``, a GELU MLP, LayerNorm,
an LM head) on int64 tokens.  ``masks``: bool masks from comparisons, ``logical_and`` /
``logical_not`` / ``logical_or``, ``torch.where`` on float tensors, ``any`` / ``all``.
``indices``: int64 index arithmetic, ``torch.arange`` (ONNX Range), ``//`` and ``%``,
``clamp`` and ``cumsum`` of int64, and gathers (``index_select``, ``gather``, an
embedding lookup) at computed indices.

    path = exported("decoder", "dynamo")   # exported once per process, into a temp dir
    feeds = inputs("decoder", batch=2, seq=16)

Every model has dynamic batch (``B``) and sequence (``S``) axes.
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

import numpy as np
import torch
from torch import nn

VOCAB, D_MODEL, HEADS, LAYERS, CONTEXT = 50, 32, 4, 2, 64
FEATURES = 8
EXPORTERS = ("legacy", "dynamo")
EXAMPLE = (2, 5)                 # the traced example's batch and sequence length
WINDOW = 5                       # ``indices`` gathers from the first WINDOW positions (the dynamo
                                 # exporter cannot take ``% s`` of a symbolic length): seq >= 5


# ------------------------------------------------------------------- causal decoder
class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, D_MODEL)
        self.positions = nn.Embedding(CONTEXT, D_MODEL)
        self.blocks = nn.Sequential(*(Block(D_MODEL, HEADS) for _ in range(LAYERS)))
        self.ln = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1])
        x = self.blocks(self.tokens(tokens) + self.positions(pos))
        return self.head(self.ln(x))


# ---------------------------------------------------------------------- bool masks
class Masks(nn.Module):
    """Where on float tensors under masks combined from comparisons; any / all reductions."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(FEATURES, FEATURES)

    def forward(self, x):
        h = self.proj(x)
        big = x > 0.5
        small = x < -0.5
        keep = torch.logical_and(torch.logical_not(big), torch.logical_not(small))
        clipped = torch.where(keep, h, 0.0)                         # a Python scalar branch
        other = torch.where(torch.logical_or(big, h >= 0), x * 2.0, -h)
        row_any = big.any(dim=-1, keepdim=True)                     # (B, S, 1)
        row_all = keep.all(dim=-1, keepdim=True)
        scored = torch.where(row_any, clipped, other)
        scored = torch.where(row_all, scored + 1.0, scored).masked_fill(small & (h < 0), -3.0)
        flag = torch.logical_xor(row_any, row_all).float()
        counts = keep.sum(dim=-1)                                   # int64 count of kept
        counts = counts.masked_fill(~row_any.squeeze(-1), -1)       # an int fill of int64
        counts = torch.where(big.any(dim=-1) & (counts > 2), counts * 10, counts)
        every = (x > -10).all() & big.any()                         # full reductions to bool
        return scored + flag * every.float(), counts, keep | (big ^ small)


# ------------------------------------------------------------------ int64 indices
class Indices(nn.Module):
    """int64 arithmetic on ``arange`` and on the input, then gathers at those indices."""

    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(CONTEXT, FEATURES)

    def forward(self, x, ids):
        b, s, f = x.shape
        offset = ids[:, :1] - 20                                    # (B, 1) int64, signed
        pos = torch.arange(s) * 2 + offset                          # (B, S)
        signed = ids - 20
        floor = signed // 3 + signed % 7                            # floor division, Python modulo
        trunc = torch.div(signed, 4, rounding_mode="trunc")
        pos = torch.clamp(pos + floor, min=0, max=CONTEXT - 1)
        folded = (ids // 3) % WINDOW                                # (B, S) in [0, WINDOW)
        running = torch.cumsum(ids % 5, dim=1)                      # int64 cumsum
        bucket = torch.clamp(running - 4, min=0) % WINDOW
        rev = torch.arange(s - 1, -1, -1)                           # reversed positions
        flipped = torch.index_select(x, 1, rev)                     # (B, S, F)
        picked = torch.gather(x, 1, folded.unsqueeze(-1).expand(b, s, f))   # take_along_dim:
        # the same op, which the TorchScript exporter does not export
        shifted = torch.gather(x, 1, bucket.unsqueeze(-1).expand(b, s, f))
        looked = self.table(pos)                                    # (B, S, F)
        best = x.argmax(dim=-1)                                     # int64
        lo = torch.minimum(trunc, best) + torch.maximum(signed.abs(), folded)
        return flipped + picked * 0.5 + shifted + looked, pos + running, lo * torch.sign(signed)


MODELS = {"decoder": (Decoder, ("tokens",), ("logits",)),
          "masks": (Masks, ("x",), ("y", "counts", "mask")),
          "indices": (Indices, ("x", "ids"), ("y", "pos", "lo"))}


def inputs(name: str, batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if name == "decoder":
        return {"tokens": rng.integers(0, VOCAB, (batch, seq)).astype(np.int64)}
    x = rng.standard_normal((batch, seq, FEATURES)).astype(np.float32)
    if name == "masks":
        return {"x": x}
    return {"x": x, "ids": rng.integers(0, 40, (batch, seq)).astype(np.int64)}


def export(name: str, exporter: str, path: str) -> str:
    build, ins, outs = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    args = tuple(torch.from_numpy(v) for v in inputs(name, *EXAMPLE).values())
    axes = {i: {0: "B", 1: "S"} for i in ins}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(model, args, path, input_names=list(ins), output_names=list(outs),
                              dynamic_axes=axes, dynamo=exporter == "dynamo",
                              **({"external_data": False} if exporter == "dynamo" else {}))
        finally:
            logging.disable(logging.NOTSET)
    return path


_DIR: list[str] = []
_DONE: dict[tuple[str, str], str] = {}
_LOCK = threading.Lock()


def exported(name: str, exporter: str) -> str:
    """The path of model ``name`` exported by ``exporter`` (once per process)."""
    with _LOCK:
        if (name, exporter) not in _DONE:
            if not _DIR:
                _DIR.append(tempfile.mkdtemp(prefix="aircc-user-exports-"))
                atexit.register(shutil.rmtree, _DIR[0], ignore_errors=True)
            _DONE[name, exporter] = export(name, exporter, os.path.join(_DIR[0], f"{name}-{exporter}.onnx"))
        return _DONE[name, exporter]

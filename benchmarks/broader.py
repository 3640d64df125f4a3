"""The broader suite: models of the kinds users bring, built with torch and exported to ONNX.

    python benchmarks/broader.py           # export (or find cached) every model, print its ops

Eight families, each at a FULL size (the benchmark's, 1-50 ms on onnxruntime here) and a
SMALL size (the tests'), with seeded random weights:

- ``lstm``: token embedding, a 2-layer LSTM, a linear head;
- ``gru``: feature frames through a linear layer, a 2-layer GRU, a linear head;
- ``mobilenet_se``: MobileNetV3-Small-like: depthwise-separable inverted residuals with
  squeeze-and-excitation (GlobalAveragePool, 1x1 convs, ReLU, HardSigmoid, Mul), HardSwish;
- ``unet``: a U-Net: conv + InstanceNorm + ReLU pairs, MaxPool down, ConvTranspose and
  Resize up, skip Concats;
- ``transformer_encoder``: ``torch.nn.TransformerEncoder`` (batch first, 4 layers, d_model
  256, 4 heads), dynamic batch and sequence;
- ``causal_decoder``: GPT-like: token and position embeddings, 4 layers of self-attention
  masked by ``torch.triu`` of a bool tensor, GELU MLPs, a final LayerNorm and LM head;
- ``bert_eager`` / ``bert_sdpa``: a Hugging Face ``BertModel`` of MiniLM's size (6 layers,
  384 wide, 12 heads) with eager or SDPA attention, padding masked (needs transformers).

The models are in ``torch_models.py``.  Every one is exported with dynamic batch (and
sequence, for sequence models) axes by the TorchScript exporter (``dynamo=False``, opset
:data:`OPSET`; the TransformerEncoder by the ``torch.export``-based one) and cached in
``benchmarks/models/`` under a name keyed by a hash of its classes' source, its config,
the exporter, the opset and torch's version: a rerun loads the file instead of exporting.
"""
from __future__ import annotations

import hashlib
import inspect
import io
import os
import sys
import warnings
from dataclasses import dataclass

import numpy as np
import onnx

from torch_models import (MOBILENET_V3_SMALL, CausalDecoder, CausalSelfAttention, DecoderBlock,
                          DoubleConv, Encoder, GRUAcoustic, HFBert, InvertedResidual, LSTMTagger,
                          MobileNetSE, SqueezeExcite, UNet, make_divisible, nn, torch)

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "models")
OPSET = 17
DYNAMO_OPSET = 18          # the lowest the torch.export-based exporter writes
SIZES = ("full", "small")


# --------------------------------------------------------------------- families
@dataclass(frozen=True)
class Family:
    """One model of the suite: how to build it and feed it, at each size."""

    name: str
    module: type
    """The model's class; its keyword arguments are a size's ``config``."""
    parts: tuple
    """Classes and functions whose source (with ``module``'s) keys the export cache."""
    input: str
    """The one input: ``tokens`` (int64 [batch, seq]) or a float32 tensor."""
    dynamic: dict
    """Dynamic axes of the input and the output, by position: name."""
    configs: dict
    """Per size: the module's config."""
    shapes: dict
    """Per size: the input shapes the benchmark (full) or the tests (small) feed."""
    mode: str
    """How the benchmark compiles it: ``static`` (shapes fixed) or ``dynamic``."""
    exporter: str = "torchscript"
    """``torchscript`` (``dynamo=False``) or ``dynamo`` (``torch.export``: where the
    TorchScript trace fixes a dynamic axis as a constant)."""

    def feeds(self, size: str, shape: tuple, seed: int = 0) -> dict[str, np.ndarray]:
        """Random inputs of ``shape`` (token ids below the vocabulary, or normal floats)."""
        rng = np.random.default_rng(seed)
        if self.input == "tokens":
            config = self.configs[size]
            vocab = config.get("vocab", config.get("vocab_size"))
            return {"tokens": rng.integers(0, vocab, shape, dtype=np.int64)}
        return {self.input: rng.standard_normal(shape).astype(np.float32)}


SEQ = {0: "batch", 1: "seq"}
#: Hugging Face BERT's sizes: MiniLM-L6's (the benchmark's) and a small one (the tests').
MINILM = dict(vocab_size=1000, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536, max_position_embeddings=512)
SMALL_BERT = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64)
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("lstm", LSTMTagger, (), "tokens", SEQ,
           {"full": dict(vocab=4000, embed=128, hidden=256, layers=2, classes=1000),
            "small": dict(vocab=50, embed=16, hidden=24, layers=2, classes=10)},
           {"full": [(4, 64)], "small": [(2, 7)]}, "static"),
    Family("gru", GRUAcoustic, (), "frames", SEQ,
           {"full": dict(features=80, embed=128, hidden=256, layers=2, classes=40),
            "small": dict(features=12, embed=16, hidden=24, layers=2, classes=10)},
           {"full": [(4, 100, 80)], "small": [(2, 7, 12)]}, "static"),
    Family("mobilenet_se", MobileNetSE, (make_divisible, SqueezeExcite, InvertedResidual), "image",
           {0: "batch"},
           {"full": dict(blocks=MOBILENET_V3_SMALL, stem=16, last=576, hidden=1024, classes=1000),
            "small": dict(blocks=[[3, 16, 16, True, False, 2], [3, 32, 16, False, True, 1],
                                  [5, 48, 24, True, True, 2]],
                          stem=16, last=48, hidden=32, classes=10)},
           {"full": [(1, 3, 224, 224)], "small": [(2, 3, 32, 32)]}, "static"),
    Family("unet", UNet, (DoubleConv,), "image", {0: "batch"},
           {"full": dict(channels=[16, 32, 64, 128, 256], cin=3, classes=2),
            "small": dict(channels=[4, 8, 8, 16, 16], cin=3, classes=2)},
           {"full": [(1, 3, 128, 128)], "small": [(2, 3, 32, 32)]}, "static"),
    Family("transformer_encoder", Encoder, (), "x", SEQ,
           {"full": dict(d_model=256, heads=4, ff=1024, layers=4),
            "small": dict(d_model=32, heads=4, ff=64, layers=2)},
           {"full": [(1, 64, 256), (4, 128, 256)], "small": [(2, 5, 32), (3, 9, 32)]}, "dynamic",
           # the TorchScript trace of MultiheadAttention reshapes by the example's length
           "dynamo"),
    Family("causal_decoder", CausalDecoder, (CausalSelfAttention, DecoderBlock), "tokens", SEQ,
           {"full": dict(vocab=4000, d_model=256, heads=4, layers=4, context=256),
            "small": dict(vocab=50, d_model=32, heads=4, layers=2, context=16)},
           {"full": [(1, 128), (4, 64)], "small": [(2, 5), (1, 11)]}, "dynamic"),
    *(Family(f"bert_{attention}", HFBert, (), "tokens", SEQ,
             {"full": dict(attention=attention, **MINILM), "small": dict(attention=attention, **SMALL_BERT)},
             {"full": [(8, 128)], "small": [(2, 7)]}, "dynamic") for attention in ("eager", "sdpa")),
)}


def _needs_torch() -> None:
    if torch is None:
        raise RuntimeError("the broader suite needs torch (pip install torch); it is not installed")


def cache_key(family: Family, size: str) -> str:
    """A hash of what the exported file depends on: sources, config, opset, torch."""
    _needs_torch()
    h = hashlib.sha256()
    for part in (family.module, *family.parts, Family.feeds, build, _export):
        h.update(inspect.getsource(part).encode())
    h.update(repr((family.configs[size], example_shape(family, size), family.dynamic,
                   family.exporter, OPSET, DYNAMO_OPSET, torch.__version__)).encode())
    return h.hexdigest()[:16]


def build(family: Family, size: str) -> "torch.nn.Module":
    """The model in eval mode, its weights drawn from a seeded generator."""
    _needs_torch()
    torch.manual_seed(0)
    model = family.module(**family.configs[size]).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():        # BatchNorm statistics away from the identity, so folding shows
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1, generator=g)
                m.running_var.uniform_(0.5, 1.5, generator=g)
    return model


def example_shape(family: Family, size: str) -> tuple:
    """The shape the model is exported at: the biggest batch (a batch of 1 could be
    specialised into the graph)."""
    return max(family.shapes[size])


def _export(family: Family, model: "torch.nn.Module", feeds: dict) -> onnx.ModelProto:
    example = tuple(torch.from_numpy(v) for v in feeds.values())
    names = dict(input_names=[family.input], output_names=["output"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # the TorchScript exporter's deprecation notice
        if family.exporter == "dynamo":
            dims = {axis: torch.export.Dim(name) for axis, name in family.dynamic.items()}
            program = torch.onnx.export(model, example, None, dynamo=True, opset_version=DYNAMO_OPSET,
                                        dynamic_shapes=(dims,), verbose=False, **names)
            return program.model_proto
        buf = io.BytesIO()
        torch.onnx.export(model, example, buf, dynamo=False, opset_version=OPSET,
                          dynamic_axes={family.input: family.dynamic, "output": family.dynamic},
                          **names)
        return onnx.load_from_string(buf.getvalue())


def export(family: Family, size: str, cache: str = CACHE) -> onnx.ModelProto:
    """The family's model at ``size`` as ONNX: from ``cache`` if exported before, else
    exported now and written there."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    path = os.path.join(cache, f"{family.name}-{size}-{cache_key(family, size)}.onnx")
    if os.path.exists(path):
        return onnx.load(path)
    proto = _export(family, build(family, size), family.feeds(size, example_shape(family, size)))
    proto.graph.name = family.name
    os.makedirs(cache, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    onnx.save(proto, tmp)
    os.replace(tmp, path)          # a concurrent run sees the whole file or none
    return proto


def row_names(family: Family, size: str) -> list[str]:
    """The benchmark's row names for ``family``: its name, with the shape for each of a
    dynamic family's shapes when it has several."""
    shapes = family.shapes[size]
    if family.mode == "dynamic" and len(shapes) > 1:
        return [f"{family.name}_{s[0]}x{s[1]}" for s in shapes]
    return [family.name] * len(shapes)


def entries(size: str = "full", wanted: set | None = None) -> list[dict]:
    """The benchmark's rows: one per family and input shape, static families compiled at
    their shape, dynamic ones once for all their shapes (``shared``).  With ``wanted``,
    only the rows of those names (only their families are exported)."""
    from aircc.compiler.driver import CompileOptions

    rows = []
    for family in FAMILIES.values():
        names = row_names(family, size)
        if wanted is not None and not wanted & {family.name, *names}:
            continue
        model = export(family, size)
        for name, shape in zip(names, family.shapes[size]):
            if wanted is not None and not wanted & {family.name, name}:
                continue
            feeds = family.feeds(size, shape)
            row = {"name": name, "model": model, "feeds": feeds}
            if family.mode == "dynamic":
                row.update(options=CompileOptions(), shared=family.name)
            else:
                row["options"] = CompileOptions(input_shapes={k: list(v.shape) for k, v in feeds.items()})
            rows.append(row)
    return rows


def main(argv=None) -> int:
    from collections import Counter

    size = (argv or sys.argv[1:] or ["full"])[0]
    for family in FAMILIES.values():
        model = export(family, size)
        ops = Counter(n.op_type for n in model.graph.node)
        print(f"{family.name:<20} {len(model.graph.node):5d} nodes  "
              + ", ".join(f"{op} {n}" for op, n in sorted(ops.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

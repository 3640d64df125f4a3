"""Hugging Face text models of the corpus, small configs with random weights: encoders
(BERT with SDPA and with eager attention, and with heads of 64; DistilBERT, RoBERTa, ALBERT,
DeBERTa-v2, ELECTRA), decoders (GPT-2, OPT, Llama with rotary embeddings and grouped-query
attention, Mistral with sliding-window attention; Llama, GPT-2 and Qwen2 decode steps with
their key/value cache as inputs and outputs) and encoder-decoders (T5, BART, Whisper: the
full forward with ``decoder_input_ids``).  Batch and sequence axes are dynamic."""
from __future__ import annotations

import numpy as np

from corpus.entry import Dims, Entry
from corpus.torch_export import torch_entries, wrap

VOCAB = 99
TEXT_AXES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
             "token_type_ids": {0: "batch", 1: "seq"}}
ENC_DEC_AXES = {**TEXT_AXES, "decoder_input_ids": {0: "batch", 1: "dec"}}
ENC_DEC_SHAPES = ({"batch": 1, "seq": 5, "dec": 3}, {"batch": 3, "seq": 13, "dec": 6})
ENC_DEC_STATIC = {"batch": 2, "seq": 8, "dec": 4}
LAYERS = 2
#: The Llama: 4 query heads sharing 2 key/value heads of 8 (grouped-query attention).
LLAMA = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=LAYERS,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
MISTRAL = dict(LLAMA, sliding_window=4)
QWEN2 = dict(LLAMA, use_sliding_window=False)
GPT2 = dict(vocab_size=VOCAB, n_embd=32, n_layer=LAYERS, n_head=4, n_positions=64)
KV_HEADS, HEAD_DIM = 2, 8
KV_SHAPES = ({"batch": 1, "seq": 4, "past": 0}, {"batch": 3, "seq": 1, "past": 9})   # 0: empty
KV_STATIC = {"batch": 1, "seq": 1, "past": 7}          # one new token, as a decoder runs
KV_EXAMPLE = {"batch": 2, "seq": 3, "past": 5}         # what the export traces


def padding_mask(batch: int, seq: int, left: bool = False) -> np.ndarray:
    """int64 ones, the rows after the first padded at their end (every row keeps one position),
    or at their start (``left``, as decoders are batched for generation: the padded
    positions' attention rows are then fully masked)."""
    keep = np.ones((batch, seq), np.int64)
    for b in range(1, batch):
        keep[b, max(1, seq - 1 - (b * 3) % seq):] = 0
    return np.ascontiguousarray(keep[:, ::-1]) if left else keep


def text_feeds(names: tuple[str, ...], left: bool = False):
    """A feeds maker for ``names`` among input_ids, attention_mask, token_type_ids and
    decoder_input_ids (dims ``batch``, ``seq``, and ``dec`` for the decoder's length);
    ``left``: padded at the start of rows."""
    def feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        b, s = dims["batch"], dims["seq"]
        made = {"input_ids": rng.integers(0, VOCAB, (b, s)).astype(np.int64),
                "attention_mask": padding_mask(b, s, left),
                "token_type_ids": rng.integers(0, 2, (b, s)).astype(np.int64)}
        if "dec" in dims:
            made["decoder_input_ids"] = rng.integers(0, VOCAB, (b, dims["dec"])).astype(np.int64)
        return {n: made[n] for n in names}

    return feeds


def hf_model(config_cls: str, model_cls: str, config: dict, inputs: tuple[str, ...], outputs):
    """A maker of transformers' ``model_cls`` on ``config_cls(**config)``, wrapped (``wrap``)."""
    def make():
        import transformers

        cfg = getattr(transformers, config_cls)(**config)
        return wrap(getattr(transformers, model_cls)(cfg), inputs, outputs)

    return make


def _text(name: str, config_cls: str, model_cls: str, config: dict, inputs: tuple[str, ...],
          outputs: tuple[str, ...], exercises: str, axes=TEXT_AXES, left: bool = False,
          **options) -> list[Entry]:
    make = hf_model(config_cls, model_cls, config, inputs, outputs)
    return torch_entries(name, make, outputs, text_feeds(inputs, left), axes, exercises,
                         dict(config, cls=model_cls), **options)


ENCODER = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4,
               intermediate_size=37, max_position_embeddings=64)
MASKED = ("input_ids", "attention_mask")
WIDE = dict(ENCODER, hidden_size=128, num_attention_heads=2, intermediate_size=256,
            max_position_embeddings=256)
WIDE_SHAPES = ({"batch": 1, "seq": 77}, {"batch": 4, "seq": 128})
WIDE_STATIC = {"batch": 2, "seq": 96}


def encoders() -> list[Entry]:
    return [
        *_text("bert", "BertConfig", "BertModel", ENCODER, (*MASKED, "token_type_ids"),
               ("last_hidden_state", "pooler_output"),
               "BERT: embeddings with token types, padding-masked attention, GELU, pooler"),
        *_text("bert-eager", "BertConfig", "BertModel", dict(ENCODER, attn_implementation="eager"),
               (*MASKED, "token_type_ids"), ("last_hidden_state", "pooler_output"),
               "BERT with eager attention (an explicit Softmax of masked scores): the form "
               "onnxruntime's optimizer fuses into EmbedLayerNormalization and Attention"),
        *_text("bert-heads64", "BertConfig", "BertModel", WIDE, (*MASKED, "token_type_ids"),
               ("last_hidden_state",), "BERT with 2 heads of 64 over up to 128 tokens: the attention "
               "kernels' path for large heads", shapes=WIDE_SHAPES, static=WIDE_STATIC),
        *_text("distilbert", "DistilBertConfig", "DistilBertModel",
               dict(vocab_size=VOCAB, dim=32, n_layers=LAYERS, n_heads=4, hidden_dim=37,
                    max_position_embeddings=64), MASKED, ("last_hidden_state",),
               "DistilBERT: no token types, its own attention module"),
        *_text("roberta", "RobertaConfig", "RobertaModel", dict(ENCODER, pad_token_id=1), MASKED,
               ("last_hidden_state", "pooler_output"),
               "RoBERTa: position ids from the padding (CumSum over a mask of input_ids)"),
        *_text("albert", "AlbertConfig", "AlbertModel", dict(ENCODER, embedding_size=16), MASKED,
               ("last_hidden_state", "pooler_output"),
               "ALBERT: factorised embeddings, one layer's weights shared by every layer"),
        *_text("deberta-v2", "DebertaV2Config", "DebertaV2Model",
               dict(ENCODER, relative_attention=True, position_buckets=8, max_relative_positions=16,
                    pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True),
               MASKED, ("last_hidden_state",),
               "DeBERTa-v2: disentangled attention, log-bucketed relative positions, Gathers"),
        *_text("electra", "ElectraConfig", "ElectraModel", dict(ENCODER, embedding_size=16), MASKED,
               ("last_hidden_state",), "ELECTRA: an embedding projection before the encoder"),
    ]


def decoders() -> list[Entry]:
    return [
        *_text("gpt2", "GPT2Config", "GPT2LMHeadModel", GPT2, MASKED,
               ("logits",), "GPT-2: Conv1D projections, causal and padding masks, tied LM head",
               left=True),
        *_text("opt", "OPTConfig", "OPTForCausalLM",
               dict(vocab_size=VOCAB, hidden_size=32, ffn_dim=37, num_hidden_layers=LAYERS,
                    num_attention_heads=4, word_embed_proj_dim=32, max_position_embeddings=64),
               MASKED, ("logits",), "OPT: learned positions from the mask's CumSum, ReLU MLP",
               left=True),
        *_text("llama", "LlamaConfig", "LlamaForCausalLM", LLAMA, MASKED, ("logits",),
               "Llama: RMSNorm, rotary embeddings, grouped-query attention, SiLU-gated MLP",
               left=True),
        *_kv("llama-kv", "LlamaConfig", "LlamaForCausalLM", LLAMA, KV_HEADS,
             "Llama decode step: the key/value cache as inputs and outputs (Concat onto the "
             "past), rotary positions offset by the past length; static at one new token"),
        *_text("mistral", "MistralConfig", "MistralForCausalLM", MISTRAL, MASKED, ("logits",),
               "Mistral: Llama's blocks with sliding-window attention (a window of 4 over 5 and 13 "
               "tokens)", left=True),
        *_kv("gpt2-kv", "GPT2Config", "GPT2LMHeadModel", GPT2, 4,
             "GPT-2 decode step: the key/value cache of its 4 heads as inputs and outputs, "
             "positions offset by the past length; static at one new token"),
        *_kv("qwen2-kv", "Qwen2Config", "Qwen2ForCausalLM", QWEN2, KV_HEADS,
             "Qwen2 decode step: biased q/k/v projections, grouped-query attention, the "
             "key/value cache as inputs and outputs"),
    ]


def kv_feeds(kv_heads: int):
    """A feeds maker for a decode step: new tokens, the mask over past and new positions,
    each layer's cache (``kv_heads`` heads of 8)."""
    def feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        b, s, p = dims["batch"], dims["seq"], dims["past"]
        out = {"input_ids": rng.integers(0, VOCAB, (b, s)).astype(np.int64),
               "attention_mask": padding_mask(b, p + s, left=True)}
        for i in range(LAYERS):
            for kind in ("key", "value"):
                cache = rng.standard_normal((b, kv_heads, p, HEAD_DIM))
                out[f"past_{kind}_{i}"] = cache.astype(np.float32)
        return out

    return feeds


KV_NAMES = tuple(f"past_{kind}_{i}" for i in range(LAYERS) for kind in ("key", "value"))
KV_AXES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
           **{n: {0: "batch", 2: "past"} for n in KV_NAMES}}
KV_OUTPUTS = ("logits", *(n.replace("past", "present") for n in KV_NAMES))


def _with_cache(config_cls: str, model_cls: str, config: dict):
    def make():
        import inspect

        import torch
        import transformers

        model = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**config))

        class WithCache(torch.nn.Module):
            """A causal LM taking and giving its key/value cache as plain tensors."""

            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, *past):
                pairs = [(past[2 * i], past[2 * i + 1]) for i in range(LAYERS)]
                cache = transformers.DynamicCache(pairs, config=model.config)
                out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                 past_key_values=cache, use_cache=True)
                layers = out.past_key_values.layers
                return (out.logits, *(t for layer in layers[:LAYERS] for t in (layer.keys, layer.values)))

        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for n in ("self", "input_ids", "attention_mask", *KV_NAMES)]
        WithCache.forward.__signature__ = inspect.Signature(params)
        return WithCache()

    return make


def _kv(name: str, config_cls: str, model_cls: str, config: dict, kv_heads: int,
        exercises: str) -> list[Entry]:
    make = _with_cache(config_cls, model_cls, config)
    return torch_entries(name, make, KV_OUTPUTS, kv_feeds(kv_heads),
                         KV_AXES, exercises, dict(config, cls=model_cls, cache=True), shapes=KV_SHAPES,
                         static=KV_STATIC, example=KV_EXAMPLE)


def encoder_decoders() -> list[Entry]:
    t5 = dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=LAYERS, num_heads=4,
              relative_attention_num_buckets=8, decoder_start_token_id=0)
    bart = dict(vocab_size=VOCAB, d_model=32, encoder_layers=LAYERS, decoder_layers=LAYERS,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=37,
                decoder_ffn_dim=37, max_position_embeddings=64)
    whisper = dict(vocab_size=VOCAB, d_model=32, encoder_layers=LAYERS, decoder_layers=LAYERS,
                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=37,
                   decoder_ffn_dim=37, num_mel_bins=16, max_source_positions=16,
                   max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                   decoder_start_token_id=1)
    return [
        *_text("t5", "T5Config", "T5Model", t5, (*MASKED, "decoder_input_ids"),
               ("last_hidden_state", "encoder_last_hidden_state"),
               "T5: relative position buckets, RMS-style LayerNorm, cross-attention",
               axes=ENC_DEC_AXES, shapes=ENC_DEC_SHAPES, static=ENC_DEC_STATIC),
        *_text("bart", "BartConfig", "BartModel", bart, (*MASKED, "decoder_input_ids"),
               ("last_hidden_state", "encoder_last_hidden_state"),
               "BART: learned positions with an offset, causal decoder, cross-attention",
               axes=ENC_DEC_AXES, shapes=ENC_DEC_SHAPES, static=ENC_DEC_STATIC),
        *torch_entries("whisper", hf_model("WhisperConfig", "WhisperModel", whisper,
                                      ("input_features", "decoder_input_ids"), ("last_hidden_state",)),
                       ("last_hidden_state",), whisper_feeds, WHISPER_AXES,
                       "Whisper: a Conv1d audio encoder over fixed-length mel frames, "
                       "a text decoder over dynamic tokens", dict(whisper, cls="WhisperModel"),
                       shapes=({"batch": 1, "dec": 3}, {"batch": 3, "dec": 7}),
                       static={"batch": 2, "dec": 4}),
    ]


WHISPER_AXES = {"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "dec"}}


def whisper_feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
    """Mel features of exactly twice ``max_source_positions`` frames, and decoder tokens."""
    rng = np.random.default_rng(seed)
    b = dims["batch"]
    return {"input_features": rng.standard_normal((b, 16, 32)).astype(np.float32),
            "decoder_input_ids": rng.integers(0, VOCAB, (b, dims["dec"])).astype(np.int64)}


def text_entries() -> list[Entry]:
    return [*encoders(), *decoders(), *encoder_decoders()]

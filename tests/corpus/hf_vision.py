"""Hugging Face vision and audio models of the corpus, small configs with random weights:
ViT, DeiT, Swin, ConvNeXt, ResNet, MobileNetV2, EfficientNet, SegFormer, DETR (its own
ResNet backbone, nothing downloaded), YOLOS; Wav2Vec2 and HuBERT on raw audio; CLIP on
text and images.  The batch axis is dynamic, and the image size (or the audio length)
where the model allows it."""
from __future__ import annotations

import numpy as np

from corpus.entry import Dims, Entry
from corpus.hf_text import VOCAB, hf_model, padding_mask
from corpus.torch_export import torch_entries

IMAGE = 32
BATCH_AXES = {"pixel_values": {0: "batch"}}
SIZE_AXES = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
BATCH_SHAPES = ({"batch": 1}, {"batch": 3})
BATCH_STATIC = {"batch": 2}
SIZE_SHAPES = ({"batch": 1, "height": 32, "width": 32}, {"batch": 3, "height": 56, "width": 40})
SIZE_STATIC = {"batch": 2, "height": 32, "width": 32}
ENCODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)


def image_feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
    """Normal pixel values, (batch, 3, height, width); 32x32 unless the dims say."""
    rng = np.random.default_rng(seed)
    shape = (dims["batch"], 3, dims.get("height", IMAGE), dims.get("width", IMAGE))
    return {"pixel_values": rng.standard_normal(shape).astype(np.float32)}


def _vision(name: str, config_cls: str, model_cls: str, config: dict, outputs: tuple[str, ...],
            exercises: str, sized: bool = False, **options) -> list[Entry]:
    make = hf_model(config_cls, model_cls, config, ("pixel_values",), outputs)
    shapes = dict(shapes=SIZE_SHAPES, static=SIZE_STATIC) if sized else \
        dict(shapes=BATCH_SHAPES, static=BATCH_STATIC)
    return torch_entries(name, make, outputs, image_feeds, SIZE_AXES if sized else BATCH_AXES,
                         exercises, dict(config, cls=model_cls), **shapes, **options)


POOLED = ("last_hidden_state", "pooler_output")


def transformers_for_images() -> list[Entry]:
    vit = dict(ENCODER, image_size=IMAGE, patch_size=8)
    return [
        *_vision("vit", "ViTConfig", "ViTModel", vit, POOLED,
                 "ViT: patches by a strided Conv, a class token, position embeddings, GELU"),
        *_vision("deit", "DeiTConfig", "DeiTModel", vit, POOLED,
                 "DeiT: ViT with a distillation token"),
        *_vision("swin", "SwinConfig", "SwinModel",
                 dict(image_size=IMAGE, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                      window_size=4, mlp_ratio=2.0), POOLED,
                 "Swin: shifted windows (Roll-like Slices and Concats), relative position bias, "
                 "patch merging"),
        *_vision("yolos", "YolosConfig", "YolosForObjectDetection",
                 dict(vit, image_size=[IMAGE, IMAGE], num_detection_tokens=5, num_labels=3),
                 ("logits", "pred_boxes"), "YOLOS: ViT with detection tokens, box heads with Sigmoid"),
    ]


def convnets() -> list[Entry]:
    return [
        *_vision("convnext", "ConvNextConfig", "ConvNextModel",
                 dict(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2), POOLED,
                 "ConvNeXt: depthwise 7x7 convs, channels-last LayerNorm, layer scale", sized=True),
        *_vision("resnet", "ResNetConfig", "ResNetModel",
                 dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"),
                 POOLED, "ResNet: conv + BatchNorm + ReLU, residual adds, max and average pools",
                 sized=True),
        *_vision("mobilenetv2", "MobileNetV2Config", "MobileNetV2Model",
                 dict(depth_multiplier=0.25, min_depth=4, image_size=IMAGE), POOLED,
                 "MobileNetV2: inverted residuals, depthwise convs, ReLU6 (Clip)", sized=True),
        *_vision("efficientnet", "EfficientNetConfig", "EfficientNetModel",
                 dict(image_size=IMAGE, width_coefficient=0.1, depth_coefficient=0.1, hidden_dim=128),
                 POOLED, "EfficientNet: squeeze-and-excitation, SiLU, depthwise convs with "
                 "explicit padding", sized=True),
        *_vision("segformer", "SegformerConfig", "SegformerForSemanticSegmentation",
                 dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
                      patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
                      decoder_hidden_size=16, num_labels=3), ("logits",),
                 "SegFormer: overlapping patch convs, reduced-key attention, Resize up to the "
                 "largest map", sized=True),
    ]


def detr() -> list[Entry]:
    backbone = dict(model_type="resnet", embedding_size=8, hidden_sizes=[8, 16, 16, 16],
                    depths=[1, 1, 1, 1], layer_type="basic", out_features=["stage4"])
    config = dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=backbone,
                  d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37,
                  num_queries=5, num_labels=3)
    return _vision("detr", "DetrConfig", "DetrForObjectDetection", config, ("logits", "pred_boxes"),
                   "DETR: a ResNet backbone, sine position embeddings from the pixel mask, "
                   "object queries, box heads")


AUDIO_AXES = {"input_values": {0: "batch", 1: "samples"}}
AUDIO = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, vocab_size=VOCAB)


def audio_feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input_values": rng.standard_normal((dims["batch"], dims["samples"])).astype(np.float32)}


def audio() -> list[Entry]:
    shapes = dict(shapes=({"batch": 1, "samples": 400}, {"batch": 3, "samples": 640}),
                  static={"batch": 2, "samples": 480})
    out = []
    for name, prefix, config, note in (
            ("wav2vec2", "Wav2Vec2", AUDIO, "a GroupNorm after its first conv, post-norm layers"),
            ("hubert", "Hubert", dict(AUDIO, feat_extract_norm="layer", do_stable_layer_norm=True),
             "a LayerNorm after every conv, pre-norm layers")):
        make = hf_model(f"{prefix}Config", f"{prefix}Model", config, ("input_values",),
                        ("last_hidden_state",))
        out += torch_entries(name, make, ("last_hidden_state",), audio_feeds, AUDIO_AXES,
                             f"{prefix}: a strided Conv1d feature encoder ({note}), a grouped "
                             "convolutional position embedding, GELU", dict(config, cls=prefix),
                             **shapes)
    return out


CLIP_AXES = {"input_ids": {0: "texts", 1: "seq"}, "attention_mask": {0: "texts", 1: "seq"},
             "pixel_values": {0: "images"}}


def clip_feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
    """Token ids (the last one of a row its end of text, the highest id) and images."""
    rng = np.random.default_rng(seed)
    t, s = dims["texts"], dims["seq"]
    ids = rng.integers(0, VOCAB - 1, (t, s)).astype(np.int64)
    ids[:, -1] = VOCAB - 1
    images = rng.standard_normal((dims["images"], 3, IMAGE, IMAGE)).astype(np.float32)
    return {"input_ids": ids, "attention_mask": padding_mask(t, s), "pixel_values": images}


def clip() -> list[Entry]:
    config = dict(text_config=dict(ENCODER, vocab_size=VOCAB, max_position_embeddings=64,
                                   eos_token_id=VOCAB - 1),
                  vision_config=dict(ENCODER, image_size=IMAGE, patch_size=8), projection_dim=16)
    outputs = ("logits_per_image", "text_embeds", "image_embeds")
    make = hf_model("CLIPConfig", "CLIPModel", config, ("input_ids", "attention_mask", "pixel_values"),
                    outputs)
    return torch_entries("clip", make, outputs, clip_feeds, CLIP_AXES,
                         "CLIP: a causal text encoder pooled at the end-of-text token (ArgMax, "
                         "Gather), a ViT, normalised projections, a scaled similarity",
                         dict(config, cls="CLIPModel"),
                         shapes=({"texts": 1, "seq": 5, "images": 2},
                                 {"texts": 3, "seq": 11, "images": 1}),
                         static={"texts": 2, "seq": 8, "images": 3})


def vision_entries() -> list[Entry]:
    return [*transformers_for_images(), *convnets(), *detr(), *audio(), *clip()]

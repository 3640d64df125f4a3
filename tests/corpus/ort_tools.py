"""The corpus's models after onnxruntime's tools: its transformer optimizer (``optimize_model``:
Attention, SkipLayerNormalization, BiasGelu ... of com.microsoft; once more converted to
float16), a session's own optimized model (``optimized_model_filepath``), ``quantize_dynamic``
on transformers, ``quantize_static`` after ``quant_pre_process`` (as onnxruntime advises) in
QDQ and in QOperator format, calibrated on random inputs, and 4-bit ``MatMulNBits`` weights
of a decoder.  Each derives from another entry of the corpus (its ``base``: the file it
transforms) and keeps its inputs, axes and shapes."""
from __future__ import annotations

import dataclasses
import os

from corpus.entry import QUANTIZED, Entry, Family, Tolerance

#: Base -> the optimizer's model_type, num_heads and hidden_size (0: found in the graph).
OPTIMIZED = {
    "bert-torchscript": ("bert", 4, 32),
    "bert-dynamo": ("bert", 4, 32),
    "bert-eager-torchscript": ("bert", 4, 32),
    "distilbert-torchscript": ("bert", 4, 32),
    "gpt2-torchscript": ("gpt2", 4, 32),
    "bart-torchscript": ("bart", 4, 32),
    "t5-torchscript": ("t5", 4, 32),
    "vit-torchscript": ("vit", 4, 32),
    "swin-torchscript": ("swin", 0, 0),
    "clip-torchscript": ("clip", 4, 32),
}
FP16 = ("bert-eager-torchscript",)            # optimized, then converted to float16
SESSION_OPTIMIZED = ("resnet-torchscript", "bert-eager-torchscript", "gpt2-dynamo")
DYNAMIC = ("bert-torchscript", "gpt2-torchscript", "bert-eager-torchscript-ortopt")
STATIC = ("resnet-torchscript", "mobilenetv2-torchscript", "convnext-dynamo", "bert-torchscript")
MATMUL_ONLY = ("bert-torchscript",)           # QDQ on the MatMuls alone, as transformers often are
NBITS = ("llama-torchscript",)
CALIBRATION_BATCHES = 4
#: onnxruntime's CPU provider computes most float16 ops in float32 between Casts of its own.
FLOAT16 = Tolerance(rtol=1e-2, atol=2e-2, why="float16: onnxruntime computes most ops in float32")


def _optimize(model_type: str, heads: int, hidden: int, fp16: bool = False):
    def build(path: str, base: str) -> None:
        from onnxruntime.transformers.optimizer import optimize_model

        model = optimize_model(base, model_type=model_type, num_heads=heads, hidden_size=hidden)
        if fp16:
            model.convert_float_to_float16(keep_io_types=True)
        model.save_model_to_file(path)

    return build


def session_optimized_build(path: str, base: str) -> None:
    """The model as an onnxruntime CPU session optimizes it at its extended level (FusedConv,
    FusedMatMul, FusedGemm ... of com.microsoft), saved."""
    import onnx
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = path
    weights_inline = onnx.load(base).SerializeToString()   # else it points at base's data file
    ort.InferenceSession(weights_inline, opts, providers=["CPUExecutionProvider"])


def quantize_dynamic_build(path: str, base: str) -> None:
    """Int8 weights, activations quantized at run time (MatMulInteger, DynamicQuantizeLinear;
    QAttention and QEmbedLayerNormalization from the optimizer's ops).  Values that onnx's
    shape inference cannot type (outputs of com.microsoft ops) are taken as float, as
    onnxruntime's docs advise."""
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    quantize_dynamic(base, path, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def _quantize_static(entry: Entry, qdq: bool, op_types: tuple[str, ...] | None = None):
    def build(path: str, base: str) -> None:
        from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                              quantize_static)
        from onnxruntime.quantization.shape_inference import quant_pre_process

        class Reader(CalibrationDataReader):
            """A few random batches at the base's static shape."""

            def __init__(self):
                self.batches = iter([entry.feeds(entry.static, 100 + i)
                                     for i in range(CALIBRATION_BATCHES)])

            def get_next(self):
                return next(self.batches, None)

        pre = f"{path}.pre.onnx"
        try:
            try:                                  # symbolic shape inference, basic optimizations
                quant_pre_process(base, pre)
            except Exception:                     # it cannot type transformers' exports
                quant_pre_process(base, pre, skip_symbolic_shape=True)
            quantize_static(pre, path, Reader(), op_types_to_quantize=op_types,
                            quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
                            per_channel=qdq, weight_type=QuantType.QInt8,
                            activation_type=QuantType.QInt8 if qdq else QuantType.QUInt8)
        finally:
            if os.path.exists(pre):
                os.remove(pre)

    return build


def matmul_nbits_build(path: str, base: str) -> None:
    """4-bit block-quantized MatMul weights (blocks of 16), float activations."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(onnx.load(base), bits=4, block_size=16, is_symmetric=False)
    quantizer.process()
    onnx.save(quantizer.model.model, path)


def derived_entries(entries: dict[str, Entry]) -> list[Entry]:
    """The derived entries, given the torch and skl2onnx ones by name (a base may be a
    derived entry made earlier in this list)."""
    out: list[Entry] = []
    known = dict(entries)

    def add(base: str, suffix: str, family: Family, build, exercises: str, config: dict,
            tolerance: Tolerance | None = None) -> None:
        entry = dataclasses.replace(known[base], name=f"{base}-{suffix}", family=family, build=build,
                                    exercises=exercises, config=dict(config, base=base), base=base,
                                    tolerance=tolerance or known[base].tolerance)
        out.append(entry)
        known[entry.name] = entry

    for name, (kind, heads, hidden) in OPTIMIZED.items():
        add(name, "ortopt", Family.ORT_OPTIMIZER, _optimize(kind, heads, hidden),
            f"onnxruntime's transformer optimizer ({kind}) on {name}: com.microsoft fused ops",
            dict(model_type=kind, heads=heads, hidden=hidden))
    for name in FP16:
        kind, heads, hidden = OPTIMIZED[name]
        add(name, "ortopt-fp16", Family.ORT_OPTIMIZER, _optimize(kind, heads, hidden, fp16=True),
            f"onnxruntime's transformer optimizer on {name}, then convert_float_to_float16 (inputs "
            "and outputs kept float32)", dict(model_type=kind, heads=heads, hidden=hidden, fp16=True),
            FLOAT16)
    for name in SESSION_OPTIMIZED:
        add(name, "ortsession", Family.ORT_OPTIMIZER, session_optimized_build,
            f"{name} as an onnxruntime session saves it optimized (extended level)", {})
    for name in DYNAMIC:
        add(name, "qdynamic", Family.ORT_DYNAMIC, quantize_dynamic_build,
            f"quantize_dynamic on {name}: DynamicQuantizeLinear, MatMulInteger", {}, QUANTIZED)
    for name in STATIC:
        add(name, "qdq", Family.ORT_QDQ, _quantize_static(known[name], qdq=True),
            f"quantize_static (QDQ, per channel) on {name}: QuantizeLinear / DequantizeLinear pairs",
            dict(calibration=CALIBRATION_BATCHES), QUANTIZED)
        add(name, "qop", Family.ORT_QOPERATOR, _quantize_static(known[name], qdq=False),
            f"quantize_static (QOperator) on {name}: QLinearConv, QLinearMatMul, QLinearAdd ...",
            dict(calibration=CALIBRATION_BATCHES), QUANTIZED)
    for name in MATMUL_ONLY:
        add(name, "qdq-matmul", Family.ORT_QDQ, _quantize_static(known[name], True, ("MatMul",)),
            f"quantize_static (QDQ, per channel) of {name}'s MatMuls alone",
            dict(calibration=CALIBRATION_BATCHES, ops=("MatMul",)), QUANTIZED)
    for name in NBITS:
        add(name, "int4", Family.ORT_NBITS, matmul_nbits_build,
            f"MatMulNBitsQuantizer (4 bits, blocks of 16) on {name}: MatMulNBits",
            dict(bits=4, block=16), QUANTIZED)
    return out
